"""The evaluate step: local evaluation with gates (fixed and champion), the JSON result, the SageMaker path (its
bootstrap run here under the processing container's layout, and the whole call against a moto server)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from trainops.backends.sagemaker.evaluation_bootstrap import BOOTSTRAP_NAME, bootstrap_source
from trainops.errors import SpecError
from trainops.steps.evaluate import evaluate
from trainops.steps.gate import GateFailed
from trainops.steps.register import register

# Writes the accuracy it finds in the model, and a report and a plot beside metrics.json.
SCRIPT = textwrap.dedent("""
    import json, os, sys
    accuracy = float(open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "accuracy.txt")).read())
    out = os.environ["TRAINOPS_EVALUATION_DIR"]
    open(os.path.join(out, "notes.md"), "w").write("notes")
    open(os.path.join(out, "report.html"), "w").write("<h1>report</h1>")
    open(os.path.join(out, "loss.png"), "wb").write(b"png")
    json.dump({"accuracy": accuracy, "loss": 1 - accuracy}, open(os.path.join(out, "metrics.json"), "w"))
""")


def model_archive(path: Path, accuracy: float) -> Path:
    data = str(accuracy).encode()
    with tarfile.open(path, "w:gz") as bundle:
        info = tarfile.TarInfo("accuracy.txt")
        info.size = len(data)
        bundle.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def setup(tmp_path):
    source = tmp_path / "code"
    source.mkdir()
    (source / "evaluate.py").write_text(SCRIPT)
    test = tmp_path / "test"
    test.mkdir()
    return {"source": source, "test": test, "tmp": tmp_path, "registry": tmp_path / "registry"}


def run(setup, accuracy: float, gate, **extra):
    model = model_archive(setup["tmp"] / f"model-{accuracy}.tar.gz", accuracy)
    return evaluate(entry_point="evaluate.py", source_dir=setup["source"], model_artifact=model,
                    channels={"test": setup["test"]}, output_dir=setup["tmp"] / f"evaluation-{accuracy}", gate=gate,
                    sink=lambda line, from_stderr: None, **extra)


def test_passing_gate_and_small_json_result(setup):
    result = run(setup, 0.97, "accuracy >= 0.95")
    assert result.passed and result.metrics["accuracy"] == 0.97
    assert result.gate.message == "gate passed: accuracy = 0.97 >= 0.95"
    assert result.report.endswith("report.html")  # report.* wins over other documents
    assert [Path(plot).name for plot in result.plots] == ["loss.png"]
    data = json.loads(json.dumps(result.to_dict()))
    assert data["passed"] is True and data["backend"] == "local"
    assert data["gate"]["threshold"] == 0.95
    assert data["metrics"] == result.metrics
    result.raise_for_gate()  # passes: no exception


def test_failing_gate_is_a_result_and_raise_for_gate_names_it(setup):
    result = run(setup, 0.912, ["loss <= 0.5", "accuracy >= 0.95"])
    assert not result.passed
    assert [gate.passed for gate in result.gates] == [True, False]
    assert result.gate.metric == "accuracy"
    with pytest.raises(GateFailed) as caught:
        result.raise_for_gate()
    assert str(caught.value).splitlines()[0] == "gate failed: accuracy = 0.912 is not >= 0.95"


def test_no_gate_passes(setup):
    result = run(setup, 0.5, None)
    assert result.passed and result.gates == [] and result.to_dict()["gate"] is None


def test_champion_gate_reads_the_registry(setup):
    first = run(setup, 0.90, "accuracy > champion", champion_group="digits", registry_dir=setup["registry"])
    assert first.passed and "no champion yet" in first.gate.message
    register(model_artifact=setup["tmp"] / "model-0.9.tar.gz", metrics=first.metrics, group="digits",
             registry_dir=setup["registry"])
    better = run(setup, 0.93, "accuracy > champion", champion_group="digits", registry_dir=setup["registry"])
    assert better.passed and better.champion_version == 1
    assert better.gate.message == "gate passed: accuracy = 0.93 > 0.9 (champion version 1)"
    worse = run(setup, 0.85, "accuracy > champion", champion_group="digits", registry_dir=setup["registry"])
    assert not worse.passed and "is not > 0.9 (champion version 1)" in worse.gate.message


def test_champion_metrics_may_be_given_directly(setup):
    result = run(setup, 0.9, "accuracy >= champion", champion={"accuracy": 0.95})
    assert not result.passed and result.gate.threshold == 0.95
    # An explicit None says there is no champion yet (a caller that looked it up and found none).
    first = run(setup, 0.9, "accuracy >= champion", champion=None)
    assert first.passed and "no champion yet" in first.gate.message


def test_champion_gate_without_a_champion_source_fails_before_running(setup):
    with pytest.raises(SpecError) as caught:
        run(setup, 0.9, "accuracy > champion")
    assert caught.value.problems[0].path == "champion_group"
    assert not (setup["tmp"] / "evaluation-0.9" / "metrics.json").exists()


@pytest.mark.parametrize(("arguments", "field"), [({"backend": "no-such-engine"}, "backend"),
                                                  ({"gate": "accuracy ~ 1"}, "gate.operator")])
def test_bad_input(setup, arguments, field):
    with pytest.raises(SpecError) as caught:
        run(setup, 0.9, arguments.pop("gate", None), **arguments)
    assert caught.value.problems[0].path == field


def test_sagemaker_needs_role_image_and_one_channel(setup):
    with pytest.raises(SpecError) as caught:
        evaluate(entry_point="evaluate.py", source_dir=setup["source"], model_artifact="s3://b/model.tar.gz",
                 channels={"test": "s3://b/test", "extra": "s3://b/extra"}, output_dir="s3://b/eval",
                 backend="sagemaker", client_factory=lambda service: pytest.fail("no AWS call expected"))
    assert [problem.path for problem in caught.value.problems] == ["role", "image_uri", "channels"]


def test_bootstrap_gives_the_user_script_the_contract(tmp_path):
    """The processing container's layout: model.tar.gz unextracted, directory options first; the user's script,
    unchanged from the local run, finds the extracted model, its channel and its output directory."""
    processing = tmp_path / "opt" / "ml" / "processing"
    code, model, holdout, output = (processing / name for name in ("code", "model", "test", "evaluation"))
    for directory in (code, model, holdout):
        directory.mkdir(parents=True)
    model_archive(model / "model.tar.gz", 0.96)
    (code / BOOTSTRAP_NAME).write_text(bootstrap_source())
    (code / "evaluate.py").write_text(SCRIPT + textwrap.dedent("""
        json.dump({"argv": sys.argv[1:], "channels": os.environ["SM_CHANNELS"],
                   "holdout": os.environ["SM_CHANNEL_HOLDOUT"], "output": os.environ["SM_OUTPUT_DATA_DIR"]},
                  open(os.path.join(out, "seen.json"), "w"))
    """))
    env = dict(os.environ, TRAINOPS_MODEL_DIR=str(model), TRAINOPS_TEST_DIR=str(holdout),
               TRAINOPS_OUTPUT_DIR=str(output), TRAINOPS_EVALUATION_ENTRY_POINT="evaluate.py",
               TRAINOPS_EVALUATION_CHANNEL="holdout")
    subprocess.run([sys.executable, str(code / BOOTSTRAP_NAME), "--model-dir", str(model), "--test-dir",
                    str(holdout), "--output-dir", str(output), "--batch_size", "64"], env=env, check=True,
                   cwd=tmp_path)
    assert json.loads((output / "metrics.json").read_text())["accuracy"] == 0.96
    seen = json.loads((output / "seen.json").read_text())
    assert seen == {"argv": ["--batch_size", "64"], "channels": '["holdout", "model"]', "holdout": str(holdout),
                    "output": str(output)}


def bootstrap_archive(tmp_path, members) -> Path:
    """``model/model.tar.gz`` under ``tmp_path`` holding ``members`` ((TarInfo, bytes or None) pairs), and the
    bootstrap beside it; returns the model directory."""
    model = tmp_path / "model"
    model.mkdir()
    with tarfile.open(model / "model.tar.gz", "w:gz") as bundle:
        for info, data in members:
            bundle.addfile(info, io.BytesIO(data) if data is not None else None)
    (tmp_path / BOOTSTRAP_NAME).write_text(bootstrap_source())
    return model


def run_bootstrap(tmp_path, model, entry_point="missing.py", **variables) -> subprocess.CompletedProcess:
    """The bootstrap under the processing container's variables, as its entry point."""
    env = dict(os.environ, TRAINOPS_MODEL_DIR=str(model), TRAINOPS_TEST_DIR=str(tmp_path),
               TRAINOPS_OUTPUT_DIR=str(tmp_path / "out"), TRAINOPS_EVALUATION_ENTRY_POINT=entry_point, **variables)
    return subprocess.run([sys.executable, str(tmp_path / BOOTSTRAP_NAME)], env=env, capture_output=True, text=True)


def member(name, data=b"", **fields) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def test_bootstrap_refuses_an_escaping_archive(tmp_path):
    model = bootstrap_archive(tmp_path, [member("../escape.txt", b"x")])
    completed = run_bootstrap(tmp_path, model)
    assert completed.returncode != 0 and "outside the model directory" in completed.stderr
    assert not (tmp_path / "escape.txt").exists()


def test_bootstrap_refuses_an_archive_larger_than_the_limit_before_writing(tmp_path):
    """The SageMaker bootstrap had no size cap: a small archive of zeros could fill the processing volume. It now
    adds up the headers first, against TRAINOPS_MAX_MODEL_BYTES (the local extraction's limit) and the free space."""
    zeros = bytes(3 * 1024 * 1024)
    model = bootstrap_archive(tmp_path, [member("weights-a.bin", zeros), member("weights-b.bin", zeros)])
    assert (model / "model.tar.gz").stat().st_size < 64 * 1024
    completed = run_bootstrap(tmp_path, model, TRAINOPS_MAX_MODEL_BYTES=str(5 * 1024 * 1024))
    assert completed.returncode != 0
    assert ("expands to at least 6.0 MiB (up to member 'weights-b.bin'), more than the limit of 5.0 MiB"
            in completed.stderr)
    assert "TRAINOPS_MAX_MODEL_BYTES" in completed.stderr and "Traceback" not in completed.stderr
    assert not (tmp_path / "model-extracted").exists()  # nothing written, the directory it made removed
    # Under the limit the same archive is extracted and the script runs (here: a script that lists the model).
    (tmp_path / "list.py").write_text("import os\nprint(sorted(os.listdir(os.environ['SM_CHANNEL_MODEL'])))\n")
    completed = run_bootstrap(tmp_path, model, "list.py", TRAINOPS_MAX_MODEL_BYTES=str(7 * 1024 * 1024))
    assert completed.returncode == 0, completed.stderr
    assert "['weights-a.bin', 'weights-b.bin']" in completed.stdout


def test_bootstrap_names_the_limit_variable_when_its_value_is_not_a_number(tmp_path):
    model = bootstrap_archive(tmp_path, [member("weights.bin", b"w")])
    completed = run_bootstrap(tmp_path, model, TRAINOPS_MAX_MODEL_BYTES="abc")
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    assert "TRAINOPS_MAX_MODEL_BYTES: 'abc' is not a positive number of bytes" in completed.stderr


def test_the_standalone_extraction_opens_files_as_safe_fs_does():
    """model_extract cannot import safe_fs (its text runs where trainops is not installed), so it has its own copy
    of the open flags: they must stay the same."""
    from trainops.backends import model_extract
    from trainops.backends.hostfs import safe_fs

    assert model_extract._NEW_FILE_FLAGS == safe_fs.NEW_FILE_FLAGS
    assert model_extract._DIRECTORY_FLAGS == safe_fs.DIRECTORY_FLAGS


def test_bootstrap_refuses_a_link_member(tmp_path):
    model = bootstrap_archive(tmp_path, [member("inside-link", type=tarfile.SYMTYPE, linkname="weights.bin")])
    completed = run_bootstrap(tmp_path, model)
    assert completed.returncode != 0 and "extracted without links" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_bootstrap_runs_the_local_extraction_itself(tmp_path):
    """The bootstrap carries the text of the extraction the local backend runs (model_extract), instead of its own
    smaller copy (realpath checks and tarfile's extractall): the CVE-2025-4517 chain of long links is refused, and a
    link already where a member goes is refused by the O_NOFOLLOW creation, without resolving any path."""
    from tests.reliability.files_scenarios import realpath_overflow_archive
    from trainops.backends import model_extract

    assert bootstrap_source().startswith(Path(model_extract.__file__).read_text(encoding="utf-8"))
    job = tmp_path / "job"  # the archive aims at model-extracted/../../victim.txt: tmp_path/victim.txt
    (job / "model").mkdir(parents=True)
    (job / BOOTSTRAP_NAME).write_text(bootstrap_source())
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    realpath_overflow_archive(job / "model" / "model.tar.gz", job / "model-extracted", victim="victim.txt")
    completed = run_bootstrap(job, job / "model")
    assert completed.returncode != 0 and "extracted without links" in completed.stderr
    assert victim.read_text() == "original" and not (job / "model-extracted").exists()

    planted = tmp_path / "planted"
    planted.mkdir()
    model = bootstrap_archive(planted, [member("weights.bin", b"new weights")])
    (planted / "model-extracted").mkdir()
    (planted / "model-extracted" / "weights.bin").symlink_to(victim)
    completed = run_bootstrap(planted, model)
    assert completed.returncode != 0 and "is already there and is not a file" in completed.stderr
    assert victim.read_text() == "original"


class RecordingFactory:
    """The moto-backed factory, recording the processing job requests (moto does not keep their environment)."""

    def __init__(self, factory):
        self.factory = factory
        self.requests: list[dict] = []

    def __call__(self, service):
        client = self.factory(service)
        if service != "sagemaker":
            return client
        recorder = self

        class Recording:
            def __getattr__(self, name):
                return getattr(client, name)

            def create_processing_job(self, **request):
                recorder.requests.append(request)
                return client.create_processing_job(**request)

        return Recording()


def test_sagemaker_evaluation_against_moto(setup, aws_clients, monkeypatch):
    """Upload, request and metrics read-back through a moto server (moto completes processing jobs at once, so the
    metrics the job would write are put in place beforehand)."""
    s3 = aws_clients("s3")
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="eval/run-1/metrics.json", Body=b'{"accuracy": 0.96, "loss": 0.1}')
    monkeypatch.setenv("TRAINOPS_MAX_MODEL_BYTES", "123456789")  # the container gets this process's limit
    factory = RecordingFactory(aws_clients)
    arguments = dict(entry_point="evaluate.py", source_dir=setup["source"],
                     model_artifact="s3://models/job/output/model.tar.gz", channels={"holdout": "s3://models/test"},
                     output_dir="s3://models/eval/run-1", backend="sagemaker", hyperparameters={"batch_size": 64},
                     role="arn:aws:iam::123456789012:role/evaluation", image_uri="pytorch-training:2.3-cpu",
                     client_factory=factory)
    result = evaluate(gate="accuracy >= 0.95", **arguments)
    assert result.passed and result.backend == "sagemaker"
    assert result.metrics == {"accuracy": 0.96, "loss": 0.1}
    assert result.metrics_path == "s3://models/eval/run-1/metrics.json"
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket="models", Prefix="eval/run-1/code/")["Contents"]}
    assert keys == {f"eval/run-1/code/{BOOTSTRAP_NAME}", "eval/run-1/code/evaluate.py"}
    [request] = factory.requests
    assert request["ProcessingJobName"] == result.job_name
    assert request["AppSpecification"]["ContainerEntrypoint"][-1].endswith("/" + BOOTSTRAP_NAME)
    assert request["AppSpecification"]["ContainerArguments"][-2:] == ["--batch_size", "64"]
    assert request["Environment"]["TRAINOPS_EVALUATION_ENTRY_POINT"] == "evaluate.py"
    assert request["Environment"]["TRAINOPS_EVALUATION_CHANNEL"] == "holdout"
    assert request["Environment"]["TRAINOPS_MAX_MODEL_BYTES"] == "123456789"
    # The same call again (a retried task) re-attaches to the job of that name instead of creating another.
    again = evaluate(**arguments)
    assert again.job_name == result.job_name and len(factory.requests) == 1
