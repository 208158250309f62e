"""SDK v3's local channels on SageMaker: an ``InputData`` whose data source is a path on this machine is uploaded
before the job is created, and the request names where it went (v3's ``create_input_data_channel``).

Where: ``<output_path>/<job name>/input/<channel>/`` (a file keeps its name under it). v3 writes
``s3://<session default bucket>/<base_job_name>/input/<channel>``; trainops has no default bucket and keys the data
by the job's own name, so a re-attached run renders the same request and two runs of one base name keep their own
data (docs/spec.md, "SDK v3"). The SDK v2 estimator has no such upload: a v2 spec's local channel stays refused by
the SageMaker backend (stage it with ``trainops stage SRC s3://...``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import Problem
from trainops.spec.inputs import TrainingInput, is_local_uri, local_path


@dataclass(frozen=True)
class LocalChannel:
    """One channel to upload: the data on this machine and the S3 URI the request names."""

    name: str
    path: Path
    uri: str

    def files(self) -> list[tuple[Path, str]]:
        """Each file and its key under the channel's prefix: a directory's files by their relative paths (sorted, so
        an upload again writes the same keys), a file by its name."""
        if self.path.is_file():
            return [(self.path, self.path.name)]
        return sorted(((item, item.relative_to(self.path).as_posix()) for item in self.path.rglob("*")
                       if item.is_file()), key=lambda pair: pair[1])


def local_channels(spec: Any, output_path: str, job_name: str) -> list[LocalChannel]:
    """The v3 spec's channels on this machine with where they go; none for a v2 spec."""
    if getattr(spec, "sdk", "v2") != "v3":
        return []
    found = []
    base = f"{output_path.rstrip('/')}/{job_name}/input"
    for name, channel in spec.channels.items():
        if isinstance(channel, TrainingInput) and is_local_uri(channel.s3_data):
            # absolute, links kept: a file's key is the name the user gave, not its link's target's
            path = Path(os.path.abspath(Path(local_path(channel.s3_data)).expanduser()))
            uri = f"{base}/{name}/{path.name}" if path.is_file() else f"{base}/{name}/"
            found.append(LocalChannel(name, path, uri))
    return found


def local_channel_problems(spec: Any) -> list[Problem]:
    """A v3 spec's local channel that is not there to upload (a file or a directory of this machine)."""
    problems = []
    for channel in local_channels(spec, "s3://check", "check"):
        if not channel.path.exists():
            problems.append(Problem(f"inputs.{channel.name}", f"{channel.path} does not exist on this machine: SDK "
                                                              "v3 uploads a local channel's file or directory; give "
                                                              "one that exists, or an s3:// URI"))
        elif channel.path.is_dir() and not channel.files():
            problems.append(Problem(f"inputs.{channel.name}", f"{channel.path} holds no file: a channel of nothing "
                                                              "would start a job with no data; give the data's "
                                                              "directory"))
    return problems
