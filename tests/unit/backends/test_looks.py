"""A status look that fails is not a failed job (issue 38 item 4): the policy of `trainops.backends.looks` with an
injected clock (no real minute of waiting), its classifier over the errors the backends really raise, and the
SageMaker wait loop and the train step's attempts under it, against botocore's Stubber. The same faults against a
moto server, the Airflow trigger and the command line: tests/system/test_failed_looks_moto.py."""

from __future__ import annotations

import errno
import subprocess
import urllib.error

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, ReadTimeoutError
from support.sagemaker_shapes import training_description
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.aws.clients import translate_client_error
from trainops.backends.looks import JobOutOfSight, LookFailed, LookPolicy, Looks, is_failed_look
from trainops.errors import JobFailed, SpecError

NAME = "digits-0123456789"


def client_error(code: str, status: int, message: str = "message") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "DescribeTrainingJob")


def translated(cause: BaseException) -> BaseException:
    """What the SageMaker backend raises for an AWS error answer (`raise translate_client_error(...) from error`)."""
    try:
        try:
            raise cause
        except ClientError as error:
            raise translate_client_error(error, f"DescribeTrainingJob {NAME}", "job_name") from error
    except Exception as raised:  # noqa: BLE001 - the raised one, with its cause
        return raised


FAILED_LOOKS = {
    "throttled": client_error("ThrottlingException", 400, "Rate exceeded"),
    "throttled, as the backend raises it": translated(client_error("ThrottlingException", 400)),
    "5xx": translated(client_error("InternalFailure", 500)),
    "503 without a known code": translated(client_error("SomethingNew", 503)),
    "endpoint down": EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
    "read timeout": ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
    "connection closed": ConnectionClosedError(endpoint_url="http://127.0.0.1:1"),
    "connection refused": ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
    "timeout": TimeoutError("timed out"),
    "file system busy": OSError(errno.EIO, "Input/output error"),
    "no descriptor left": OSError(errno.EMFILE, "Too many open files"),
    "a command that hung": subprocess.TimeoutExpired(["squeue"], 30),
    "HTTP 502": urllib.error.HTTPError("http://slurmrestd/", 502, "Bad Gateway", {}, None),  # type: ignore[arg-type]
    "unreachable URL": urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "refused")),
    "marked by a backend": LookFailed("squeue: slurm_load_jobs error: Unable to contact slurm controller"),
}
PROOF = {
    "no such job": translated(client_error("ValidationException", 400, "Requested resource not found.")),
    "access denied": translated(client_error("AccessDeniedException", 400, "not authorized")),
    "spec error": SpecError("no training job named 'x'"),
    "no status record": FileNotFoundError(errno.ENOENT, "No such file"),
    "permission": PermissionError(errno.EACCES, "Permission denied"),
    "HTTP 404": urllib.error.HTTPError("http://slurmrestd/", 404, "Not Found", {}, None),  # type: ignore[arg-type]
    "a job failure": JobFailed("training job x ended Failed: AlgorithmError: ThrottlingException in the script"),
    "already given up": JobOutOfSight("training job x", failures=5, seconds=60, last_error="timeout"),
    "a bug": KeyError("TrainingJobStatus"),
}


@pytest.mark.parametrize("error", FAILED_LOOKS.values(), ids=FAILED_LOOKS.keys())
def test_errors_that_prove_nothing_are_failed_looks(error):
    assert is_failed_look(error)


@pytest.mark.parametrize("error", PROOF.values(), ids=PROOF.keys())
def test_errors_that_prove_something_are_not(error):
    assert not is_failed_look(error)


def failing(clock: FakeClock, seconds_per_look: float, errors: list, answer: object = "answer"):
    """A look that raises each of ``errors`` in turn (each taking ``seconds_per_look``), then returns ``answer``."""
    calls: list[float] = []

    def look():
        calls.append(clock.now)
        clock.now += seconds_per_look
        if errors:
            raise errors.pop(0)
        return answer

    return look, calls


def test_the_wait_gives_up_only_past_both_bounds_the_count_first():
    clock = FakeClock()
    lines: list[str] = []
    looks = Looks("training job x", poll_seconds=1, policy=LookPolicy(seconds=60, count=5), clock=clock,
                  sleep=clock.sleep, log=lines.append, reattach="Re-attach with `trainops run x.yaml --job-name x`.")
    look, calls = failing(clock, 0, [TimeoutError("timed out")] * 1000)
    with pytest.raises(JobOutOfSight) as raised:
        looks.look(look)
    # five failures came after 4 s; the wait went on, one second apart, until a minute had passed too
    assert len(calls) == 61 and clock.now - calls[0] == 60
    message = str(raised.value)
    assert "61 looks in a row failed over 60 s" in message and "TimeoutError: timed out" in message
    assert "may still be running: this wait did not stop it" in message
    assert message.endswith("this wait did not stop it. Re-attach with `trainops run x.yaml --job-name x`.")
    assert len(lines) == 60 and "not a failure of the job" in lines[0]
    assert isinstance(raised.value.__cause__, TimeoutError)


def test_the_wait_gives_up_only_past_both_bounds_the_time_first():
    clock = FakeClock()
    looks = Looks("x", poll_seconds=30, policy=LookPolicy(seconds=60, count=5), clock=clock, sleep=clock.sleep,
                  log=lambda line: None)
    look, calls = failing(clock, 20, [TimeoutError()] * 1000)  # each failed look took 20 s (botocore's retries)
    with pytest.raises(JobOutOfSight) as raised:
        looks.look(look)
    assert len(calls) == 5 and clock.sleeps == [30.0] * 4  # a minute passed after 3 looks; the count decides
    assert raised.value.failures == 5 and raised.value.seconds >= 60


def test_a_look_that_works_ends_the_streak_and_the_bounds_count_from_the_next_failure():
    clock = FakeClock()
    looks = Looks("x", poll_seconds=10, policy=LookPolicy(seconds=60, count=5), clock=clock, sleep=clock.sleep,
                  log=lambda line: None)
    for _ in range(3):  # 4 failed looks over 40 s, then one that works: again and again, for ever
        look, calls = failing(clock, 0, [TimeoutError()] * 4)
        assert looks.look(look) == "answer" and len(calls) == 5
        assert (looks.failures, looks.first_failure) == (0, None)
    look, calls = failing(clock, 0, [TimeoutError()] * 6, answer="after six")
    assert looks.look(look) == "after six"  # 6 in a row, but 50 s only: not given up


def test_proof_is_raised_at_the_first_look():
    clock = FakeClock()
    looks = Looks("x", clock=clock, sleep=clock.sleep, log=lambda line: None)
    look, calls = failing(clock, 0, [PROOF["no such job"]])
    with pytest.raises(SpecError):
        looks.look(look)
    assert len(calls) == 1 and clock.sleeps == []


def test_the_bounds_come_from_the_environment_and_a_bad_value_names_its_variable():
    assert LookPolicy.from_environment({}) == LookPolicy(seconds=60.0, count=5)
    assert LookPolicy.from_environment({"TRAINOPS_FAILED_LOOKS_SECONDS": "600", "TRAINOPS_FAILED_LOOKS_COUNT": "10"}) \
        == LookPolicy(seconds=600.0, count=10)
    with pytest.raises(SpecError) as raised:
        LookPolicy.from_environment({"TRAINOPS_FAILED_LOOKS_COUNT": "five"})
    assert "TRAINOPS_FAILED_LOOKS_COUNT: 'five' is not a whole number >= 0" in str(raised.value)


# --- the SageMaker wait and the train step under the policy ---------------------------------------------------
def fail_describe(aws: StubbedAWS, times: int, code: str = "InternalFailure", status: int = 500) -> None:
    for _ in range(times):
        aws.stub("sagemaker").add_client_error("describe_training_job", service_error_code=code,
                                               service_message="We encountered an internal error.",
                                               http_status_code=status, expected_params={"TrainingJobName": NAME})


def describes(aws: StubbedAWS, *states: tuple[str, str]) -> None:
    for status, secondary in states:
        aws.stub("sagemaker").add_response("describe_training_job", training_description(NAME, status, secondary),
                                           {"TrainingJobName": NAME})


def sagemaker_wait(aws: StubbedAWS, clock: FakeClock, *, now=None, **arguments):
    """The SageMaker backend's wait (the kit's, over its look) on the fake clock; the job was created at CREATED and
    the wait begins a second later (``now``: another wall clock)."""
    from support.sagemaker_shapes import CREATED

    from trainops.backends.api import JobHandle
    from trainops.backends.sagemaker.backend import SageMakerBackend

    backend = SageMakerBackend(client_factory=aws, poll_seconds=30)
    backend.now = now or (lambda: CREATED.timestamp() + clock.now - 999.0)
    backend.pause = clock.sleep
    return backend.wait(JobHandle("sagemaker", NAME), **arguments)


def test_a_sagemaker_wait_goes_through_failed_looks_to_the_jobs_real_outcome():
    aws, clock = StubbedAWS(), FakeClock()
    describes(aws, ("InProgress", "Training"))
    fail_describe(aws, 3)
    describes(aws, ("InProgress", "Training"))  # the streak ends: four more in a row are not five
    fail_describe(aws, 2, "ThrottlingException", 400)
    fail_describe(aws, 2)
    describes(aws, ("Failed", "Failed"))
    result = sagemaker_wait(aws, clock)
    aws.verify()  # every answer read, and nothing else asked: no StopTrainingJob, no CreateTrainingJob
    assert result.status.value == "Failed"
    assert clock.sleeps == [30.0] * 9


def test_a_sagemaker_wait_whose_looks_keep_failing_gives_up_past_both_bounds_and_leaves_the_job_alone(monkeypatch):
    aws, clock = StubbedAWS(), FakeClock()
    describes(aws, ("InProgress", "Training"))
    fail_describe(aws, 5)
    with pytest.raises(JobOutOfSight) as raised:
        sagemaker_wait(aws, clock)
    aws.verify()  # five failed looks, then no call at all: nothing stopped
    assert clock.now - 1000.0 == 30 * 5  # the first failure at 30 s, the fifth at 150 s: past a minute too
    assert "could not look at SageMaker training job digits-0123456789: 5 looks in a row failed over 120 s" in \
        str(raised.value)
    assert "InternalFailure" in str(raised.value)


def test_a_guarded_wait_whose_stop_fails_asks_again_at_the_next_look():
    """A guard that trips stops the job; a StopTrainingJob that fails (a 5xx) is a failed look, and the next look
    asks again: the job is stopped once it can be, never left running for the guard's reason."""
    from datetime import datetime, timezone

    from trainops.backends.guards import JobGuards

    aws, clock = StubbedAWS(), FakeClock()
    running = dict(training_description(NAME, "InProgress", "Training"), CreationTime=datetime(2020, 1, 1,
                                                                                                tzinfo=timezone.utc))
    stub = aws.stub("sagemaker")
    stub.add_response("describe_training_job", running, {"TrainingJobName": NAME})  # the wait's look: bound passed
    stub.add_response("describe_training_job", running, {"TrainingJobName": NAME})  # stop: where it stands
    stub.add_response("add_tags", {}, None)
    stub.add_client_error("stop_training_job", service_error_code="ServiceUnavailable", http_status_code=503)
    stub.add_response("describe_training_job", running, {"TrainingJobName": NAME})  # stop lost: where it stands
    stub.add_response("describe_training_job", running, {"TrainingJobName": NAME})  # the next look trips again
    stub.add_response("describe_training_job", running, {"TrainingJobName": NAME})
    stub.add_response("add_tags", {}, None)
    stub.add_response("stop_training_job", {}, {"TrainingJobName": NAME})
    stopped = dict(training_description(NAME, "Stopped", "Stopped"), FailureReason=None)
    stopped.pop("FailureReason")
    stub.add_response("describe_training_job", stopped, {"TrainingJobName": NAME})
    result = sagemaker_wait(aws, clock, guards=JobGuards(max_run=60),
                            now=lambda: datetime(2020, 1, 2, tzinfo=timezone.utc).timestamp())
    aws.verify()
    assert result.status.value == "Stopped"


def test_a_train_step_that_lost_sight_of_its_job_starts_no_other_attempt():
    """The attempts of the train step never classify a failed look: the wait's `JobOutOfSight` ends the step, and no
    `<name>-2` is created (infrastructure retries are budgeted, but the job was never seen to fail)."""
    from trainops.steps.attempts import run_attempts

    calls: list[str] = []

    def attempt(name: str) -> dict:
        calls.append(name)
        raise JobOutOfSight(f"training job {name}", failures=5, seconds=75, last_error=TimeoutError("timed out"))

    with pytest.raises(JobOutOfSight):
        run_attempts(attempt, job_name="bert", budgets={"infrastructure": 3}, sleep=lambda s: None,
                     log=lambda line: None)
    assert calls == ["bert"]
