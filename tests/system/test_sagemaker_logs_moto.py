"""CloudWatch logs of a two-host job on a moto server: interleaved by time, prefixed with the host."""

from __future__ import annotations

import time
import uuid

import pytest

from trainops.backends.sagemaker.logs import LOG_GROUP, read_logs

pytestmark = pytest.mark.system


def _put(logs, stream, events):
    logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream,
                        logEvents=[{"timestamp": stamp, "message": text} for stamp, text in events])


def test_two_hosts_are_interleaved_by_time(aws_clients):
    logs = aws_clients("logs")
    try:
        logs.create_log_group(logGroupName=LOG_GROUP)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    job = f"digits-{uuid.uuid4().hex[:8]}"
    # CloudWatch (and moto) reject events older than 14 days: stamp them a minute ago.
    base = int(time.time() * 1000) - 60_000
    _put(logs, f"{job}/algo-2-1767225600", [(base + 2, "rank 1 ready"), (base + 5, "rank 1 epoch 1"), (base + 7, "rank 1 done")])
    _put(logs, f"{job}/algo-1-1767225600", [(base + 1, "rank 0 ready"), (base + 4, "rank 0 epoch 1"), (base + 8, "rank 0 done")])
    # Another job's stream in the same group must not leak in.
    _put(logs, f"{job}x/algo-1-1767225600", [(base + 3, "other job")])
    assert read_logs(aws_clients, job) == [
        "[algo-1] rank 0 ready",
        "[algo-2] rank 1 ready",
        "[algo-1] rank 0 epoch 1",
        "[algo-2] rank 1 epoch 1",
        "[algo-2] rank 1 done",
        "[algo-1] rank 0 done",
    ]


def test_a_job_without_streams_has_no_lines(aws_clients):
    assert read_logs(aws_clients, f"silent-{uuid.uuid4().hex[:8]}") == []
