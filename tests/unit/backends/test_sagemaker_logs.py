"""CloudWatch logs of every host: host names from stream names, and following a running job with the kit's ``logs
--follow`` over the backend's `read_logs` (Stubber: the job's status changes, which moto cannot do). Interleaving against moto's logs service is in tests/system."""

from __future__ import annotations

from support.sagemaker_shapes import training_description
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.api import JobHandle
from trainops.backends.sagemaker.backend import SageMakerBackend
from trainops.backends.sagemaker.logs import LOG_GROUP, host_of, list_streams, read_logs

JOB = "digits-abc"


def test_host_of_stream_names():
    assert host_of(f"{JOB}/algo-1-1700000000", JOB) == "algo-1"
    assert host_of(f"{JOB}/algo-12-1700000000", JOB) == "algo-12"
    assert host_of(f"{JOB}/algo-2", JOB) == "algo-2"


def _streams(aws, *names):
    aws.stub("logs").add_response(
        "describe_log_streams",
        {"logStreams": [{"logStreamName": name} for name in names]},
        {"logGroupName": LOG_GROUP, "logStreamNamePrefix": JOB + "/"},
    )


def _events(aws, stream, events, token_in, token_out, limit=1000):
    expected = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True, "limit": limit}
    if token_in:
        expected["nextToken"] = token_in
    aws.stub("logs").add_response(
        "get_log_events",
        {"events": [{"timestamp": stamp, "message": text} for stamp, text in events], "nextForwardToken": token_out},
        expected,
    )


def _status(aws, status):
    aws.stub("sagemaker").add_response(
        "describe_training_job", training_description(JOB, status, status if status != "InProgress" else "Training"),
        {"TrainingJobName": JOB},
    )


def test_streams_are_sorted_by_host_number():
    aws = StubbedAWS()
    _streams(aws, f"{JOB}/algo-10-1", f"{JOB}/algo-2-1", f"{JOB}/algo-1-1")
    assert list_streams(aws, JOB) == [f"{JOB}/algo-1-1", f"{JOB}/algo-2-1", f"{JOB}/algo-10-1"]


def test_no_log_group_yet_means_no_lines():
    aws = StubbedAWS()
    aws.stub("logs").add_client_error("describe_log_streams", service_error_code="ResourceNotFoundException")
    assert read_logs(aws, JOB) == []


def test_follow_reads_new_hosts_and_lines_until_the_job_ends():
    aws = StubbedAWS()
    first, second = f"{JOB}/algo-1-100", f"{JOB}/algo-2-100"
    _status(aws, "InProgress")  # the follow's first look: there is such a job
    # Poll 1: the job runs; only algo-1 has started. Each read goes on until a read brings nothing.
    _status(aws, "InProgress")
    _streams(aws, first)
    _events(aws, first, [(10, "a1 starting\n"), (30, "a1 step 1\n")], None, "f/1")
    _streams(aws, first)
    _events(aws, first, [], "f/1", "f/1", limit=998)
    # Poll 2: the job has ended; algo-2 appeared; one more line from algo-1 (each stream reads its share).
    _status(aws, "Completed")
    _streams(aws, first, second)
    _events(aws, first, [(50, "a1 done\n")], "f/1", "f/2", limit=500)
    _events(aws, second, [(20, "a2 starting\n"), (40, "a2 done\n")], None, "g/1", limit=500)
    _streams(aws, first, second)
    _events(aws, first, [], "f/2", "f/2", limit=498)
    _events(aws, second, [], "g/1", "g/1", limit=498)
    clock = FakeClock()
    backend = SageMakerBackend(client_factory=aws)  # a follow reads every 5 s (a wait looks every 30 s)
    backend.pause = clock.sleep
    lines = list(backend.logs(JobHandle("sagemaker", JOB), follow=True))
    aws.verify()
    assert lines == [
        "[algo-1] a1 starting",
        "[algo-1] a1 step 1",
        "[algo-2] a2 starting",  # earlier than a1's last line printed before it: arrival order across polls
        "[algo-2] a2 done",
        "[algo-1] a1 done",
    ]
    assert clock.sleeps == [5]


def test_same_timestamp_keeps_host_order_then_stream_order():
    aws = StubbedAWS()
    first, second = f"{JOB}/algo-1-100", f"{JOB}/algo-2-100"
    _streams(aws, second, first)
    _events(aws, first, [(5, "one"), (5, "two")], None, "f/1", limit=500)
    _events(aws, second, [(5, "three")], None, "g/1", limit=500)
    _streams(aws, second, first)
    _events(aws, first, [], "f/1", "f/1", limit=498)
    _events(aws, second, [], "g/1", "g/1", limit=498)
    lines = read_logs(aws, JOB)
    assert lines == ["[algo-1] one", "[algo-1] two", "[algo-2] three"]
