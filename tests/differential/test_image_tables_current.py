"""trainops/spec/image_tables.json knows every training version and region the newest SageMaker SDK knows.

goldens/sdk_image_versions.json is what regenerate_tables.py read from the SDK's image_uri_config (v3's
sagemaker-core, in ~/.cache/trainops-oracle-v3): each PyTorch / TensorFlow training version with the regions it is
published in, and the short-version aliases. trainops resolves an image for each of them, so a regenerated table that
lost a version or region fails here, and so does a new SDK whose tables were captured without regenerating.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainops.errors import SpecError
from trainops.spec.images import resolve_training_image

KNOWN = json.loads((Path(__file__).resolve().parent / "goldens" / "sdk_image_versions.json").read_text())
TABLES = json.loads((Path(__file__).resolve().parents[2] / "trainops" / "spec" / "image_tables.json").read_text())


def _resolves(framework: str, version: str, region: str) -> str | None:
    """An image for ``version`` in ``region`` on a GPU or a CPU type (old versions have one of the two), or the
    refusal's text."""
    refusals = []
    for instance_type in ("ml.p3.2xlarge", "ml.c5.xlarge"):
        try:
            return resolve_training_image(framework, version, None, instance_type, region)
        except SpecError as error:
            refusals.append(str(error))
    return " | ".join(refusals)


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_every_sdk_version_is_in_the_table(framework):
    table = TABLES["images"][framework]["training"]
    missing = [version for version in KNOWN[framework] if version not in table["versions"]]
    assert not missing
    for alias, target in KNOWN[f"{framework}_aliases"].items():
        assert table["version_aliases"].get(alias) == target


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_every_sdk_version_resolves_in_every_region_the_sdk_lists(framework):
    failures = []
    for version, regions in KNOWN[framework].items():
        if framework == "tensorflow" and _version(version)[:2] <= (1, 10):
            continue  # refused on purpose: legacy-mode only images (ADJUDICATIONS.md, tensorflow legacy mode)
        for region in regions:
            image = _resolves(framework, version, region)
            if f".dkr.ecr.{region}." not in (image or "").split("/")[0]:
                failures.append((version, region, image))
    assert not failures, failures[:5]


def test_the_newest_sdk_s_versions_and_region():
    assert "2.10.0" in KNOWN["pytorch"] and "2.21.0" in KNOWN["tensorflow"]
    assert "me-west-1" in KNOWN["pytorch"]["2.10.0"]
    assert resolve_training_image("pytorch", "2.10.0", None, "ml.p5.48xlarge", "me-west-1") == \
        "124382933778.dkr.ecr.me-west-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313"
    assert resolve_training_image("tensorflow", "2.21.0", None, "ml.g5.xlarge", "us-east-1").endswith(
        "/tensorflow-training:2.21.0-gpu-py312")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())
