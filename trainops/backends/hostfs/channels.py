"""Where each channel of a request has its data on a host's file system: a local directory used in place, an S3
prefix downloaded once into the job's directory (through staging, which refuses hostile keys), a single object as a
one-file directory. Every problem of every channel is reported at once, each naming its channel.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.contract_dir import replace_with_link
from trainops.backends.hostfs.stage_names import RESERVED_PREFIX, printable_name
from trainops.backends.hostfs.staging import stage_tree
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.inputs import local_path

logger = logging.getLogger(__name__)


def channel_problem(path: str) -> str | None:
    """Why this user cannot read the local channel data at ``path``, or None."""
    if not os.path.exists(path):
        return f"{path} does not exist: stage the data first (trainops stage)"
    wanted = os.R_OK | (os.X_OK if os.path.isdir(path) else 0)
    if not os.access(path, wanted):
        return f"{path} cannot be read by this user (uid {os.getuid()}): give it read access, or stage it elsewhere"
    return None


def local_source(uri: str) -> Path | None:
    """Where a channel's data is on this machine when ``uri`` is a plain path or a ``file://`` URI (the spec's
    `local_path` reading, ``file://localhost/`` included); None for a remote one (``s3://``). What the job's
    controller fetches and what `trainops.backends.local.preflight` checks beforehand, alike."""
    if "://" in uri and not uri.startswith("file://"):
        return None
    return Path(local_path(uri)).expanduser()


def _single_object(client: Any, uri: str) -> tuple[str, str] | None:
    """(bucket, key) when `uri` names one object exactly (a source tarball), else None (a prefix)."""
    if uri.endswith("/"):
        return None
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        client.head_object(Bucket=bucket, Key=key)
    except Exception:  # noqa: BLE001 - any answer but the object's headers means "a prefix"
        return None
    return bucket, key


def fetch_channels(request: Mapping[str, Any], job_dir: Path, overrides: Mapping[str, str],
                   s3_factory: Callable[[str], Any] | None) -> dict[str, Path]:
    """channel name -> the local directory holding its data; s3:// channels are downloaded into the job directory
    once (every host sees the same copy), local ones are used in place. Every problem is reported at once."""
    channels = {channel["ChannelName"]: channel for channel in request.get("InputDataConfig") or []}
    problems = [Problem(f"channel {name}", f"is not a channel of the request (channels: {sorted(channels)})")
                for name in sorted(set(overrides) - set(channels))]
    resolved: dict[str, Path] = {}
    for name, channel in channels.items():
        source = channel["DataSource"]
        if name in overrides:
            uri = overrides[name]
        elif "FileSystemDataSource" in source:
            system = source["FileSystemDataSource"]
            problems.append(Problem(f"inputs.{name}", f"reads {system['FileSystemType']} {system['FileSystemId']}, "
                                                      "which cannot be mounted here: map it to a local directory "
                                                      f"with --channel {name}=PATH"))
            continue
        else:
            s3 = source["S3DataSource"]
            if s3.get("S3DataType", "S3Prefix") != "S3Prefix":
                problems.append(Problem(f"inputs.{name}", f"S3DataType {s3['S3DataType']} is not emulated locally: "
                                                          "give an S3 prefix"))
                continue
            uri = s3["S3Uri"]
        local = local_source(uri)
        if local is not None:
            path = local.resolve()
            problem = channel_problem(str(path))  # missing, or this user cannot read it
            if problem is not None:
                problems.append(Problem(f"inputs.{name}", problem))
            else:
                resolved[name] = path if path.is_dir() else _single_file_channel(job_dir, name, path)
            continue
        try:
            resolved[name] = _download(uri, job_dir / "data" / name, s3_factory)
        except SpecError as error:
            problems += [Problem(f"inputs.{name}", problem.message) for problem in error.problems]
    if problems:
        raise SpecError(problems, "channels of the local job")
    return resolved


def _download(uri: str, destination: Path, s3_factory: Callable[[str], Any] | None) -> Path:
    """Every object under the S3 prefix `uri` (or the one object it names) into `destination`, as SageMaker's File
    mode does: names relative to the prefix, nothing else in the directory."""
    factory = s3_factory or _default_s3_factory
    client = factory("s3")
    logger.info("[trainops] downloading channel %s from %s", destination.name, uri)
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    single = _single_object(client, uri)
    if single is not None:  # an object, not a prefix: the channel holds that one file, under its own name
        items = [(prefix, prefix.rsplit("/", 1)[-1])]
    else:
        # A prefix goes through staging, which refuses hostile keys with a reason each and writes only below the
        # destination (directories opened relative to their checked parents, no links followed).
        return _stage_prefix(uri, destination, factory)
    if destination.exists():
        shutil.rmtree(destination)  # a re-run downloads afresh: nothing stale stays in the channel
    destination.mkdir(parents=True)

    def fetch(item: tuple[str, str]) -> None:
        key, name = item
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))

    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(fetch, items))
    except Exception as error:  # noqa: BLE001 - botocore's and the disk's errors alike fail this channel
        raise SpecError(Problem("", f"downloading {uri} failed: {error}")) from error
    return destination


def _stage_prefix(uri: str, destination: Path, factory: Callable[[str], Any]) -> Path:
    if destination.exists():
        shutil.rmtree(destination)  # a re-run downloads afresh: nothing stale stays in the channel
    try:
        report = stage_tree(uri, str(destination), progress=False, client_factory=factory)
    except JobFailed as error:  # the prefix cannot be listed (no bucket, no access): this channel's problem
        raise SpecError(Problem("", str(error))) from error
    items = list(report.refused) + list(report.failed)
    if items:
        shown = 10
        listed = "; ".join(f"{printable_name(item.name)}: {item.reason}" for item in items[:shown])
        more = f"; and {len(items) - shown} more" if len(items) > shown else ""
        raise SpecError(Problem("", f"staging {uri} refused or failed {len(items)} object(s): {listed}{more}"))

    for path in destination.iterdir():  # staging's manifest: SageMaker's channel holds the objects alone
        if path.name.startswith(RESERVED_PREFIX) and path.is_file() and not path.is_symlink():
            path.unlink()
    if not any(destination.iterdir()):
        raise SpecError(Problem("", f"no objects under {uri}; check the bucket and the prefix"))
    return destination


def _default_s3_factory(service: str) -> Any:
    import boto3

    return boto3.client(service)


def _single_file_channel(job_dir: Path, name: str, path: Path) -> Path:
    # A channel is a directory in the container, even when its S3 prefix names one object.
    directory = job_dir / "data" / name
    directory.mkdir(parents=True, exist_ok=True)
    replace_with_link(directory / path.name, path)
    return directory


