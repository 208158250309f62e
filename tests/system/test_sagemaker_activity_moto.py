"""The stall watchdog's probe of a SageMaker job's CloudWatch logs (activity.last_log_event: DescribeLogStreams'
lastEventTimestamp / lastIngestionTime) against a moto server on 127.0.0.1, which implements the logs API."""

from __future__ import annotations

import time
import uuid

import pytest

from trainops.backends.sagemaker.activity import last_log_event
from trainops.backends.sagemaker.logs import LOG_GROUP

pytestmark = pytest.mark.system


def _group(logs) -> None:
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass


def test_the_newest_event_of_any_of_the_jobs_streams(aws_clients):
    logs = aws_clients("logs")
    _group(logs)
    job = f"bert-{uuid.uuid4().hex[:8]}"
    base = int(time.time() * 1000) - 60_000  # CloudWatch (and moto) refuse events older than 14 days
    # Another job's stream with a newer event, written first: not this job's activity.
    other = f"{job}x/algo-1-1767225600"
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=other)
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=other,
                        logEvents=[{"timestamp": base + 50_000, "message": "other job"}])
    for host, stamp in (("algo-1", base + 1_000), ("algo-2", base + 5_000)):
        stream = f"{job}/{host}-1767225600"
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                            logEvents=[{"timestamp": stamp, "message": f"{host} step 1"}])
    streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job}/")["logStreams"]
    assert max(stream["lastEventTimestamp"] for stream in streams) == base + 5_000
    # The newest of the events' and the ingestions' times (lastEventTimestamp may lag on AWS; ingestion does not).
    expected = max(max(stream["lastEventTimestamp"], stream.get("lastIngestionTime", 0)) for stream in streams)
    assert last_log_event(aws_clients, job) == expected / 1000.0


def test_a_job_without_streams_or_group_has_no_activity(aws_clients):
    assert last_log_event(aws_clients, f"silent-{uuid.uuid4().hex[:8]}") is None
    assert last_log_event(aws_clients, "silent-1", log_group=f"/trainops/missing-{uuid.uuid4().hex[:6]}") is None
