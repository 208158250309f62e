"""A local evaluation as a detached job (`trainops.backends.local.evaluation_job`), with real runner processes: a
name that runs or completed is re-attached to, one that failed starts again, and a runner killed without a final
status reads Failed instead of running for ever."""

from __future__ import annotations

import os
import signal
import time

import pytest

from trainops.backends.api import JobHandle, get_backend
from trainops.backends.local import evaluation_job
from trainops.backends.states import JobStatus


@pytest.fixture
def inputs(tmp_path):
    code, model, test = tmp_path / "code", tmp_path / "model", tmp_path / "test"
    for directory in (code, model, test):
        directory.mkdir()
    (test / "x").write_text("x")

    def with_script(text: str) -> dict:
        (code / "evaluate.py").write_text(text)
        return dict(entry_point="evaluate.py", source_dir=str(code), model_artifact=str(model),
                    channels={"test": str(test)}, output_dir=str(tmp_path / "out"))

    return with_script


METRICS = ("import json, os\njson.dump({'accuracy': 0.9}, open(os.path.join(os.environ['SM_OUTPUT_DATA_DIR'], "
           "'metrics.json'), 'w'))\n")


def wait_for(backend, handle, terminal=True):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = backend.describe_job(handle, "evaluation")
        if result.status.terminal == terminal:
            return result
        time.sleep(0.1)
    raise AssertionError("the evaluation job never ended")


def test_a_completed_job_is_reattached_and_a_failed_one_starts_again(inputs, tmp_path):
    backend = get_backend("local", workdir=str(tmp_path / "state"))
    failing = backend.start_evaluation(**inputs("raise SystemExit('broken data')\n"), job_name="evaluate-1")
    assert failing.created
    failed = wait_for(backend, failing)
    assert failed.status is JobStatus.FAILED and "broken data" in failed.failure_reason
    again = backend.start_evaluation(**inputs(METRICS), job_name="evaluate-1")
    assert again.created, "a failed evaluation job is run again under its name"
    assert wait_for(backend, again).status is JobStatus.COMPLETED
    assert backend.evaluation_result(again).metrics == {"accuracy": 0.9}
    third = backend.start_evaluation(**inputs(METRICS), job_name="evaluate-1")
    assert third.created is False, "a completed evaluation job is re-attached to"


def test_a_runner_killed_without_a_result_reads_failed(inputs, tmp_path):
    backend = get_backend("local", workdir=str(tmp_path / "state"))
    script = "import os, time\nopen(os.environ['SM_OUTPUT_DATA_DIR'] + '/pid', 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    handle = backend.start_evaluation(**inputs(script), job_name="evaluate-2")
    deadline = time.monotonic() + 30
    record = None
    while time.monotonic() < deadline:
        record = evaluation_job.read("evaluate-2", str(tmp_path / "state"))
        if record and record.get("pid"):
            break
        time.sleep(0.05)
    pid_file = tmp_path / "out" / "pid"
    while time.monotonic() < deadline and not pid_file.exists():
        time.sleep(0.05)
    assert record and record.get("pid") and pid_file.exists()
    os.kill(int(record["pid"]), signal.SIGKILL)  # the runner, killed outright
    result = wait_for(backend, handle)
    assert result.status is JobStatus.FAILED
    assert "exited without a result" in result.failure_reason
    from trainops.runtime.processes import is_alive

    script_pid = int(pid_file.read_text())
    while time.monotonic() < deadline and is_alive(script_pid):
        time.sleep(0.05)
    assert not is_alive(script_pid), "the script outlived its killed runner"


def test_a_bad_input_is_refused_before_any_job_starts(inputs, tmp_path):
    from trainops.errors import SpecError

    backend = get_backend("local", workdir=str(tmp_path / "state"))
    with pytest.raises(SpecError, match="channels.test"):
        backend.start_evaluation(**{**inputs(METRICS), "channels": {"test": str(tmp_path / "missing")}},
                                 job_name="evaluate-3")
    with pytest.raises(SpecError, match="job_name"):
        backend.start_evaluation(**inputs(METRICS), job_name="../x")
    assert evaluation_job.read("evaluate-3", str(tmp_path / "state")) is None
    assert backend.stop_job(JobHandle("local", "evaluate-3", workdir=str(tmp_path / "state")), "evaluation") == (
        "evaluate-3: not started")


def test_two_tries_starting_one_evaluation_job_at_once_start_one_runner(inputs, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    backend = get_backend("local", workdir=str(tmp_path / "state"))
    arguments = inputs(METRICS)
    with ThreadPoolExecutor(4) as pool:
        handles = list(pool.map(lambda _: backend.start_evaluation(**arguments, job_name="evaluate-4"), range(4)))
    assert sum(handle.created for handle in handles) == 1
    assert wait_for(backend, handles[0]).status is JobStatus.COMPLETED


def test_a_forged_record_naming_a_bystander_is_never_signalled(tmp_path):
    """A status record can be written by anyone who can write the job's directory: one naming another process's pid
    (and its start time) must neither stop it nor read as that job's runner; only the run lock's holder counts."""
    import json
    import subprocess
    import sys

    from trainops.runtime.processes import is_alive, process_start_ticks

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        directory = evaluation_job.job_path("forged", str(tmp_path / "state"), create=True)
        directory.mkdir(mode=0o700, exist_ok=True)
        (directory / "status.json").write_text(json.dumps({
            "job_name": "forged", "status": "InProgress", "pid": bystander.pid,
            "pid_start": process_start_ticks(bystander.pid), "written": 0}))
        assert evaluation_job.stop("forged", str(tmp_path / "state")) == "Failed"  # no runner holds its lock
        assert is_alive(bystander.pid), "a forged record's pid was signalled"
        assert evaluation_job.read("forged", str(tmp_path / "state"))["status"] == "Failed"  # no runner holds it
    finally:
        bystander.kill()
        bystander.wait()
