"""What makes a training run the same run: the spec's hash and the data behind its local channels.

A channel's value is opaque above the backend: a local path is fingerprinted by its files (path, size, mtime), any
other URI (``s3://``, ``pvc://ns/claim/path``, an engine's own scheme) by its text, never looked up here: the data
behind it is the engine's to read, and this process may not reach it (a claim inside a cluster). A new version of
such data under the same URI is the same run: give it a new URI (or a run key) to train again.

The pipeline runner and the KFP train component name jobs from this identity, so running the same inputs again
re-attaches to the finished job instead of training twice. (Airflow names a job from its task instance instead: dag,
task, run and map index, so a retry of that task re-attaches.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainops.spec import names

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

import hashlib
import re
from pathlib import Path

#: A URI's scheme (RFC 3986: a letter, then letters, digits, + - .), then ``://``.
_SCHEME = re.compile(r"\A[A-Za-z][A-Za-z0-9+.-]*://")


def local_path(value: str) -> Path | None:
    """The local path a channel value names (a path, or a ``file://`` URI), or None for any other URI."""
    if value.startswith("file://"):
        return Path(value[len("file://"):])
    return None if _SCHEME.match(value) else Path(value)


def channel_fingerprint(paths: dict[str, str]) -> str:
    """A cheap identity of the data behind the channels: for a local path every file's relative path, size and
    mtime; for any other URI its text (see the module docstring)."""
    digest = hashlib.sha256()
    for name in sorted(paths):
        digest.update(f"channel:{name}\n".encode())
        root = local_path(str(paths[name]))
        if root is None:
            digest.update(f"uri\0{paths[name]}\n".encode())
            continue
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            stat = path.stat()
            relative = path.relative_to(root) if root.is_dir() else path.name
            digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def training_fingerprint(spec: JobSpec, channels: dict[str, str]) -> str:
    """The spec hash and the channels' data, as one hash."""
    return hashlib.sha256(f"{spec.spec_hash()}\n{channel_fingerprint(channels)}".encode()).hexdigest()


def training_job_name(spec: JobSpec, channels: dict[str, str], *, base: str, run_key: str = "") -> str:
    """`<spec name or base>-<hash of the fingerprint [and run_key]>`: the same inputs give the same name."""
    parts = [training_fingerprint(spec, channels)] + ([run_key] if run_key else [])
    return names.deterministic_job_name(spec.name or base, *parts)
