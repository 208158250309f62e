"""What a local run needs of this machine, checked when the job is validated (`LocalBackend.dry_run`: exit 2 before
anything is laid out, detached or started), so that a job never returns 0 and then fails before its script runs:

- an ``s3://`` channel (or an s3 output path) is read through boto3: it must be installed (else the extra that
  adds it is named), and each such prefix is listed once (one key, short timeouts) so a missing bucket, missing
  credentials or an empty prefix are said now, naming the channel;
- a local channel must be a directory (or file) this user can read;
- the per-user process limit (``ulimit -u``) must leave room for the job's processes: each host's launcher, its
  init and runtime, the ranks and their threads. A user at the limit otherwise meets fork errors deep inside a
  host ("exited with code 2 without writing a failure file").

The job's controller checks the channels again when it fetches them (they may change meanwhile), as the runtime does.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

from trainops.aws.clients import ADVISORY_SETTINGS, advisory_client, client_config, error_code
from trainops.backends.hostfs.channels import channel_problem, local_source
from trainops.backends.request.hosts import host_groups
from trainops.backends.request.render_options import CODE_CHANNELS
from trainops.errors import Problem, SpecError
from trainops.runtime.processes import process_limit, user_tasks

#: Tasks (processes and threads) a local job needs at the least: the controller and its threads, then per host its
#: launcher, init, runtime launcher and relay threads, then per rank the rank and its wrapper's threads. A floor,
#: not a forecast: a job's script may start many more (torch's thread pools: one per core of this machine).
CONTROLLER_TASKS, HOST_TASKS, RANK_TASKS = 6, 5, 3


def _channel_uris(request: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    """channel -> where the run reads it: its override, else its S3Uri (a file system channel: none)."""
    return {channel["ChannelName"]: overrides.get(channel["ChannelName"])
            or (channel["DataSource"].get("S3DataSource") or {}).get("S3Uri") or ""
            for channel in request.get("InputDataConfig") or []}


def _s3_uris(request: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    """field -> s3:// URI of what the local run reads or writes through boto3."""
    uris = {f"inputs.{name}": uri for name, uri in _channel_uris(request, overrides).items()
            if uri.startswith("s3://")}
    output = (request.get("OutputDataConfig") or {}).get("S3OutputPath") or ""
    if output.startswith("s3://"):
        uris["output_path"] = output
    return uris


def _local_channels(request: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, str]:
    """field -> the local path of each channel the run reads in place (`channels.local_source`, as the job does)."""
    found: dict[str, str] = {}
    for name, uri in _channel_uris(request, overrides).items():
        if name in CODE_CHANNELS and name not in overrides:
            continue  # the code and runtime channels the launchers add: laid out when the job starts
        path = local_source(uri) if uri else None
        if path is not None:
            found[f"inputs.{name}"] = str(path)
    return found


def _reachable(field: str, uri: str, client: Any) -> Problem | None:
    """A problem when the prefix cannot be listed (no bucket, no credentials, no access) or holds nothing."""
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        answer = client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
    except Exception as error:  # noqa: BLE001 - botocore's errors (credentials, endpoint, access) alike
        code = error_code(error) or type(error).__name__
        return Problem(field, f"{uri} cannot be listed ({code}: {error}); check the bucket, the credentials and the "
                              "region, or map the channel to local data: --channel NAME=PATH")
    if field.startswith("inputs.") and not answer.get("KeyCount") and not answer.get("Contents"):
        return Problem(field, f"no objects under {uri}; check the bucket and the prefix")
    return None


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ImportError:  # a finder that refuses it outright
        return False


def _s3_client(client_factory: Callable[[str], Any] | None) -> Any:
    """An S3 client for the check: a look, not a transfer, so the advisory settings (a few seconds at most, one
    retry: `trainops.aws.clients.ADVISORY_SETTINGS`), the given factory's advisory client where it has one."""
    if client_factory is not None:
        return advisory_client(client_factory, "s3")
    import boto3

    return boto3.client("s3", config=client_config(**ADVISORY_SETTINGS))


def check_s3(request: Mapping[str, Any], overrides: Mapping[str, str],
             client_factory: Callable[[str], Any] | None) -> list[Problem]:
    """The problems of what the run reads or writes in S3 (see the module docstring)."""
    uris = _s3_uris(request, overrides)
    if not uris:
        return []
    if not _installed("boto3"):
        return [Problem(field, f"{uri} is read through boto3, which is not installed in {sys.prefix}: pip install "
                               "'trainops[aws]' (or map the channel to local data: --channel NAME=PATH)")
                for field, uri in uris.items()]
    try:
        client = _s3_client(client_factory)
    except Exception as error:  # noqa: BLE001 - no region, a broken profile: said once per field
        return [Problem(field, f"{uri}: no S3 client ({error})") for field, uri in uris.items()]
    return [problem for field, uri in uris.items() if (problem := _reachable(field, uri, client)) is not None]


def check_process_room(hosts: int, processes_per_host: int) -> Problem | None:
    """A problem when the per-user process limit leaves no room for the job's processes (`process_limit`)."""
    limit = process_limit()
    running = user_tasks() if limit is not None else None
    if limit is None or running is None:
        return None
    needed = CONTROLLER_TASKS + hosts * (HOST_TASKS + RANK_TASKS * processes_per_host)
    if running + needed <= limit:
        return None
    return Problem("processes", f"the per-user process limit (ulimit -u, RLIMIT_NPROC) is {limit} and this user "
                                f"runs {running} processes and threads already; the job's {hosts} host(s) of "
                                f"{processes_per_host} process(es) need at least {needed} more: raise the limit "
                                "(ulimit -u) or stop other processes, then run it again")


def check_local_run(request: Mapping[str, Any], *, overrides: Mapping[str, str] | None = None,
                    processes_per_host: int | None = None,
                    client_factory: Callable[[str], Any] | None = None) -> None:
    """Raise `SpecError` (every problem, each naming its field) for what this machine cannot give the run."""
    overrides = dict(overrides or {})
    problems = check_s3(request, overrides, client_factory)
    problems += [Problem(field, problem) for field, path in _local_channels(request, overrides).items()
                 if (problem := channel_problem(path)) is not None]
    room = check_process_room(len(host_groups(request)), max(1, processes_per_host or 1))
    if room is not None:
        problems.append(room)
    if problems:
        raise SpecError(problems, source="local run")
