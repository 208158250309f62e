"""The train component: deterministic names, re-attach on re-runs (local and stubbed SageMaker), SIGTERM stops the job.

The component function itself (``train_model.python_func``, the code KFP runs) is called, with KFP's own Model
artifact; SageMaker is an in-memory fake behind the client factory, so no AWS call leaves the machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from kfp.dsl import Metrics, Model

from trainops.backends import get_backend
from trainops.components.factory import build_components
from trainops.components.paths import places
from trainops.components.settings import LOCAL_SETTINGS
from trainops.components.train_task import (
    StopOnSigterm,
    load_component_spec,
    run_train,
    train_job_name,
)
from trainops.errors import JobFailed, SpecError

HERE = Path(__file__).parent
#: The train component as KFP runs it: its function behind ``dsl.component``.
train_model = build_components(LOCAL_SETTINGS).train

TRAIN_SCRIPT = """\
import json, os, sys, time
model_dir = os.environ["SM_MODEL_DIR"]
with open(os.path.join(model_dir, "model.json"), "w") as handle:
    json.dump({"files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"]))}, handle)
print("TRAINED", flush=True)
time.sleep(float(os.environ.get("SLEEP", "0")))
"""

SAGEMAKER_SPEC = {
    "name": "kfp-test", "role": "arn:aws:iam::111122223333:role/SageMakerTrainingRole", "region": "us-east-1",
    "framework_version": "2.2.0", "py_version": "py310", "entry_point": "train.py",
    "source_dir": "s3://example-code/kfp-test/sourcedir.tar.gz", "instance_type": "ml.g5.xlarge",
    "instance_count": 2, "distribution": {"torch_distributed": {"enabled": True}},
    "inputs": {"train": "s3://example-data/train/"}, "output_path": "s3://example-output/kfp",
}


# --- an in-memory SageMaker -----------------------------------------------------------------------------------------

class FakeSageMaker:
    """Training jobs in a dict: created InProgress (or Completed with ``complete_on_create``), Stopping then Stopped
    when stopped. Every call is appended to ``calls`` and, when ``log_path`` is set, to that file (one JSON line each)
    so a parent process can see what a child did."""

    def __init__(self, jobs: dict | None = None, *, complete_on_create: bool = False, log_path: str | None = None):
        self.jobs = {name: dict(job) for name, job in (jobs or {}).items()}
        self.complete_on_create = complete_on_create
        self.log_path = log_path
        self.calls: list[tuple[str, str]] = []
        self.uploads: list[str] = []

    def _record(self, operation: str, name: str) -> None:
        self.calls.append((operation, name))
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps([operation, name]) + "\n")

    def describe_training_job(self, TrainingJobName):
        self._record("describe", TrainingJobName)
        if TrainingJobName not in self.jobs:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "Requested resource not found."}},
                              "DescribeTrainingJob")
        job = self.jobs[TrainingJobName]
        if job["TrainingJobStatus"] == "Stopping":  # the next look finds it stopped
            job["TrainingJobStatus"] = job["SecondaryStatus"] = "Stopped"
        return {"TrainingJobName": TrainingJobName, **job}

    def create_training_job(self, **request):
        name = request["TrainingJobName"]
        self._record("create", name)
        status = "Completed" if self.complete_on_create else "InProgress"
        self.jobs[name] = {
            "TrainingJobStatus": status, "SecondaryStatus": "Completed" if self.complete_on_create else "Training",
            "StoppingCondition": request["StoppingCondition"],
            "ModelArtifacts": {"S3ModelArtifacts": f"{request['OutputDataConfig']['S3OutputPath']}/{name}/output/"
                                                   "model.tar.gz"},
        }
        return {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}"}

    def stop_training_job(self, TrainingJobName):
        self._record("stop", TrainingJobName)
        self.jobs[TrainingJobName]["TrainingJobStatus"] = "Stopping"

    def put_object(self, Bucket, Key, Body):
        # The trainops launcher's runtime channel is uploaded for every new job, even with an s3:// source tarball.
        self.uploads.append(f"s3://{Bucket}/{Key}")

    def list_service_quotas(self, **arguments):
        # The submit's capacity preflight looks up the account's quotas; this account lists none (a note, no check).
        return {"Quotas": []}

    def describe_log_streams(self, **arguments):
        # The wait prints the job's CloudWatch lines as it goes (SageMakerBackend.read_logs): these jobs wrote none.
        return {"logStreams": []}

    def factory(self, service: str):
        assert service in ("sagemaker", "s3", "service-quotas", "logs"), f"unexpected AWS service {service}"
        return self


def completed_job(name: str) -> dict:
    return {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "ModelArtifacts": {"S3ModelArtifacts": f"s3://example-output/kfp/{name}/output/model.tar.gz"}}


# --- helpers --------------------------------------------------------------------------------------------------------

def local_pipeline(tmp_path: Path, sleep: float = 0) -> dict:
    """A pipeline directory with a one-host CPU job and its data; returns the component's inputs."""
    pipeline_dir = tmp_path / "pipeline"
    (pipeline_dir / "code").mkdir(parents=True)
    (pipeline_dir / "code" / "train.py").write_text(TRAIN_SCRIPT)
    data = tmp_path / "work" / "data"
    data.mkdir(parents=True)
    (data / "a.txt").write_text("a")
    spec = {"name": "tiny", "entry_point": "train.py", "source_dir": "code", "instance_type": "ml.m5.large",
            "instance_count": 1, "inputs": {"train": "s3://example-data/tiny/"}, "environment": {"SLEEP": str(sleep)}}
    return dict(spec_json=json.dumps(spec), spec_dir=".", backend="local", workdir=str(tmp_path / "work"),
                pipeline_dir=str(pipeline_dir), channels_json=json.dumps({"train": "${workdir}/data"}), job_name="",
                name_base="tiny-pipeline", run_key="", processes_per_host=0, region="", retries_json="")


def new_model(tmp_path: Path, name: str = "model") -> Model:
    return Model(name="model", uri=str(tmp_path / "kfp" / name), metadata={})


def new_metrics(tmp_path: Path, name: str = "training") -> Metrics:
    return Metrics(name="training", uri=str(tmp_path / "kfp" / name), metadata={})


# --- naming ---------------------------------------------------------------------------------------------------------

def test_job_names_follow_the_spec_hash_the_data_and_the_run_key(tmp_path):
    inputs = local_pipeline(tmp_path)
    where = places(inputs["pipeline_dir"], inputs["workdir"])
    spec = load_component_spec(inputs["spec_json"], ".", where)
    channels = {"train": str(tmp_path / "work" / "data")}
    first = train_job_name(spec, channels, base="unused")
    assert first == train_job_name(spec, channels, base="unused")
    assert first.startswith("tiny-") and len(first) <= 63
    assert train_job_name(spec, channels, base="x", run_key="2026-05-01") != first
    assert train_job_name(spec, channels, base="x", job_name="given-name") == "given-name"
    (tmp_path / "work" / "data" / "b.txt").write_text("new data")
    assert train_job_name(spec, channels, base="x") != first
    other = load_component_spec(json.dumps({**json.loads(inputs["spec_json"]), "instance_count": 2}), ".", where)
    assert train_job_name(other, {}, base="x") != train_job_name(spec, {}, base="x")


def test_the_spec_resolves_variables_and_relative_paths_where_the_component_runs(tmp_path):
    inputs = local_pipeline(tmp_path)
    where = places(inputs["pipeline_dir"], "../work")
    document = {**json.loads(inputs["spec_json"]), "source_dir": "${pipeline_dir}/code"}
    spec = load_component_spec(json.dumps(document), ".", where)
    assert spec.source_dir == str(tmp_path / "pipeline" / "code")
    assert where.workdir == tmp_path / "work"
    with pytest.raises(SpecError, match="spec_json"):
        load_component_spec("{not json", ".", where)
    with pytest.raises(SpecError, match="spec_json"):
        load_component_spec("[1, 2]", ".", where)


def test_missing_channel_data_is_bad_input_naming_the_channel(tmp_path):
    inputs = {**local_pipeline(tmp_path), "channels_json": json.dumps({"train": "${workdir}/nothing-here"})}
    with pytest.raises(SpecError, match="channels.train"):
        train_model.python_func(**inputs, model=new_model(tmp_path), training=new_metrics(tmp_path))


# --- re-attach --------------------------------------------------------------------------------------------------------

def test_a_rerun_of_the_local_component_reattaches_to_the_finished_job(tmp_path):
    inputs = local_pipeline(tmp_path)
    first_model, second_model = new_model(tmp_path, "first"), new_model(tmp_path, "second")
    training = new_metrics(tmp_path)
    name, status, reattached, artifact = train_model.python_func(**inputs, model=first_model, training=training)
    assert training.metadata["attempts"] == 1 and training.metadata["training_cost_usd"] > 0  # the KFP metrics
    assert training.metadata["cost"].endswith("over 1 attempt")
    assert (status, reattached) == ("Completed", False)
    assert Path(artifact).is_file() and artifact.endswith("model.tar.gz")
    assert first_model.uri == artifact
    assert first_model.metadata["model_artifact"] == artifact and first_model.metadata["job_name"] == name
    jobs_before = sorted(p.name for p in (tmp_path / "work" / "jobs").iterdir())

    again = train_model.python_func(**inputs, model=second_model, training=new_metrics(tmp_path, "again"))
    assert again == (name, "Completed", True, artifact)
    assert second_model.metadata["reattached"] is True and second_model.uri == artifact
    assert sorted(p.name for p in (tmp_path / "work" / "jobs").iterdir()) == jobs_before == [name]


def test_a_rerun_against_sagemaker_reattaches_instead_of_creating_a_duplicate(tmp_path):
    spec_json = json.dumps(SAGEMAKER_SPEC)
    arguments = dict(spec_json=spec_json, spec_dir=".", backend="sagemaker", workdir="", pipeline_dir=str(tmp_path),
                     channels_json="{}", job_name="", name_base="p", run_key="run-1", processes_per_host=0,
                     region="")
    where = places(str(tmp_path), "")
    name = train_job_name(load_component_spec(spec_json, ".", where), {}, base="p", run_key="run-1")
    aws = FakeSageMaker({name: completed_job(name)})
    model = new_model(tmp_path)
    result = run_train(**arguments, model=model, client_factory=aws.factory, poll_seconds=0.01)
    assert result == (name, "Completed", True, f"s3://example-output/kfp/{name}/output/model.tar.gz")
    assert not any(operation == "create" for operation, _ in aws.calls)
    # the KFP URI stays KFP's (its launcher uploads the path to it); metadata and a pointer file name the model
    assert model.uri == str(tmp_path / "kfp" / "model")
    assert model.metadata["model_artifact"] == result[3]
    assert json.loads(Path(model.path).read_text())["model_artifact"] == result[3]

    fresh = FakeSageMaker(complete_on_create=True)
    created = run_train(**{**arguments, "run_key": "run-2"}, model=new_model(tmp_path, "m2"),
                        client_factory=fresh.factory, poll_seconds=0.01)
    assert created[2] is False and [call for call in fresh.calls if call[0] == "create"] == [("create", created[0])]


class Unreachable(FakeSageMaker):
    """Every look at a job that exists fails as SageMaker's 503 does (after botocore's own retries)."""

    def describe_training_job(self, TrainingJobName):
        if TrainingJobName in self.jobs:
            self._record("describe", TrainingJobName)
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "Service Unavailable"},
                               "ResponseMetadata": {"HTTPStatusCode": 503}}, "DescribeTrainingJob")
        return super().describe_training_job(TrainingJobName)


def test_a_component_whose_looks_keep_failing_leaves_the_job_running_and_a_rerun_reattaches(tmp_path, monkeypatch):
    """A failed look is not a failed job (issue 38 item 4): past both bounds the component fails saying the job may
    still run and that a re-run re-attaches, without stopping it or starting another; the re-run then does."""
    from trainops.backends.looks import JobOutOfSight

    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_COUNT", "2")
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_SECONDS", "0")
    arguments = dict(spec_json=json.dumps(SAGEMAKER_SPEC), spec_dir=".", backend="sagemaker", workdir="",
                     pipeline_dir=str(tmp_path), channels_json="{}", job_name="", name_base="p", run_key="run-1",
                     processes_per_host=0, region="", retries_json=json.dumps({"infrastructure": 2}))
    aws = Unreachable()
    with pytest.raises(JobOutOfSight) as raised:
        run_train(**arguments, model=new_model(tmp_path), client_factory=aws.factory, poll_seconds=0.01)
    (name,) = aws.jobs
    message = str(raised.value)
    assert f"could not look at SageMaker training job {name}: 2 looks in a row failed" in message and "ServiceUnavailable" \
        in message
    assert message.endswith(f"Re-run the pipeline run (or let KFP retry this task): the train task names the job "
                            f"{name} again and re-attaches to it.")
    assert [operation for operation, _ in aws.calls if operation != "describe"] == ["create"]  # no stop, no -2
    assert aws.jobs[name]["TrainingJobStatus"] == "InProgress"
    rerun = FakeSageMaker({name: completed_job(name)})
    again = run_train(**arguments, model=new_model(tmp_path, "m2"), client_factory=rerun.factory, poll_seconds=0.01)
    assert again[:3] == (name, "Completed", True)
    assert not any(operation == "create" for operation, _ in rerun.calls)


# --- SIGTERM ----------------------------------------------------------------------------------------------------------

CHILD_SAGEMAKER = """\
import json, sys
sys.path.insert(0, {tests!r})
import trainops.aws.clients as clients
from test_train_task import FakeSageMaker
from kfp.dsl import Metrics, Model
fake = FakeSageMaker(log_path={log!r})
clients.default_client_factory = lambda region=None, profile=None: fake.factory  # the component builds its own
from trainops.components.factory import build_components
from trainops.components.settings import LOCAL_SETTINGS
train_model = build_components(LOCAL_SETTINGS).train
train_model.python_func(model=Model(name="model", uri={uri!r}, metadata={{}}),
                        training=Metrics(name="training", uri={uri!r} + "-metrics", metadata={{}}),
                        **json.loads({arguments!r}))
"""


def wait_for(predicate, what: str, limit: float = 60.0) -> None:
    """Poll until ``predicate()`` holds; fail naming ``what`` if it never does (a bound, not a timing check)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.1)


def logged_calls(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_sigterm_stops_the_sagemaker_job_the_component_started(tmp_path):
    log = tmp_path / "calls.jsonl"
    arguments = dict(spec_json=json.dumps(SAGEMAKER_SPEC), spec_dir=".", backend="sagemaker", workdir="",
                     pipeline_dir=str(tmp_path), channels_json="{}", job_name="", name_base="p", run_key="",
                     processes_per_host=0, region="", retries_json="")
    script = CHILD_SAGEMAKER.format(tests=str(HERE), log=str(log), uri=str(tmp_path / "model"),
                                    arguments=json.dumps(arguments))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env={**os.environ, "TRAINOPS_HOME": str(tmp_path / "home")})
    try:
        wait_for(lambda: any(call[0] == "create" for call in logged_calls(log)), "the job was created")
        created = next(name for operation, name in logged_calls(log) if operation == "create")
        child.send_signal(signal.SIGTERM)
        output, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0, output
    assert ["stop", created] in logged_calls(log), output
    assert "cancelled by SIGTERM" in output and f"{created}: Stopping" in output


def test_sigterm_stops_the_local_job_and_leaves_no_process(tmp_path):
    from trainops.backends.local import status
    from trainops.backends.local.processes import job_processes

    inputs = local_pipeline(tmp_path, sleep=300)
    script = ("import json, sys\nfrom kfp.dsl import Metrics, Model\n"
              "from trainops.components.factory import build_components\n"
              "from trainops.components.settings import LOCAL_SETTINGS\n"
              f"model = Model(name='model', uri={str(tmp_path / 'model')!r}, metadata={{}})\n"
              "build_components(LOCAL_SETTINGS).train.python_func(model=model, "
              "training=Metrics(name='training', uri=model.uri + '-metrics', metadata={}), "
              f"**json.loads({json.dumps(inputs)!r}))\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    jobs = tmp_path / "work" / "jobs"
    try:
        # the script writes its model, then sleeps: the job is running
        wait_for(lambda: jobs.is_dir() and any(jobs.rglob("model/model.json")), "the training script started")
        child.send_signal(signal.SIGTERM)
        output, _ = child.communicate(timeout=60)
        [name] = [path.name for path in jobs.iterdir()]
        record = status.read(name, str(tmp_path / "work"))
        left_behind = job_processes(record["job_id"])  # looked at before the clean-up below
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for record_file in jobs.glob("*/status.json"):  # never leave a sleeping rank behind, whatever happened
            for pid in job_processes(json.loads(record_file.read_text())["job_id"]):
                os.kill(pid, signal.SIGKILL)
    assert child.returncode != 0, output
    assert record["status"] == "Stopped", output
    assert "SIGTERM" in (record.get("failure_reason") or "")
    assert left_behind == []


def test_the_sigterm_handler_is_removed_afterwards_and_stops_every_copy():
    previous = signal.getsignal(signal.SIGTERM)
    with StopOnSigterm("local", "job-a"):
        assert signal.getsignal(signal.SIGTERM) is not previous
    assert signal.getsignal(signal.SIGTERM) is previous
    # a failed first attempt and a running copy: both are looked at, only the running one is stopped
    aws = FakeSageMaker({"job-a": {**completed_job("job-a"), "TrainingJobStatus": "Failed"},
                         "job-a-2": {**completed_job("job-a-2"), "TrainingJobStatus": "InProgress"}})
    stopped = get_backend("sagemaker", client_factory=aws.factory).stop_copies("job-a")  # what the handler calls
    assert [(name, said.removeprefix(f"{name}: ")) for name, said in stopped] == [("job-a", "Failed"),
                                                                                  ("job-a-2", "Stopping")]
    assert ("stop", "job-a-2") in aws.calls and ("stop", "job-a") not in aws.calls


def test_a_sigterm_before_any_job_exists_cancels_without_stopping_anything():
    aws = FakeSageMaker()
    guard = StopOnSigterm("sagemaker", "never-created", client_factory=aws.factory)
    with pytest.raises(JobFailed, match="no training job named never-created was running"):
        guard._handle(signal.SIGTERM, None)
    assert [operation for operation, _ in aws.calls] == ["describe"]


def test_the_component_reads_the_same_spec_as_trainops_run_so_both_name_the_job_alike(tmp_path):
    # The job name hashes the spec: the component (spec as JSON, paths resolved where it runs) and the pipeline
    # runner of `trainops run` (spec file read from disk) must see the same spec, or they would not share the job.
    from trainops.components.pipeline import read_pipeline_source
    from trainops.steps.pipeline import PipelineRunner

    path = HERE.parents[2] / "examples" / "digits" / "pipeline.yaml"
    source = read_pipeline_source(path, workdir_override=str(tmp_path))
    runner = PipelineRunner(source.resolved, path.parent)
    from_file = runner._train_spec()
    from_component = load_component_spec(source.spec_json, source.spec_dir, places(str(path.parent), str(tmp_path)))
    assert from_component.spec_hash() == from_file.spec_hash()
    assert from_component.source_dir == str(path.parent)
