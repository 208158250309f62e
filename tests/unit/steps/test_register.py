"""The register step: the local registry through the step (same result keys as SageMaker), spec capture, champion
lookup, and the SageMaker Model Registry path against a moto server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trainops.backends import get_backend
from trainops.errors import SpecError
from trainops.steps.register import approval_for_gate, register, spec_as_json

RESULT_KEYS = {"already_registered", "backend", "group", "version", "approval_status", "model_artifact", "metrics",
               "champion", "created", "job_name", "location"}


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "model.tar.gz"
    path.write_bytes(b"model")
    return path


def test_approval_follows_the_gate():
    assert approval_for_gate(True) == "Approved"
    assert approval_for_gate(True, manual_approval=True) == "PendingManualApproval"
    assert approval_for_gate(False) == "Rejected"
    assert approval_for_gate(False, manual_approval=True) == "Rejected"


def test_local_registration_result_and_champion(tmp_path, artifact):
    registry = tmp_path / "registry"
    first = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", registry_dir=registry,
                     job_name="digits-1", spec={"name": "digits"})
    assert set(first) == RESULT_KEYS
    assert json.loads(json.dumps(first)) == first  # an XCom value as it is
    assert (first["version"], first["approval_status"], first["champion"]) == (1, "Approved", True)
    assert Path(first["location"]) == registry.resolve() / "digits" / "v1"
    rejected = register(model_artifact=artifact, metrics={"accuracy": 0.8}, group="digits", registry_dir=registry,
                        approval=approval_for_gate(False))
    assert (rejected["version"], rejected["approval_status"], rejected["champion"]) == (2, "Rejected", False)
    local = get_backend("local", registry_dir=registry)
    champion = local.champion("digits")
    assert champion.version == 1 and champion.metrics == {"accuracy": 0.9}
    assert local.champion("unknown") is None


def test_spec_from_a_file_and_from_a_job_spec(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "digits", "instance_count": 2}))
    assert spec_as_json(path) == {"name": "digits", "instance_count": 2}
    assert spec_as_json(None) is None

    class FakeJobSpec:
        def to_json_dict(self):
            return {"name": "typed"}

    assert spec_as_json(FakeJobSpec()) == {"name": "typed"}
    with pytest.raises(SpecError) as caught:
        spec_as_json(42)
    assert caught.value.problems[0].path == "spec"


def test_bad_backend_and_approval_are_reported_together(artifact):
    with pytest.raises(SpecError) as caught:
        register(model_artifact=artifact, metrics={}, group="digits", backend="mlflow", approval="yes")
    assert [problem.path for problem in caught.value.problems] == ["backend", "approval"]


def test_sagemaker_needs_an_image_and_an_s3_artifact(artifact):
    with pytest.raises(SpecError) as caught:
        register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", backend="sagemaker",
                 client_factory=lambda service: pytest.fail("no AWS call expected"))
    assert [problem.path for problem in caught.value.problems] == ["image_uri", "model_artifact"]


def test_sagemaker_model_registry_against_moto(aws_clients):
    s3 = aws_clients("s3")
    s3.create_bucket(Bucket="models")
    common = dict(group="digits-sm", backend="sagemaker", image_uri="pytorch-inference:2.3-cpu",
                  client_factory=aws_clients)
    sagemaker = get_backend("sagemaker", client_factory=aws_clients)
    assert sagemaker.champion("digits-sm") is None
    first = register(model_artifact="s3://models/job-1/output/model.tar.gz", metrics={"accuracy": 0.93},
                     job_name="job-1", spec={"name": "digits"}, **common)
    assert set(first) == RESULT_KEYS
    assert (first["version"], first["approval_status"], first["champion"]) == (1, "Approved", True)
    assert first["metrics"] == {"accuracy": 0.93}
    assert first["location"].startswith("arn:aws:sagemaker:")
    stored = s3.get_object(Bucket="models", Key="job-1/output/model-metrics.json")["Body"].read()
    assert json.loads(stored) == {"accuracy": 0.93}
    second = register(model_artifact="s3://models/job-2/output/model.tar.gz", metrics={"accuracy": 0.8},
                      approval="Rejected", **common)
    assert (second["version"], second["champion"]) == (2, False)
    champion = sagemaker.champion("digits-sm")
    assert champion.version == 1 and champion.metrics == {"accuracy": 0.93}


def test_the_same_training_job_is_registered_once(tmp_path, artifact):
    registry = tmp_path / "registry"
    first = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", registry_dir=registry,
                     job_name="digits-1")
    again = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", registry_dir=registry,
                     job_name="digits-1")
    other = register(model_artifact=artifact, metrics={"accuracy": 0.91}, group="digits", registry_dir=registry,
                     job_name="digits-2")
    assert (first["version"], again["version"], other["version"]) == (1, 1, 2)
    assert (first["already_registered"], again["already_registered"], other["already_registered"]) == (
        False, True, False)


def test_the_loser_of_a_registration_race_says_already_registered(tmp_path, artifact, monkeypatch):
    """Two registrations of one job both find no version at first; the one whose version was made first wins under
    the group's lock and the other gets that version back: it must not report already_registered false as if it
    had added one (ten racing processes reported ten adders)."""
    from trainops.backends.local.registry import LocalRegistry

    registry = tmp_path / "registry"
    real_locked = LocalRegistry._locked
    raced: list = []

    def rival_commits_first(self, group):
        if not raced:
            raced.append(None)  # the rival's own registration passes straight through
            raced[0] = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits",
                                registry_dir=registry, job_name="digits-1")
        return real_locked(self, group)

    monkeypatch.setattr(LocalRegistry, "_locked", rival_commits_first)
    loser = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", registry_dir=registry,
                     job_name="digits-1")
    assert (raced[0]["version"], raced[0]["already_registered"]) == (1, False)
    assert (loser["version"], loser["already_registered"]) == (1, True)
    assert [entry.version for entry in LocalRegistry(registry).list("digits")] == [1]


def test_secret_environment_values_never_reach_the_registry(tmp_path, artifact):
    spec = {"name": "digits", "entry_point": "train.py", "instance_type": "local",
            "environment": {"HF_TOKEN": "hf_verysecretvalue", "NCCL_DEBUG": "INFO"}}
    entry = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits",
                     registry_dir=tmp_path / "registry", job_name="digits-1", spec=spec)
    stored = "".join(path.read_text(errors="replace") for path in (tmp_path / "registry").rglob("*.json"))
    assert "hf_verysecretvalue" not in stored and "NCCL_DEBUG" in stored
    assert entry["version"] == 1
