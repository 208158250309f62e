"""A model registry in a directory: the local stand-in for the SageMaker Model Registry.

Layout (one directory per model group, one per version)::

    <registry>/<group>/.lock               the group's lock file (fcntl)
    <registry>/<group>/.staging/           artifacts being copied in, before they get a version number
    <registry>/<group>/v1/entry.json       the version's record (see `ModelVersion`)
    <registry>/<group>/v1/model.tar.gz     a copy of the model artifact (a directory artifact is copied as model/)

The artifact is copied into the registry, so a registered model survives its run directory being deleted. Several
processes may register into one group at once: the copy happens outside the lock (it may be large), then, under the
group's lock, the next version number is chosen and the staged directory is renamed to ``v<N>`` in one step. A
version therefore appears complete or not at all, and no number is used twice. Approval updates rewrite
``entry.json`` atomically (temporary file, then rename) under the same lock.

The champion of a group is its latest Approved version, as in the SageMaker Model Registry.

A training job is registered once: when ``job_name`` is given and a version of that job is already in the group,
`LocalRegistry.register` returns it instead of adding another. That check is made under the group's lock, so ten
concurrent registrations of one job (an Airflow retry racing the first try) still make one version.

Nothing is trusted that is read back: a version whose ``entry.json`` cannot be read, or whose artifact is not a plain
file or directory inside its version directory (a link, ``../..``, an absolute path), is *damaged*: listings and the
champion leave it out and `LocalRegistry.damaged` names it, so one bad version never blocks the rest of its group.
A model directory is copied in without following links: a symbolic link anywhere in it refuses the registration.

The registry directory is held to the state root's rules (`LocalRegistry.checked_root`): one made first by another
user, or writable by others, is refused for reading as for registering, so nobody else's "champion" is served.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.paths import checked_directory, own_directory, trainops_home
from trainops.backends.hostfs.safe_fs import (
    UnsafeFile,
    copy_file_at,
    copy_tree_at,
    open_state_file,
    read_bounded,
    write_atomically,
)
from trainops.backends.local.evaluate import local_path
from trainops.backends.model_rules import GROUP_PATTERN, check_group, check_metrics  # noqa: F401 - re-exported
from trainops.errors import JobFailed, Problem, SpecError

APPROVAL_STATUSES: tuple[str, ...] = ("Approved", "Rejected", "PendingManualApproval")
ENTRY_FILE = "entry.json"
LOCK_FILE = ".lock"
STAGING_DIR = ".staging"
ENTRY_LIMIT_BYTES = 16 * 1024 * 1024  # an entry.json (its spec included)
# The SageMaker model package group rule, so a group name works on both backends.
_VERSION_DIR = re.compile(r"^v([1-9][0-9]*)$")


def default_registry_dir() -> Path:
    """``registry`` in the local state root (``$TRAINOPS_HOME``, else the user's state directory), read when
    called so that a changed environment takes effect."""
    return trainops_home() / "registry"


def now_text() -> str:
    """The current time, UTC, ISO 8601 to the second (how the registry records times)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ModelVersion:
    """One registered version of a model.

    Attributes:
        group: the model group (what the model is: ``digits-classifier``).
        version: 1, 2, ... within the group, in order of registration.
        approval_status: Approved, Rejected or PendingManualApproval.
        model_artifact: the copy of the artifact inside the registry (absolute path).
        source_artifact: where the artifact was registered from.
        metrics: metric name -> number, from the evaluation.
        spec: the job spec that produced the model, as JSON (None when not given).
        created: registration time (UTC, ISO 8601).
        description: free text.
        job_name: the training job that produced the model.
        approval_history: every approval change, oldest first: ``{"status", "time"}``.
        path: the version's directory in the registry.
    """

    group: str
    version: int
    approval_status: str
    model_artifact: str
    source_artifact: str
    metrics: dict[str, float]
    created: str
    spec: dict[str, Any] | None = None
    description: str = ""
    job_name: str | None = None
    approval_history: list[dict[str, str]] = field(default_factory=list)
    path: str = ""

    def to_dict(self, include_spec: bool = True) -> dict[str, Any]:
        """A JSON-able dict; ``include_spec=False`` leaves the (possibly long) spec out, for listings and XCom."""
        data = asdict(self)
        if not include_spec:
            data.pop("spec")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: Path) -> ModelVersion:
        """A version from its ``entry.json`` contents (unknown keys are ignored: newer writers may add some)."""
        if not isinstance(data, Mapping):
            raise TypeError("the entry is not a JSON object")
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data and name != "path"}
        # The artifact is stored relative to its version directory, so a registry can be moved or copied whole. It
        # must be a plain name there: an edited entry must not make trainops read or serve a file from elsewhere.
        artifact = known.get("model_artifact")
        if not isinstance(artifact, str) or not artifact or "/" in artifact or artifact in (".", "..") \
                or "\x00" in artifact:
            raise ValueError(f"its model_artifact {artifact!r} is not a file name inside the version directory")
        try:
            details = os.lstat(path / artifact)
        except OSError as error:
            raise ValueError(f"its artifact {artifact!r} is missing ({error.strerror})") from None
        if not (stat.S_ISREG(details.st_mode) or stat.S_ISDIR(details.st_mode)):
            raise ValueError(f"its artifact {artifact!r} is a link or not a file; the registry serves only its own "
                             "copies")
        known["model_artifact"] = str(path / artifact)
        return cls(**known, path=str(path))

    def stored(self) -> dict[str, Any]:
        """The ``entry.json`` contents: as `to_dict`, with the artifact relative to the version directory and no
        path (both are derived from where the entry lies)."""
        data = self.to_dict()
        data.pop("path")
        data["model_artifact"] = Path(self.model_artifact).name
        return data


def check_approval(status: Any, field_name: str = "approval") -> str:
    """A valid approval status, or `SpecError` listing the valid ones."""
    if status not in APPROVAL_STATUSES:
        raise SpecError(Problem(field_name, f"{status!r} is not an approval status; use one of "
                                            f"{', '.join(APPROVAL_STATUSES)}"), source="registry")
    return str(status)


def _write_json_atomically(path: Path, data: Any) -> None:
    """Write JSON under a new unguessable name beside ``path``, flushed to disk, then renamed over it
    (`safe_fs.write_atomically`): a reader sees the old contents or the new, never half of them, and a link planted
    under either name is replaced, never written through."""
    write_atomically(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), 0o644, sync=True)


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def _disk_error(error: OSError, root: Path) -> Exception:
    """A full or read-only registry as a clear error (nothing was registered); other errors as they are."""
    where = error.filename or root
    if error.errno in FULL:
        return JobFailed(f"the registry's disk is full ({error.strerror}: {where}); nothing was registered "
                         f"(no version of it is left in {root}): free space there, or register into another "
                         "registry directory")
    if error.errno in READ_ONLY:
        return SpecError(Problem("registry_dir", f"{root} is read-only or not writable ({error.strerror}: {where}); "
                                                 "nothing was registered: give a registry directory you can write"),
                         source="registry")
    return error


def _refuse(path: str, why: str) -> SpecError:
    return SpecError(Problem("model_artifact", f"{path} {why}; the registry copies only regular files and "
                                               "directories (copy the model without links, then register it)"),
                     source="registry")


def _refused_entry(path: str, why: str) -> None:
    raise _refuse(path, why)


def copy_model_directory(source: Path, target: Path) -> None:
    """Copy the directory ``source`` to the new directory ``target`` without following any link
    (`safe_fs.copy_tree_at`): a link, FIFO or device anywhere refuses the copy with `SpecError` naming it."""
    source_root = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.mkdir(target, 0o755)
        target_root = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            copy_tree_at(source_root, target_root, _refused_entry, str(source))
        except UnsafeFile as error:  # a file swapped for a link while it was copied
            raise _refuse(str(error.filename or source), str(error.strerror)) from None
        finally:
            os.close(target_root)
    finally:
        os.close(source_root)


def copy_model_file(source: Path, target: Path) -> None:
    """Copy the artifact file ``source`` to the new file ``target``; a link or a non-file is refused."""
    if source.name != target.name:
        raise ValueError("the copy keeps the artifact's name")
    parent = os.open(source.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        target_parent = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            copy_file_at(source.name, parent, target_parent)
        except UnsafeFile as error:
            raise _refuse(str(source), str(error.strerror)) from None
        finally:
            os.close(target_parent)
    finally:
        os.close(parent)


class LocalRegistry:
    """A model registry rooted at a directory (created on first registration).

    Args:
        root: the registry directory; default `default_registry_dir`.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None):
        self.root = Path(root).expanduser().resolve() if root is not None else default_registry_dir()
        self.field = "registry_dir" if root is not None else "TRAINOPS_HOME"

    def checked_root(self, create: bool = False) -> Path:
        """The registry directory, checked as the state root is (`paths.checked_directory`): yours, writable by
        nobody else, in directories nobody else can rename it in, else `SpecError` naming ``registry_dir`` (or
        TRAINOPS_HOME for the default one). Otherwise a user who made it first could serve a planted champion, or
        have a registration write into their directory. ``create``: made mode 0700 when missing."""
        return checked_directory(self.root, self.field, ancestors=True, create=create)

    def __repr__(self) -> str:
        return f"LocalRegistry({str(self.root)!r})"

    def group_dir(self, group: str) -> Path:
        """The directory of a group (whether or not it exists)."""
        return self.root / check_group(group)

    @contextlib.contextmanager
    def _locked(self, group: str) -> Iterator[Path]:
        """Hold the group's exclusive lock (blocking until other processes release it); yields the group directory."""
        directory = self._group_directory(group)
        descriptor = open_state_file(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise JobFailed(f"{directory / LOCK_FILE} is not a regular file: remove it")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield directory
        finally:
            # Closing the descriptor releases the lock, also when the body raised.
            os.close(descriptor)

    def _group_directory(self, group: str) -> Path:
        """The group's directory, made (mode 0700) in a checked registry when missing; a link, a file or another
        user's directory there is refused."""
        self.checked_root(create=True)
        return own_directory(self.group_dir(group), self.field)

    def groups(self) -> list[str]:
        """Every group that has a directory in the registry, sorted."""
        self.checked_root()
        if not self.root.is_dir():
            return []
        return sorted(entry.name for entry in self.root.iterdir()
                      if entry.is_dir() and GROUP_PATTERN.match(entry.name))

    def _version_numbers(self, directory: Path) -> list[int]:
        if not directory.is_dir():
            return []
        numbers = []
        for entry in os.scandir(directory):
            match = _VERSION_DIR.match(entry.name)
            # Every version directory counts, damaged or not, so that its number is never given out again.
            if match and entry.is_dir(follow_symlinks=False):
                numbers.append(int(match.group(1)))
        return sorted(numbers)

    def _read(self, directory: Path) -> ModelVersion:
        entry_path = directory / ENTRY_FILE
        try:
            # A regular file of at most ENTRY_LIMIT_BYTES (`read_bounded`): a link there is damaged, not followed.
            data = json.loads(read_bounded(entry_path, ENTRY_LIMIT_BYTES, whole=True).decode("utf-8"))
            return ModelVersion.from_dict(data, directory)
        except (OSError, ValueError, TypeError, RecursionError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise JobFailed(f"registry entry {entry_path} cannot be read ({reason}); restore it or remove "
                            f"{directory}") from error

    def _scan(self, group: str | None) -> tuple[list[ModelVersion], list[tuple[str, int, str]]]:
        self.checked_root()
        groups = [check_group(group)] if group is not None else self.groups()
        versions: list[ModelVersion] = []
        damaged: list[tuple[str, int, str]] = []
        for name in groups:
            directory = self.root / name
            for number in self._version_numbers(directory):
                try:
                    versions.append(self._read(directory / f"v{number}"))
                except JobFailed as error:
                    damaged.append((name, number, str(error)))
        return versions, damaged

    def _version_of_job(self, group: str, job_name: str | None) -> ModelVersion | None:
        """The latest readable version of ``group`` that training job ``job_name`` made, if any."""
        if not job_name:
            return None
        return next((entry for entry in reversed(self._scan(group)[0]) if entry.job_name == job_name), None)

    def list(self, group: str | None = None) -> list[ModelVersion]:
        """Every readable version of one group, or of every group, ordered by group then version (damaged versions
        are left out: see `damaged`)."""
        return self._scan(group)[0]

    def damaged(self, group: str | None = None) -> builtins.list[tuple[str, int, str]]:
        """The versions that cannot be used, as ``(group, version, why)``: an unreadable ``entry.json``, or an
        artifact that is not the registry's own copy."""
        return self._scan(group)[1]

    def get(self, group: str, version: int | None = None) -> ModelVersion:
        """One version (the latest when ``version`` is None). Raises `SpecError` naming what exists when it does not."""
        self.checked_root()
        directory = self.group_dir(group)
        numbers = self._version_numbers(directory)
        if not numbers:
            known = ", ".join(self.groups()) or "none"
            raise SpecError(Problem("group", f"no model group {group!r} in {self.root} (groups: {known})"),
                            source="registry")
        if version is None:
            readable = self.list(group)
            # The latest usable version: a damaged one must not hide the others.
            chosen = readable[-1].version if readable else numbers[-1]
        else:
            chosen = version
        if chosen not in numbers:
            raise SpecError(Problem("version", f"{group} has no version {version!r} (versions: "
                                               f"{', '.join(map(str, numbers))})"), source="registry")
        return self._read(directory / f"v{chosen}")

    def champion(self, group: str) -> ModelVersion | None:
        """The latest Approved version of the group, or None (no group, or nothing approved yet)."""
        approved = [entry for entry in self.list(group) if entry.approval_status == "Approved"]
        return approved[-1] if approved else None

    def register(self, **arguments: Any) -> ModelVersion:
        """Copy the artifact into the registry and record a new version of ``group``; return it (the arguments are
        :meth:`register_once`'s)."""
        return self.register_once(**arguments)[0]

    def register_once(
        self,
        *,
        group: str,
        model_artifact: str | os.PathLike[str],
        metrics: Mapping[str, Any],
        approval: str = "Approved",
        spec: Mapping[str, Any] | None = None,
        description: str = "",
        job_name: str | None = None,
    ) -> tuple[ModelVersion, bool]:
        """Copy the artifact into the registry and record a new version of ``group``; return it, and whether this
        call added it (False when ``job_name`` already had a version, which is returned instead: of concurrent
        registrations of one job exactly one says it added the version).

        Args:
            model_artifact: a ``model.tar.gz`` (local path or ``file://``) or a model directory.
            metrics: the evaluation's metrics (name -> number).
            approval: Approved, Rejected or PendingManualApproval.
            spec: the job spec that produced the model, as a JSON-able mapping.
            job_name: the training job that produced the model; when a version of it is already in the group, that
                version is returned and nothing is added (decided under the group's lock).

        Raises `SpecError` for bad input and for a model directory holding a link, FIFO or device.
        """
        check_group(group)
        check_approval(approval)
        checked_metrics = check_metrics(metrics)
        # A retried task or a re-run pipeline registers its training job once: a version that exists already
        # saves the copy; racing registrations are decided again under the group's lock below.
        earlier = self._version_of_job(group, job_name)
        if earlier is not None:
            return earlier, False
        source = local_path(model_artifact, "model_artifact")
        if not source.exists():
            raise SpecError(Problem("model_artifact", f"{source} does not exist; give the training job's "
                                                      f"model.tar.gz"), source="registry")
        spec_data = None
        if spec is not None:
            try:
                spec_data = json.loads(json.dumps(dict(spec)))
            except (TypeError, ValueError) as error:
                raise SpecError(Problem("spec", f"cannot be stored as JSON ({error})"), source="registry") from error
        try:
            return self._register_copy(group, source, checked_metrics, approval, spec_data, description, job_name)
        except UnsafeFile as error:  # an entry swapped for a link or a FIFO while it was copied
            raise _refuse(str(error.filename or source), str(error.strerror)) from error
        except OSError as error:
            raise _disk_error(error, self.root) from error

    def _register_copy(self, group: str, source: Path, checked_metrics: dict[str, float], approval: str,
                       spec_data: Any, description: str, job_name: str | None) -> tuple[ModelVersion, bool]:
        """The copy into ``.staging`` and its publication as the next version (see `register_once`)."""
        staging_root = own_directory(self._group_directory(group) / STAGING_DIR, self.field)
        staged = Path(tempfile.mkdtemp(dir=staging_root))  # an unguessable name, created exclusively (mode 0700)
        try:
            # The copy happens before taking the lock: a large model must not hold up other registrations.
            if source.is_dir():
                copy_model_directory(source, staged / "model")
                artifact_name = "model"
            else:
                artifact_name = source.name
                copy_model_file(source, staged / artifact_name)
            created = now_text()
            with self._locked(group) as directory:
                # Decided under the lock: concurrent registrations of one job agree on one version.
                earlier = self._version_of_job(group, job_name)
                if earlier is not None:
                    shutil.rmtree(staged, ignore_errors=True)
                    return earlier, False
                numbers = self._version_numbers(directory)
                version = (numbers[-1] if numbers else 0) + 1
                final = directory / f"v{version}"
                record = ModelVersion(
                    group=group, version=version, approval_status=approval,
                    model_artifact=str(final / artifact_name), source_artifact=str(source), metrics=checked_metrics,
                    created=created, spec=spec_data, description=description, job_name=job_name,
                    approval_history=[{"status": approval, "time": created}], path=str(final),
                )
                _write_json_atomically(staged / ENTRY_FILE, record.stored())
                # One rename publishes the whole version: readers never see a version without its entry or artifact.
                os.rename(staged, final)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise
        return record, True

    def set_approval(self, group: str, version: int, status: str) -> ModelVersion:
        """Change a version's approval status (recorded in its history); return the updated version."""
        check_approval(status, "status")
        self.get(group, version)  # a clear error for an unknown group or version, before locking
        with self._locked(group) as directory:
            current = self._read(directory / f"v{version}")
            if current.approval_status == status:
                return current
            history = [*current.approval_history, {"status": status, "time": now_text()}]
            data = current.stored()
            data.update(approval_status=status, approval_history=history)
            _write_json_atomically(directory / f"v{version}" / ENTRY_FILE, data)
        return self._read(directory / f"v{version}")
