"""The logs of every host of a training job, from CloudWatch, interleaved by time and prefixed with the host.

SageMaker writes one log stream per host into the group ``/aws/sagemaker/TrainingJobs``, named
``<job>/algo-<N>-<epoch seconds>``. Reading only the first stream (what most tools do) hides the host that failed;
here every stream is read, events are merged by timestamp (ties keep host order, then stream order), and each line
is shown as ``[algo-2] message``.

Lines are read after a cursor (stream -> CloudWatch's forward token, `read_lines`): the kit's wait, ``logs
--follow`` and the Airflow trigger stream a job's logs with it (`SageMakerBackend.read_logs`); new streams appear as
hosts start. Events that arrive late from one host after later lines of another were shown stay in arrival order:
CloudWatch gives no way to do better without holding output back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
_HOST_PATTERN = re.compile(r"^(?P<host>.+?-\d+)-\d+$")  # algo-2-1700000000 -> algo-2


@dataclass(frozen=True)
class LogLine:
    """One log event: when (milliseconds since the epoch), which host, which stream, and the text."""

    timestamp: int
    host: str
    stream: str
    message: str

    def render(self) -> str:
        """The line as users see it: ``[algo-1] message`` (trailing newline removed)."""
        return f"[{self.host}] {self.message.rstrip(chr(10))}"


def host_of(stream_name: str, job_name: str) -> str:
    """The host a stream belongs to: ``"my-job/algo-2-1700000000"`` -> ``"algo-2"``.

    Falls back to the stream's part after the job name when it does not end in ``-<epoch>``.
    """
    tail = stream_name[len(job_name) + 1 :] if stream_name.startswith(job_name + "/") else stream_name
    match = _HOST_PATTERN.match(tail)
    return match.group("host") if match else tail


def _host_sort_key(host: str) -> tuple[int, str]:
    # algo-2 before algo-10: numeric order for the usual names, text order for anything else.
    number = host.rsplit("-", 1)[-1]
    return (int(number), host) if number.isdigit() else (1 << 30, host)


def stream_records(factory: ClientFactory, job_name: str, log_group: str = LOG_GROUP) -> list[dict[str, Any]]:
    """DescribeLogStreams' records of the job's streams, every page (empty when the job has written no logs yet):
    the one listing the log reader and the stall watchdog (`activity.last_log_event`) share."""
    from botocore.exceptions import ClientError

    client = factory("logs")
    records: list[dict[str, Any]] = []
    token: str | None = None
    try:
        while True:
            arguments: dict[str, Any] = {"logGroupName": log_group, "logStreamNamePrefix": job_name + "/"}
            if token:
                arguments["nextToken"] = token
            response = client.describe_log_streams(**arguments)
            records += response.get("logStreams", [])
            token = response.get("nextToken")
            if not token:
                break
    except ClientError as error:
        if error_code(error) == "ResourceNotFoundException":
            return []  # the group appears with the first job of the account: no logs yet
        raise translate_client_error(error, f"DescribeLogStreams {job_name}") from error
    return records


def list_streams(factory: ClientFactory, job_name: str, log_group: str = LOG_GROUP) -> list[str]:
    """The names of the job's log streams (one per host; more after a spot restart), sorted by host. Empty when the
    job has written no logs yet."""
    names = [record["logStreamName"] for record in stream_records(factory, job_name, log_group)]
    return sorted(names, key=lambda name: (_host_sort_key(host_of(name, job_name)), name))


def _merge(batches: list[list[LogLine]], order: dict[str, int]) -> list[LogLine]:
    merged = [(line.timestamp, order[line.stream], index, line)
              for batch in batches for index, line in enumerate(batch)]
    merged.sort(key=lambda item: item[:3])
    return [item[3] for item in merged]


def read_logs(factory: ClientFactory, job_name: str, log_group: str = LOG_GROUP) -> list[str]:
    """Every log line the job has written so far, rendered ``[algo-1] ...``."""
    everything: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        lines, cursor = read_lines(factory, job_name, cursor, 1000, log_group)
        everything += lines
        if len(lines) < 1000:
            return everything


def read_lines(factory: ClientFactory, job_name: str, cursor: Mapping[str, Any] | None, limit: int,
               log_group: str = LOG_GROUP) -> tuple[list[str], dict[str, Any]]:
    """At most ``limit`` lines after ``cursor`` (`read_new_lines`), fewer only when every stream is read to its end:
    the kit takes a short batch as "caught up", and `read_new_lines` gives each stream only its share of ``limit``
    (a page of CloudWatch's may also hold fewer events than asked), so it is read again until a read brings
    nothing or the batch is full."""
    lines, after = read_new_lines(factory, job_name, dict(cursor or {}), limit, log_group)
    more = lines
    while more and len(lines) < limit:
        more, after = read_new_lines(factory, job_name, after, limit - len(lines), log_group)
        lines = lines + more
    return lines, after


def read_new_lines(factory: ClientFactory, job_name: str, cursor: dict[str, str] | None, limit: int,
                   log_group: str = LOG_GROUP) -> tuple[list[str], dict[str, str]]:
    """At most ``limit`` log lines (about: one page per stream) written after ``cursor`` (stream -> CloudWatch's
    forward token; None: from the start), rendered ``[algo-1] ...`` and merged by time, and the cursor after them
    (JSON). One DescribeLogStreams call plus one GetLogEvents call per stream: the cost of a poll does not grow with
    the job's age."""
    from botocore.exceptions import ClientError

    client = factory("logs")
    cursor = dict(cursor or {})
    streams = list_streams(factory, job_name, log_group)
    order = {stream: position for position, stream in enumerate(streams)}
    share = max(1, limit // max(1, len(streams)))
    batches = []
    try:
        for stream in streams:
            arguments: dict[str, Any] = {"logGroupName": log_group, "logStreamName": stream, "startFromHead": True,
                                         "limit": min(share, 10000)}
            if cursor.get(stream):
                if not isinstance(cursor[stream], str):
                    raise ValueError(f"the log cursor of {stream} is {cursor[stream]!r}, not a CloudWatch token")
                arguments["nextToken"] = cursor[stream]
            try:
                response = client.get_log_events(**arguments)
            except ClientError as error:
                if "nextToken" in arguments and error.response.get("Error", {}).get("Code") == \
                        "InvalidParameterException":
                    # A cursor may come from outside (an Airflow Variable): one CloudWatch does not know is refused
                    # as the host log reader refuses a bad offset, so the caller can start over instead of
                    # failing at every poll.
                    raise ValueError(f"the log cursor of {stream} is not a token CloudWatch knows ("
                                     f"{error.response['Error'].get('Message', '')})") from None
                raise
            batches.append([LogLine(int(event["timestamp"]), host_of(stream, job_name), stream, event["message"])
                            for event in response.get("events", [])])
            if response.get("nextForwardToken"):
                cursor[stream] = response["nextForwardToken"]
    except ClientError as error:
        raise translate_client_error(error, f"GetLogEvents {job_name}") from error
    return [line.render() for line in _merge(batches, order)], cursor
