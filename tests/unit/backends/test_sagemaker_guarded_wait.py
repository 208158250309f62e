"""The guarded wait of a SageMaker training job (the kit's wait over `SageMakerBackend.look` and its watch) against
botocore's Stubber: moto completes a
training job at once and has no StopTrainingJob, so the walks through InProgress, the stop and the Stopped end are
stubbed (the Stubber checks each request against the real API model). The log streams' last event times
(DescribeLogStreams) are stubbed here too; the probe itself runs against moto in
tests/system/test_sagemaker_activity_moto.py. The clock is fake: `now` is CreationTime + the fake clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from botocore.stub import ANY
from support.sagemaker_shapes import CREATED, training_description
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.api import JobHandle
from trainops.backends.guards import JobGuards
from trainops.backends.sagemaker import training
from trainops.backends.sagemaker.backend import SageMakerBackend
from trainops.backends.states import WaitTimedOut
from trainops.backends.vocabulary import classify_result
from trainops.runtime import catalog

NAME = "bert-0123456789"
TRAINING = [("Starting", ""), ("Downloading", ""), ("Training", "")]


def _describe(aws: StubbedAWS, status: str, secondary: str, **options) -> None:
    response = training_description(NAME, status, secondary, transitions=TRAINING, **options)
    response["TrainingStartTime"] = CREATED
    aws.stub("sagemaker").add_response("describe_training_job", response, {"TrainingJobName": NAME})


def _streams(aws: StubbedAWS, last_event_seconds: float) -> None:
    stamp = int((CREATED.timestamp() + last_event_seconds) * 1000)
    aws.stub("logs").add_response(
        "describe_log_streams",
        {"logStreams": [{"logStreamName": f"{NAME}/algo-1-1767225600", "lastEventTimestamp": stamp,
                         "lastIngestionTime": stamp}]},
        {"logGroupName": "/aws/sagemaker/TrainingJobs", "logStreamNamePrefix": f"{NAME}/"})


def _no_new_lines(aws: StubbedAWS) -> None:
    _streams(aws, 60)
    aws.stub("logs").add_response("get_log_events", {"events": [], "nextForwardToken": "f/1"}, None)


def _stop(aws: StubbedAWS, kind: str | None = None) -> None:
    _describe(aws, "InProgress", "Training")  # training.stop looks first (a finished job is not stopped)
    # The guard's reason is tagged on the job before the stop (SageMaker keeps none): `trainops status` reads it.
    aws.stub("sagemaker").add_response("add_tags", {"Tags": []}, {
        "ResourceArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{NAME}",
        "Tags": [{"Key": training.GUARD_KIND_TAG, "Value": kind} if kind else {"Key": training.GUARD_KIND_TAG,
                 "Value": ANY}, {"Key": training.GUARD_MESSAGE_TAG, "Value": ANY}]})
    aws.stub("sagemaker").add_response("stop_training_job", {}, {"TrainingJobName": NAME})


def _clocks(offset: float = 0.0):
    clock = FakeClock(start=0.0)
    return clock, (lambda: CREATED.timestamp() + offset + clock.now)


def _wait(aws: StubbedAWS, *, poll_seconds: float, clock: FakeClock, now, guards: JobGuards, log=None):
    """The backend's wait (the kit's) on the fake clocks; the result of the ended job."""
    backend = SageMakerBackend(client_factory=aws, poll_seconds=poll_seconds)
    backend.now, backend.pause = now, clock.sleep
    return backend.wait(JobHandle("sagemaker", NAME), guards=guards, log=log)


def test_a_training_job_that_stops_logging_is_stopped_as_stalled():
    aws = StubbedAWS()
    # Polls at +0, +300, +600, +900; the last log event is at +60: 840 s quiet at +900 passes stall_timeout 600.
    # The wait prints the job's new log lines after each look (DescribeLogStreams, GetLogEvents): none here.
    for poll in range(4):
        _describe(aws, "InProgress", "Training")
        _streams(aws, 60)
        if poll == 3:
            _stop(aws, "stalled")
        _no_new_lines(aws)
    _describe(aws, "Stopped", "Stopped", billable=905, training=905)
    _no_new_lines(aws)
    clock, now = _clocks()
    lines: list[str] = []
    result = _wait(aws, poll_seconds=300, clock=clock, now=now, log=lines.append,
                   guards=JobGuards(stall_timeout=600))
    aws.verify()
    guard = result.details.get("guard")
    assert guard is not None and guard["kind"] == "stalled"
    assert result.failure_reason.startswith("stalled: no new log line or metric for 840 s")
    assert any("stalled" in line for line in lines)
    verdict = classify_result(result.to_dict())
    assert verdict.failure_class == "infrastructure" and verdict.reason == "stalled"


def test_no_stall_is_seen_while_the_job_downloads_and_a_metric_counts_as_activity():
    aws = StubbedAWS()
    # Downloading for 2000 s prints nothing: no DescribeLogStreams call, no stall.
    for _ in range(3):
        response = training_description(NAME, "InProgress", "Downloading", transitions=TRAINING[:2])
        aws.stub("sagemaker").add_response("describe_training_job", response, {"TrainingJobName": NAME})
    # Training: the logs are old (+0) but a metric was updated at +2300: not quiet for 600 s at +2400.
    metric = training_description(NAME, "InProgress", "Training", transitions=TRAINING)
    metric["FinalMetricDataList"] = [{"MetricName": "loss", "Value": 0.5,
                                      "Timestamp": CREATED + timedelta(seconds=2300)}]
    aws.stub("sagemaker").add_response("describe_training_job", metric, {"TrainingJobName": NAME})
    _streams(aws, 0)
    _describe(aws, "Completed", "Completed", billable=2500, training=2500)
    clock, now = _clocks()
    result = _wait(aws, poll_seconds=800, clock=clock, now=now, guards=JobGuards(stall_timeout=600))
    aws.verify()
    assert result.status.value == "Completed" and result.details.get("guard") is None


def test_a_job_is_stopped_when_its_billable_cost_reaches_the_budget():
    aws = StubbedAWS()
    hourly = 2 * catalog.hourly_price("ml.p4d.24xlarge", "us-east-1")  # the job's 2 instances together
    # No BillableTimeInSeconds while it runs: the seconds since TrainingStartTime bound it. Budget: one hour.
    for _ in range(4):  # +0, +1200, +2400, +3600
        _describe(aws, "InProgress", "Training")
    _stop(aws, "budget")
    _describe(aws, "Stopped", "Stopped", billable=3610, training=3610)
    clock, now = _clocks()
    result = _wait(aws, poll_seconds=1200, clock=clock, now=now,
                   guards=JobGuards(budget_usd=hourly, hourly_usd=hourly))
    aws.verify()
    assert result.details["guard"]["kind"] == "budget" and "max_cost_usd" in result.failure_reason
    assert clock.sleeps == [1200, 1200, 1200, 1200]
    assert classify_result(result.to_dict()).failure_class == "budget"


def test_a_reattached_wait_is_bounded_from_the_jobs_own_start_and_stops_the_job():
    aws = StubbedAWS()
    # MaxRuntimeInSeconds 7200 + grace 600 = 7800 s from the job's start. This wait begins at +7000 (an Airflow
    # retry re-attaching): polls at +7000, +7600 and +7800, when the bound passes (the pause before it is cut to
    # it); the job is stopped at +7800, not at +7000 + 7800.
    for _ in range(3):
        _describe(aws, "InProgress", "Training")
    _stop(aws, "wait_bound")
    _describe(aws, "Stopped", "Stopped", billable=8210, training=8210)
    clock, now = _clocks(offset=7000)
    result = _wait(aws, poll_seconds=600, clock=clock, now=now,
                   guards=JobGuards(grace_seconds=600))
    aws.verify()
    assert clock.sleeps == [600, 200, 600]  # looks at +7000, +7600, +7800 (stopped), then the stop shows
    assert result.details["guard"]["kind"] == "wait_bound" and "7800 s" in result.failure_reason
    assert classify_result(result.to_dict()).failure_class == "timeout"


def test_a_bound_that_only_stops_waiting_leaves_the_job_running():
    aws = StubbedAWS()
    for _ in range(2):  # +7000, +7800
        _describe(aws, "InProgress", "Training")
    clock, now = _clocks(offset=7000)
    with pytest.raises(WaitTimedOut) as raised:
        _wait(aws, poll_seconds=800, clock=clock, now=now, guards=JobGuards(grace_seconds=600, stop_at_bound=False))
    aws.verify()  # no StopTrainingJob was queued, and none was made (the Stubber refuses unqueued calls)
    assert "left running" in str(raised.value)


def test_a_job_that_fails_on_its_own_while_being_stopped_keeps_its_own_cause():
    aws = StubbedAWS()
    for _ in range(2):  # +0, +700: the last event at +0, stall_timeout 600: tripped at +700
        _describe(aws, "InProgress", "Training")
        _streams(aws, 0)
    _stop(aws, "stalled")
    _describe(aws, "Failed", "Failed", failure_reason="AlgorithmError: ExecuteUserScriptError: exit code 1")
    clock, now = _clocks()
    result = _wait(aws, poll_seconds=700, clock=clock, now=now,
                   guards=JobGuards(stall_timeout=600))
    aws.verify()
    assert result.details.get("guard") is None and result.failure_reason.startswith("AlgorithmError")
    assert classify_result(result.to_dict()).failure_class == "user"


def test_a_spot_interruption_is_not_counted_as_billable_while_the_job_runs():
    from trainops.backends.sagemaker.activity import observe

    response = training_description(NAME, "InProgress", "Training", spot=True, max_wait=14400)
    response["TrainingStartTime"] = CREATED
    response["SecondaryStatusTransitions"] = [
        {"Status": "Training", "StartTime": CREATED, "EndTime": CREATED + timedelta(seconds=600)},
        {"Status": "Interrupted", "StartTime": CREATED + timedelta(seconds=600),
         "EndTime": CREATED + timedelta(seconds=1500)},
        {"Status": "Training", "StartTime": CREATED + timedelta(seconds=1500)}]
    seen = observe(response, CREATED.timestamp() + 2000)
    assert seen.billable_seconds == 2000 - 900
    assert seen.running_since == CREATED.timestamp() + 1500  # the stall clock restarts with training
    assert seen.max_wait == 14400 and seen.started == CREATED.timestamp()


def test_a_poller_that_describes_then_looks_pays_one_describe_a_poll():
    """The Airflow trigger and the worker's poll describe the job, then look with its watch: the look uses that
    answer (the Stubber refuses a second DescribeTrainingJob that was not queued); a look with no describe before it,
    or after the answer was used, describes the job itself."""
    aws = StubbedAWS()
    backend = SageMakerBackend(client_factory=aws)
    handle = JobHandle("sagemaker", NAME)
    watch = backend.watch(handle, JobGuards(max_run=10**9))  # the fixture's job started long ago: no bound here
    for _ in range(2):  # two polls: describe, then look
        _describe(aws, "InProgress", "Training")
        assert backend.describe(handle).status.outcome == "waiting"
        assert watch.look() is None
    _describe(aws, "InProgress", "Training")
    assert watch.look() is None  # nothing described since the last look: it describes itself
    aws.verify()


def test_a_job_that_never_shows_its_stop_does_not_hold_the_wait_for_ever():
    aws = StubbedAWS()
    running = training_description(NAME, "InProgress", "Training", transitions=TRAINING)
    aws.stub("sagemaker").add_response("describe_training_job", running, {"TrainingJobName": NAME})
    _stop(aws, "wait_bound")  # the first look is past the bound (the job started at CREATED, max_run 60)
    for _ in range(3):  # +1200, +2400, +3600: still Stopping an hour after the stop
        _describe(aws, "Stopping", "Stopping")
    clock, now = _clocks(offset=7200)
    with pytest.raises(WaitTimedOut) as raised:
        _wait(aws, poll_seconds=1200, clock=clock, now=now, guards=JobGuards(max_run=60, grace_seconds=0))
    aws.verify()
    assert "was stopped (wait bound" in str(raised.value) and "has not ended" in str(raised.value)
    assert clock.sleeps == [1200, 1200, 1200]


def test_a_throttled_log_read_is_a_failed_look_and_prints_nothing_twice():
    aws = StubbedAWS()
    stream = f"{NAME}/algo-1-1767225600"
    logs = aws.stub("logs")

    def lines(events: list[str], token_in: str | None, token_out: str) -> None:
        _streams(aws, 60)
        expected = {"logGroupName": "/aws/sagemaker/TrainingJobs", "logStreamName": stream, "startFromHead": True,
                    "limit": 1000 - (2 if token_in == "f/2" and not events else 0)}
        if token_in:
            expected["nextToken"] = token_in
        logs.add_response("get_log_events", {"events": [{"timestamp": 1, "message": text} for text in events],
                                             "nextForwardToken": token_out}, expected)

    # The first read gets two lines, the read after them (is there more?) is throttled: none printed yet, the cursor
    # where it was; the next look reads them again and prints them once.
    _describe(aws, "InProgress", "Training")
    lines(["one", "two"], None, "f/2")
    _streams(aws, 60)
    logs.add_client_error("get_log_events", service_error_code="ThrottlingException", http_status_code=400)
    _describe(aws, "Completed", "Completed", billable=100, training=100)
    lines(["one", "two"], None, "f/2")
    lines([], "f/2", "f/2")
    clock, now = _clocks()
    said: list[str] = []
    result = _wait(aws, poll_seconds=30, clock=clock, now=now, guards=JobGuards(), log=said.append)
    aws.verify()
    assert result.status.value == "Completed"
    assert said == ["[algo-1] one", "[algo-1] two"]  # read once, not again after the throttled read
    assert clock.sleeps == [30]  # the throttled read: looked at again after the poll interval
