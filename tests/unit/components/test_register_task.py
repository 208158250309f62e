"""The register and gate-failed components on the local backend."""

from __future__ import annotations

import json

import pytest
from kfp.dsl import HTML, Metrics, Model

from trainops.components.factory import build_components
from trainops.components.settings import LOCAL_SETTINGS
from trainops.steps.gate import GateFailed

ops = build_components(LOCAL_SETTINGS)
SPEC = {"name": "tiny", "entry_point": "train.py", "source_dir": "code", "instance_type": "ml.m5.large"}


def register_inputs(tmp_path, **changes):
    inputs = dict(spec_json=json.dumps(SPEC), spec_dir=".", backend="local", workdir=str(tmp_path / "work"),
                  pipeline_dir=str(tmp_path), group="tiny", approval="Approved", registry_dir="", description="",
                  region="")
    inputs.update(changes)
    return inputs


def test_register_records_the_model_with_the_evaluations_metrics_in_the_workdir_registry(tmp_path):
    artifact = tmp_path / "model.tar.gz"
    artifact.write_bytes(b"model")
    model = Model(name="model", uri=str(artifact), metadata={"model_artifact": str(artifact), "job_name": "tiny-1"})
    metrics = Metrics(name="metrics", uri=str(tmp_path / "m"), metadata={"accuracy": 0.97, "test_images": 360.0})
    version, approval, location = ops.register.python_func(model=model, metrics=metrics,
                                                          **register_inputs(tmp_path))
    assert (version, approval) == (1, "Approved")
    entry = json.loads((tmp_path / "work" / "registry" / "tiny" / "v1" / "entry.json").read_text())
    assert location == str(tmp_path / "work" / "registry" / "tiny" / "v1")
    assert entry["metrics"] == {"accuracy": 0.97, "test_images": 360.0} and entry["job_name"] == "tiny-1"
    assert entry["spec"]["source_dir"] == str(tmp_path / "code")  # resolved where the component ran

    again = ops.register.python_func(model=model, metrics=metrics, **register_inputs(
        tmp_path, registry_dir="elsewhere", approval="PendingManualApproval"))
    assert again[:2] == (1, "PendingManualApproval") and again[2] == str(tmp_path / "elsewhere" / "tiny" / "v1")


def test_register_without_an_evaluation_registers_no_metrics(tmp_path):
    artifact = tmp_path / "model.tar.gz"
    artifact.write_bytes(b"model")
    model = Model(name="model", uri=str(artifact), metadata={})
    version, _, location = ops.register.python_func(model=model, **register_inputs(tmp_path))
    assert version == 1
    assert json.loads((tmp_path / "work" / "registry" / "tiny" / "v1" / "entry.json").read_text())["metrics"] == {}


def test_gate_failed_fails_with_the_gates_message(tmp_path):
    report = HTML(name="report", uri=str(tmp_path / "r"), metadata={"message": "gate failed: accuracy = 0.9 is "
                                                                               "not >= 0.95"})
    with pytest.raises(GateFailed, match="accuracy = 0.9 is not >= 0.95; it was not registered"):
        ops.gate_failed.python_func(report=report)
