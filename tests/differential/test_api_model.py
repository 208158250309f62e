"""trainops/spec/sagemaker_api.json is what generate_api_model.py writes from the installed botocore: a botocore
upgrade (constraints.txt) that changes the API's instance types or limits fails here until the file is regenerated
(`.venv/bin/python tests/differential/generate_api_model.py`)."""

from __future__ import annotations

import json

from differential.generate_api_model import TARGET, build


def test_generated_model_matches_the_installed_botocore():
    committed = json.loads(TARGET.read_text())
    current = build()
    assert committed["botocore"] == current["botocore"]
    assert committed["training_instance_types"] == current["training_instance_types"]
    assert committed == current


def test_model_has_the_limits_trainops_checks():
    model = build()["create_training_job"]
    assert model["HyperParameters"]["max"] == 100 and model["Environment"]["max"] == 100
    assert model["InputDataConfig[].DataSource.S3DataSource.S3Uri"]["max"] == 1024
    assert model["Tags[].Key"]["pattern"].startswith("([\\p{L}")
    assert "ml.g5.xlarge" in build()["training_instance_types"]
    assert "ml.g5.xxlarge" not in build()["training_instance_types"]
