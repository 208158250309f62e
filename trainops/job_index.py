"""Where each job trainops started lives, per user, so `trainops status NAME` finds a job by its name alone.

Every training job a backend places (`Backend.submit`: the CLI, a pipeline, an Airflow task and a KFP component all
pass there) is remembered as one small JSON file: the backend, where its jobs live (the handle's ``location``: a
work directory, a region, a Slurm shared directory and how it is reached), the named backend it was opened as, when
trainops first saw it, and the pipeline that ran it. `trainops status/logs/stop/report NAME` read it when no backend
is given; `trainops jobs` lists it.

The directory is ``$TRAINOPS_JOB_INDEX``, else ``index/`` under the user's state root (`trainops.home`:
``$TRAINOPS_HOME``, else platformdirs' user state directory). One file per job and location, written through a
temporary and renamed into place, so concurrent writers never see or leave half a record and never need a lock. The
files are input like any other: each is read bounded (`MAX_ENTRY_BYTES`, links not followed), checked field by
field, and a corrupt one is skipped with a warning, never trusted. Nothing secret is kept: only the handle's
location (which backends fill with where a job is, never with a credential), minus any key or value that looks
secret (`trainops.spec.secrets`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainops.home import trainops_home

logger = logging.getLogger(__name__)

ENV = "TRAINOPS_JOB_INDEX"
#: An entry is a few hundred bytes; anything larger was not written by trainops.
MAX_ENTRY_BYTES = 16 * 1024
#: The newest entries kept; a write beyond it removes the oldest (a user who ran 10,000 jobs lists the recent ones).
MAX_ENTRIES = 5000
#: What the index keeps of a location: a few short settings.
MAX_LOCATION_KEYS = 16
MAX_VALUE_LENGTH = 4096
_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
_BACKEND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
_KEY = re.compile(r"[a-z][a-z0-9_]{0,62}\Z")
KINDS = ("training", "pipeline")

Warn = Callable[[str], None]
#: The pipeline whose step is placing a job now (`pipeline_context`): its jobs carry the pipeline's name and record.
_PIPELINE: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("trainops_pipeline", default=None)


@dataclass(frozen=True)
class JobEntry:
    """One remembered job: its name, backend and location, enough to open the backend and find the job again."""

    name: str
    backend: str
    location: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    kind: str = "training"
    where: str = ""
    named_as: str | None = None
    pipeline: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "backend": self.backend, "location": dict(self.location),
                "started": self.started, "where": self.where, "named_as": self.named_as,
                "pipeline": dict(self.pipeline) if self.pipeline else None}

    @property
    def place(self) -> str:
        """Where the job lives, as a person reads it (``workdir=/x``, ``region=us-east-1``)."""
        return ", ".join(f"{key}={value}" for key, value in sorted(self.location.items())) or self.where or "-"


def index_dir() -> Path:
    """The index's directory: ``$TRAINOPS_JOB_INDEX``, else ``<state root>/index``."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured).expanduser().resolve()

    return trainops_home() / "index"


def _secret(key: str, value: str) -> bool:
    from trainops.spec.secrets import is_secret  # function-local (heavy): pydantic, which the seam does not load

    return is_secret(key, value)


def public_location(location: Mapping[str, Any] | None) -> dict[str, str]:
    """The part of a handle's location the index may keep: short text settings whose name and value do not look
    secret (a token, a key, a URL with a password)."""
    kept: dict[str, str] = {}
    for key, value in sorted((location or {}).items()):
        if value is None or not isinstance(key, str) or not _KEY.match(key):
            continue
        text = str(value)
        if len(text) <= MAX_VALUE_LENGTH and "\0" not in text and not _secret(key, text):
            kept[key] = text
    return dict(list(kept.items())[:MAX_LOCATION_KEYS])


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _file_name(entry: JobEntry) -> str:
    # Job names are letters, digits and hyphens: `<name>.` then a digest of the place can never be another name's.
    return f"{entry.name}.{_digest(entry.kind, entry.backend, entry.location)}.json"


def _directory(kind: str, create: bool) -> Path:
    path = index_dir() / ("jobs" if kind == "training" else "pipelines")
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


@contextlib.contextmanager
def pipeline_context(name: str, record: str) -> Iterator[None]:
    """Jobs placed inside this block belong to the pipeline ``name`` whose record is ``record`` (last-run.json)."""
    token = _PIPELINE.set({"name": name, "record": record})
    try:
        yield
    finally:
        _PIPELINE.reset(token)


def remember(entry: JobEntry) -> Path | None:
    """Write (or refresh) ``entry``; the first ``started`` of a job stays. Never raises: the job exists whether or
    not it could be remembered, so a failure is a warning (the job is still found with --backend and -o)."""
    try:
        directory = _directory(entry.kind, create=True)
        target = directory / _file_name(entry)
        earlier = _read(target, lambda _text: None) if target.exists() else None
        if earlier is not None:
            entry = dataclasses.replace(entry, started=earlier.started, pipeline=entry.pipeline or earlier.pipeline)
        data = json.dumps(entry.to_dict(), sort_keys=True).encode("utf-8")
        handle, temporary = tempfile.mkstemp(prefix=".entry-", dir=directory)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(temporary, target)  # atomic: a reader sees the old entry or the new one, never half
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _prune(directory)
        return target
    except (OSError, ValueError) as error:
        logger.warning("[trainops] could not remember job %s in the job index (%s): %s; find it with --backend "
                       "and -o", entry.name, index_dir(), error)
        return None


def remember_job(backend: Any, handle: Any) -> None:
    """Remember the training job of ``handle`` that ``backend`` placed (the one hook in `Backend.submit`)."""
    location = dict(getattr(handle, "location", None) or {})
    if "workdir" in getattr(backend, "CONTEXT", ()) and "workdir" not in location:
        # The default state root is where the job lives: keep it, so a later $TRAINOPS_HOME does not lose it.

        location["workdir"] = str(trainops_home())
    try:
        where = str(backend.where())
    except Exception:  # noqa: BLE001 - a description only; the location is what finds the job
        where = ""
    remember(JobEntry(name=handle.job_name, backend=handle.backend, location=public_location(location),
                      started=time.time(), where=where[:MAX_VALUE_LENGTH],
                      named_as=getattr(backend, "named_as", None), pipeline=_PIPELINE.get()))


def remember_pipeline(name: str, workdir: str, record: str, started: float, backend: str) -> Path | None:
    """Remember a pipeline run (its name, work directory and record) so `trainops report NAME` finds it."""
    return remember(JobEntry(name=name, backend=backend, kind="pipeline", location={"workdir": str(workdir)},
                             started=started, where=str(record), pipeline={"name": name, "record": str(record)}))


def _prune(directory: Path) -> None:
    names = [entry for entry in os.scandir(directory) if entry.name.endswith(".json")]
    if len(names) <= MAX_ENTRIES:
        return
    names.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime)
    for old in names[:len(names) - MAX_ENTRIES]:
        with contextlib.suppress(OSError):
            os.unlink(old.path)


def _warn(text: str) -> None:
    logger.warning("[trainops] %s", text)


def _text_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_LOCATION_KEYS or not all(
            isinstance(key, str) and _KEY.match(key) and isinstance(item, str) and len(item) <= MAX_VALUE_LENGTH
            for key, item in value.items()):
        raise ValueError(f"{what} is not a small mapping of settings to text")
    return dict(value)


def parse_entry(data: Any) -> JobEntry:
    """A `JobEntry` from a decoded file, every field checked; `ValueError` saying which is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    name, backend, kind = data.get("name"), data.get("backend"), data.get("kind", "training")
    if not isinstance(name, str) or not _JOB_NAME.match(name):
        raise ValueError("name is not a job name")
    if not isinstance(backend, str) or not _BACKEND_NAME.match(backend):
        raise ValueError("backend is not a backend name")
    if kind not in KINDS:
        raise ValueError(f"kind is not one of {', '.join(KINDS)}")
    started = data.get("started")
    if isinstance(started, bool) or not isinstance(started, (int, float)) or not 0 <= started < 1e11:
        raise ValueError("started is not a time")
    where, named_as = data.get("where") or "", data.get("named_as")
    if not isinstance(where, str) or len(where) > MAX_VALUE_LENGTH:
        raise ValueError("where is not text")
    if named_as is not None and (not isinstance(named_as, str) or not _BACKEND_NAME.match(named_as)):
        raise ValueError("named_as is not a backend name")
    pipeline = data.get("pipeline")
    return JobEntry(name=name, backend=backend, kind=kind, location=_text_map(data.get("location") or {}, "location"),
                    started=float(started), where=where, named_as=named_as,
                    pipeline=_text_map(pipeline, "pipeline") if pipeline is not None else None)


def _read(path: Path, warn: Warn) -> JobEntry | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        warn(f"job index entry {path} skipped: {error.strerror or error}")
        return None
    try:
        with os.fdopen(descriptor, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise ValueError("not a regular file")
            raw = stream.read(MAX_ENTRY_BYTES + 1)
        if len(raw) > MAX_ENTRY_BYTES:
            raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes")
        return parse_entry(json.loads(raw.decode("utf-8")))
    except (ValueError, OSError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        warn(f"job index entry {path} skipped: {error}")
        return None


def entries(kind: str = "training", *, name: str | None = None, warn: Warn | None = None) -> list[JobEntry]:
    """The remembered entries of ``kind`` (only those called ``name`` if given), newest first; a corrupt file is
    skipped with a warning (``warn``, default: the log)."""
    warn = warn or _warn
    directory = _directory(kind, create=False)
    pattern = f"{name}.*.json" if name is not None else "*.json"
    if name is not None and not _JOB_NAME.match(name):
        return []
    try:
        paths = sorted(directory.glob(pattern))
    except OSError as error:
        warn(f"the job index {directory} cannot be read: {error}")
        return []
    found = [entry for path in paths[:MAX_ENTRIES * 2] if (entry := _read(path, warn)) is not None
             and (name is None or entry.name == name)]
    return sorted(found, key=lambda entry: entry.started, reverse=True)


def forget(entry: JobEntry) -> bool:
    """Remove ``entry`` from the index (its job is gone); True when a file was removed."""
    try:
        os.unlink(_directory(entry.kind, create=False) / _file_name(entry))
        return True
    except OSError:
        return False
