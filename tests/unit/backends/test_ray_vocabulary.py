"""The ray engine's vocabulary on Ray's own evidence: `JobDetails` as Ray 2.60's Jobs API returns them, with the
messages and error types its job manager and supervisor write for each case (ray/dashboard/modules/job/
job_supervisor.py, job_manager.py), read by `trainops.backends.ray.status.result` and classified by the ray rules
through the result dict, as every front end classifies a result (`vocabulary.classify_result`)."""

from __future__ import annotations

import importlib

import pytest

from trainops.backends.kit import JobStatus, classify_result, vocabulary_of
from trainops.backends.ray.backend import RayBackend
from trainops.backends.ray.status import failure_file, result
from trainops.backends.ray.vocabulary import FAILURE_FILE_END, FAILURE_FILE_START, LOST_HOST, RAY

#: A failure file as the runtime writes it (trainops.runtime.failure.render_failure's shape).
FAILURE = ("the training script exited with code 1 on host algo-2 (rank 1)\n"
           "host: algo-2\nrank: 1\nexit_code: 1\nreason: error\n"
           "--- last lines of stderr ---\nTraceback (most recent call last):\nValueError: bad batch size")


def ray_module(name: str):
    """A module of Ray, imported when a test runs (not at collection: test_ray_render checks rendering imports no
    Ray in its process)."""
    return importlib.import_module(name)


def details(status: str, message: str | None = None, error_type: str | None = None, code: int | None = None,
            metadata: dict[str, str] | None = None):
    ray_jobs = ray_module("ray.job_submission")
    return ray_jobs.JobDetails(type=ray_jobs.JobType.SUBMISSION, entrypoint="python -m trainops.backends.ray.driver",
                               submission_id="job-1", status=status, message=message, error_type=error_type,
                               driver_exit_code=code, start_time=1_000, end_time=61_000, metadata=metadata or {})


def entrypoint_failed(log_tail: str, code: int = 1) -> str:
    """Ray's message for a driver that exited non-zero (JobSupervisor.run)."""
    return (f"Job entrypoint command failed with exit code {code}, last available logs (truncated to 20,000 "
            "chars):\n" + log_tail)


def verdict(info):
    return classify_result(result(info, "job-1", reattached=False).to_dict())


def test_the_backend_declares_the_ray_vocabulary():
    assert vocabulary_of(RayBackend) is RAY and vocabulary_of("ray") is RAY
    assert not RAY.priced and RAY.hourly_price("ml.g5.xlarge", "us-east-1") is None
    assert "ray" in RAY.unpriced_reason()


@pytest.mark.parametrize(("state", "status"), [("PENDING", JobStatus.IN_PROGRESS), ("RUNNING", JobStatus.IN_PROGRESS),
                                               ("SUCCEEDED", JobStatus.COMPLETED), ("FAILED", JobStatus.FAILED),
                                               ("STOPPED", JobStatus.STOPPED)])
def test_rays_states_read_as_trainops_statuses(state, status):
    assert result(details(state), "job-1", reattached=False).status is status


def test_a_succeeded_job_has_no_failure():
    assert verdict(details("SUCCEEDED", "Job finished successfully.", code=0)) is None


def test_a_completed_job_has_the_model_its_submission_says_host_1_packed():
    model = {"trainops_model": "file:///data/out/job-1/output/model.tar.gz"}
    assert result(details("SUCCEEDED", metadata=model), "job-1", reattached=False).model_artifact == \
        "file:///data/out/job-1/output/model.tar.gz"
    assert result(details("FAILED", "boom", metadata=model), "job-1", reattached=False).model_artifact is None


def test_a_failing_rank_is_user_with_the_hosts_failure_file_as_the_reason():
    log = ("[algo-2] Traceback (most recent call last):\n[algo-2] ValueError: bad batch size\n"
           "[trainops] host algo-2 exited 1: stopping the other hosts\n"
           + FAILURE_FILE_START.format(host="algo-2") + "\n" + FAILURE + "\n" + FAILURE_FILE_END + "\n"
           "[trainops] the job failed: host algo-2 exited 1\n")
    info = details("FAILED", entrypoint_failed(log), "JOB_ENTRYPOINT_COMMAND_ERROR", 1)
    seen = result(info, "job-1", reattached=False)
    assert seen.failure_reason == FAILURE and seen.details["failed_host"] == "algo-2"
    found = verdict(info)
    assert found.failure_class == "user" and not found.retryable
    assert "ValueError: bad batch size" in seen.failure_reason


def test_the_failure_file_is_read_from_the_jobs_log_when_rays_message_lost_its_start():
    # Ray's message keeps the log's last lines: the other hosts' lines after the file can push its start out.
    whole = (FAILURE_FILE_START.format(host="algo-2") + "\n" + FAILURE + "\n" + FAILURE_FILE_END + "\n"
             + "(HostRunner pid=1) [algo-1] trainops: job failed: the job was stopped by SIGTERM on host algo-1\n")
    tail = "\n".join(whole.splitlines()[-4:])
    seen = result(details("FAILED", entrypoint_failed(tail), "JOB_ENTRYPOINT_COMMAND_ERROR", 1), "job-1",
                  reattached=False, log="Ray's own lines\n" + whole)
    assert seen.failure_reason == FAILURE and seen.details["failed_host"] == "algo-2"
    assert classify_result(seen.to_dict()).failure_class == "user"


def test_the_last_printed_failure_file_is_the_one_taken():
    text = (FAILURE_FILE_START.format(host="algo-1") + "\nold\n" + FAILURE_FILE_END + "\n"
            + FAILURE_FILE_START.format(host="algo-2") + "\nnew\n" + FAILURE_FILE_END)
    assert failure_file(text) == ("algo-2", "new")
    assert failure_file("Job entrypoint command failed with exit code 1. No logs available.") is None


def test_a_runtime_env_that_cannot_be_set_up_is_setup():
    error = ray_module('ray.exceptions').RuntimeEnvSetupError("ERROR: No matching distribution found for nosuchpackage==9")
    info = details("FAILED", f"runtime_env setup failed: {error}", "RUNTIME_ENV_SETUP_FAILURE")
    found = verdict(info)
    assert found.failure_class == "setup"
    assert found.source == "secondary_status" and found.evidence == "RUNTIME_ENV_SETUP_FAILURE"


def test_a_runtime_env_failure_named_only_in_the_message_is_setup():
    error = ray_module('ray.exceptions').RuntimeEnvSetupError("Traceback (most recent call last):\nValueError: bad working_dir")
    assert verdict(details("FAILED", f"runtime_env setup failed: {error}")).failure_class == "setup"


def test_a_lost_host_is_infrastructure_and_retryable():
    lost = LOST_HOST.format(host="algo-2", error=str(ray_module('ray.exceptions').ActorDiedError()))
    log = ("[algo-1] RuntimeError: Connection closed by peer\n[trainops] host algo-2 exited -1: stopping the other "
           f"hosts\n{lost}\n[trainops] the job failed: host algo-2 exited -1\n")
    found = verdict(details("FAILED", entrypoint_failed(log), "JOB_ENTRYPOINT_COMMAND_ERROR", 1))
    assert found.failure_class == "infrastructure" and found.retryable
    assert found.evidence.startswith("[trainops] host algo-2 was lost")


def test_a_driver_traceback_of_a_dead_actor_is_infrastructure():
    log = ("Traceback (most recent call last):\n  File \"driver.py\", line 1, in <module>\n"
           f"ray.exceptions.ActorDiedError: {ray_module('ray.exceptions').ActorDiedError()}\n")
    found = verdict(details("FAILED", entrypoint_failed(log), "JOB_ENTRYPOINT_COMMAND_ERROR", 1))
    assert found.failure_class == "infrastructure"


def test_a_dead_supervisor_is_infrastructure():
    message = f"Job supervisor actor died: {ray_module('ray.exceptions').ActorDiedError()}"
    found = verdict(details("FAILED", message, "JOB_SUPERVISOR_ACTOR_DIED"))
    assert found.failure_class == "infrastructure" and found.retryable


def test_an_unschedulable_job_is_infrastructure():
    message = ("Job supervisor actor failed to start within 900 seconds. This timeout can be configured by setting "
               "the environment variable RAY_JOB_START_TIMEOUT_SECONDS.")
    assert verdict(details("FAILED", message, "JOB_SUPERVISOR_ACTOR_START_TIMEOUT")).failure_class == "infrastructure"


def test_a_stopped_job_is_stopped_with_its_recorded_reason():
    info = details("STOPPED", "Job was intentionally stopped.")
    seen = result(info, "job-1", reattached=False, stop_reason="Stopped by the user")
    assert seen.failure_reason == "Stopped by the user"
    assert classify_result(seen.to_dict()).failure_class == "stopped"


def test_a_guards_stop_is_the_guards_class_not_a_persons():
    info = details("STOPPED", "Job was intentionally stopped.")
    seen = result(info, "job-1", reattached=False, stop_reason="wait bound: the job ran past its wait bound")
    assert classify_result(seen.to_dict()).failure_class == "timeout"
