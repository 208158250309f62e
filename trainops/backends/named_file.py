"""Named backends: settings a platform team writes once, so a DAG, a pipeline file or a command says ``backend="hpc"``.

The file is YAML (or JSON), one entry per name::

    hpc:
      backend: slurm            # a registered backend
      options:                  # its one mapping of settings: how it is reached and the jobs' options
        transport: rest
        shared_dir: /fsx/trainops
    gpu-eu:
      backend: sagemaker
      options: {region: eu-west-1, preflight: true}

It is ``$TRAINOPS_BACKENDS`` when set, else ``backends.yaml`` in the user's configuration directory (platformdirs:
``~/.config/trainops/backends.yaml`` on Linux). The same file serves every front end: the command line, an Airflow
worker and triggerer (set the variable in their environment), a KFP component (ship the file in the image, or set
the variable). What a front end gives (``-o``, ``backend_options``) lays over the entry's options. A name may not be
a registered backend's: ``local`` always means the local backend.

The file is read when a name that is not a registered backend is asked for, and again when it changed, with the
spec loader's limits (`trainops.spec.loader`: its size, its aliases, its depth and number of values; a regular file,
never waited on). Light: the registry imports this module; the loader (PyYAML) is imported only when there is a file
to read.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from trainops.errors import Problem, SpecError
from trainops.spec.loader import MAX_FILE_BYTES, parse_text  # its limits: size, aliases, depth, values

#: The environment variable naming the file of named backends.
ENVIRONMENT = "TRAINOPS_BACKENDS"
FILE_NAME = "backends.yaml"
NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class NamedBackend:
    """One entry: the backend it names and the settings it binds (the backend checks them when it is opened)."""

    name: str
    backend: str
    options: Mapping[str, Any] = field(default_factory=dict)


def config_path() -> Path:
    """Where the file of named backends is (it need not exist)."""
    configured = os.environ.get(ENVIRONMENT)
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_config_path("trainops")) / FILE_NAME


_cache: dict[str, tuple[tuple[int, int], dict[str, NamedBackend]]] = {}
_lock = threading.Lock()


def named_backends(registered: Mapping[str, str] | None = None) -> dict[str, NamedBackend]:
    """The named backends of the file (none when there is no file). ``registered``: the backends' names, which an
    entry may not take and must name. A file that is not readable or not valid is a `SpecError` naming it."""
    path = config_path()
    try:
        stat = path.stat()
    except OSError:
        return {}
    key = str(path)
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] == (stat.st_mtime_ns, stat.st_size):
            entries = cached[1]
        else:
            entries = _read(path)
            _cache[key] = ((stat.st_mtime_ns, stat.st_size), entries)
    if registered is not None:
        problems = [Problem(f"{name}.backend", f"{entry.backend!r} is not a backend; use one of "
                                               f"{', '.join(registered)}")
                    for name, entry in entries.items() if entry.backend not in registered]
        problems += [Problem(name, "is the name of a backend: give the entry another name")
                     for name in entries if name in registered]
        if problems:
            raise SpecError(problems, f"named backends ({path}, ${ENVIRONMENT})")
    return entries


def _bounded_text(path: Path, source: str) -> str:
    """The file's text, read as the spec loader reads a spec (`trainops.spec.loader.MAX_FILE_BYTES`, UTF-8, no NUL):
    a regular file only, opened without waiting (a FIFO there held every command that named a backend), a link
    followed (the user's own file; a configuration manager links it); ``/dev/null`` is no file of named backends."""
    import stat


    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SpecError(Problem("", f"cannot be read: {error.strerror or error}"), source) from None
    try:
        details = os.fstat(descriptor)
        if not stat.S_ISREG(details.st_mode):
            if os.path.exists(os.devnull) and os.path.samestat(details, os.stat(os.devnull)):
                return ""
            kind = ("a FIFO" if stat.S_ISFIFO(details.st_mode) else "a device" if stat.S_ISCHR(details.st_mode)
                    or stat.S_ISBLK(details.st_mode) else "a directory" if stat.S_ISDIR(details.st_mode)
                    else "not a regular file")
            raise SpecError(Problem("", f"is {kind}: give a YAML file of named backends"), source)
        chunks: list[bytes] = []
        while (left := MAX_FILE_BYTES + 1 - sum(map(len, chunks))) > 0 and (chunk := os.read(descriptor, left)):
            chunks.append(chunk)
        raw = b"".join(chunks)
    except OSError as error:
        raise SpecError(Problem("", f"cannot be read: {error.strerror or error}"), source) from None
    finally:
        os.close(descriptor)
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(Problem("", f"is larger than {MAX_FILE_BYTES:,} bytes, the limit of a spec file: a file of "
                                    "named backends holds a few entries"), source)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SpecError(Problem("", f"is not UTF-8 text (byte {error.start})"), source) from None
    if "\x00" in text:
        raise SpecError(Problem("", "holds NUL bytes: it is not a text file"), source)
    return text


def _read(path: Path) -> dict[str, NamedBackend]:
    source = f"named backends ({path}, ${ENVIRONMENT})"
    text = _bounded_text(path, source)
    if not text.strip():
        return {}
    try:
        document = parse_text(text, source)
    except SpecError as error:  # not YAML, or past one of the loader's limits (an alias bomb, too deep, too many)
        raise SpecError([Problem(problem.path, f"is not YAML trainops reads: {problem.message}")
                         for problem in error.problems], source) from None
    if not isinstance(document, dict):
        raise SpecError(Problem("", "must be a mapping of name -> {backend: NAME, options: {...}}"), source)
    entries, problems = {}, []
    for name, entry in document.items():
        if not isinstance(name, str) or not NAME.match(name):
            problems.append(Problem(str(name), "is not a name: lower-case letters, digits, - and _"))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("backend"), str):
            problems.append(Problem(name, "must be a mapping with backend: NAME (and options: {...})"))
            continue
        unknown = sorted(set(entry) - {"backend", "options", "description"})
        problems += [Problem(f"{name}.{key}", "is not a key of a named backend (backend, options, description)")
                     for key in unknown]
        options = entry.get("options") or {}
        if not isinstance(options, dict) or not all(isinstance(key, str) for key in options):
            problems.append(Problem(f"{name}.options", "must be a mapping of setting -> value"))
            continue
        entries[name] = NamedBackend(name, entry["backend"], dict(options))
    if problems:
        raise SpecError(problems, source)
    return entries
