"""Every step takes a backend's name or a backend already opened through one resolver (`trainops.backends.get_backend`):
settings given beside an opened backend cannot reach it, so they are refused, naming them, before anything is created
(issue 38: they used to be dropped without a word). A name with the same settings still runs."""

from __future__ import annotations

import pytest

from trainops.backends import get_backend
from trainops.errors import SpecError
from trainops.steps.evaluate import evaluate
from trainops.steps.register import register
from trainops.steps.stage import stage
from trainops.steps.train import train


@pytest.fixture
def opened(tmp_path):
    return get_backend("local", workdir=str(tmp_path / "work"), registry_dir=str(tmp_path / "registry"))


def refused_fields(raised: pytest.ExceptionInfo[SpecError]) -> list[str]:
    return [problem.path for problem in raised.value.problems]


def test_the_resolver_returns_an_opened_backend_and_refuses_what_cannot_reach_it(opened, tmp_path):
    assert get_backend(opened) is opened
    # None is "not given"; a common key the backend does not read is left out, as it is for a name.
    assert get_backend(opened, options={}, registry_dir=None, poll_seconds=5) is opened
    with pytest.raises(SpecError) as raised:
        get_backend(opened, options={"processes_per_host": 2}, source="backend_options")
    assert refused_fields(raised) == ["backend_options"]
    message = str(raised.value)
    assert "processes_per_host" in message and "already opened" in message
    assert "give the backend's name with backend_options, or open it with them" in message
    with pytest.raises(SpecError) as raised:
        get_backend(opened, registry_dir=str(tmp_path / "elsewhere"), options={"launcher": "torchrun"})
    assert refused_fields(raised) == ["backend_options", "registry_dir"]
    with pytest.raises(SpecError, match="colour: is not a backend setting"):
        get_backend(opened, colour="blue")


def test_stage_refuses_options_beside_an_opened_backend_and_copies_nothing(opened, tmp_path):
    source = tmp_path / "raw"
    source.mkdir()
    (source / "part-0.npz").write_bytes(b"0" * 10)
    with pytest.raises(SpecError) as raised:
        stage(str(source), str(tmp_path / "fsx"), backend=opened, backend_options={"processes_per_host": 2})
    assert refused_fields(raised) == ["backend_options"]
    with pytest.raises(SpecError) as raised:
        stage(str(source), str(tmp_path / "fsx"), backend=opened, region="eu-west-1")
    assert refused_fields(raised) == ["region"]
    assert not (tmp_path / "fsx").exists()
    assert stage(str(source), str(tmp_path / "fsx"), backend=opened)["files_copied"] == 1
    named = stage(str(source), str(tmp_path / "fsx2"), backend="local",
                  backend_options={"workdir": str(tmp_path / "work")})
    assert named["files_copied"] == 1


SCRIPT = """
import json, os
json.dump({"accuracy": 0.97}, open(os.path.join(os.environ["TRAINOPS_EVALUATION_DIR"], "metrics.json"), "w"))
"""


def test_evaluate_refuses_options_and_a_registry_beside_an_opened_backend(opened, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "evaluate.py").write_text(SCRIPT)
    model = tmp_path / "model"
    model.mkdir()
    inputs = dict(entry_point="evaluate.py", source_dir=code, model_artifact=model, channels={},
                  output_dir=tmp_path / "evaluation", sink=lambda line, from_stderr: None)
    with pytest.raises(SpecError) as raised:
        evaluate(**inputs, backend=opened, backend_options={"processes_per_host": 2})
    assert refused_fields(raised) == ["backend_options"]
    with pytest.raises(SpecError) as raised:
        evaluate(**inputs, backend=opened, registry_dir=tmp_path / "other-registry")
    assert refused_fields(raised) == ["registry_dir"]
    assert not (tmp_path / "evaluation").exists()
    assert evaluate(**inputs, backend=opened, gate="accuracy >= 0.9").passed


def test_register_refuses_options_beside_an_opened_backend_with_every_other_problem(opened, tmp_path):
    artifact = tmp_path / "model.tar.gz"
    artifact.write_bytes(b"model")
    with pytest.raises(SpecError) as raised:
        register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", backend=opened,
                 backend_options={"registry_dir": str(tmp_path / "other")}, approval="Maybe")
    assert refused_fields(raised) == ["backend_options", "approval"]  # one error lists both
    assert not (tmp_path / "other").exists() and not (tmp_path / "registry").exists()
    entry = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", backend=opened,
                     job_name="digits-1")
    assert entry["version"] == 1 and entry["location"].startswith(str(tmp_path / "registry"))


@pytest.mark.parametrize("given, field", [({"backend_options": {"processes_per_host": 2}}, "backend_options"),
                                          ({"workdir": "elsewhere"}, "workdir")])
def test_train_refuses_settings_beside_an_opened_backend_before_anything_is_created(opened, tmp_path, given, field):
    spec = {"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "local"}
    with pytest.raises(SpecError) as raised:
        train(spec, backend=opened, job_name="digits-1", **given)
    assert refused_fields(raised) == [field]
    assert not (tmp_path / "work").exists()
