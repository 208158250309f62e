"""Per-rank records: how each rank of a host started and ended, read back by the launcher to name the root cause.

Each rank's wrapper (:mod:`trainops.runtime.rank`) keeps two files in the host's record directory
(``output/ranks/``, docs/contracts.md, section 4):

- ``rank-<R>.json``: ``{"rank", "local_rank", "host", "pid", "start_ticks", "started_at", "state": "running"}`` when
  the rank starts, replaced atomically by ``state: "exited"`` with ``exit_code``, ``ended_at``, ``reason`` and
  ``exception`` (one line) when the script ends. A rank killed by a signal never gets to write its end: its record
  stays ``running`` and the launcher tells what happened from what it (or torchrun, or mpirun) observed.
- ``rank-<R>.stderr``: the last part of the rank's stderr (bounded), written as it goes, so it survives a SIGKILL.

Standard library only, and small: every rank imports it before the user's script starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from trainops.runtime.untrusted import read_bounded, read_tail_bytes

RECORD_PREFIX = "rank-"

#: The tail file is cut back to TAIL_KEEP_BYTES whenever it grows past TAIL_LIMIT_BYTES.
TAIL_LIMIT_BYTES = 256 * 1024
TAIL_KEEP_BYTES = 64 * 1024
#: The most a rank record (or the launcher's observations) may hold: a larger one is skipped as unreadable (a rank
#: can write anything in its host's record directory; `trainops.runtime.untrusted` reads what a job may have left).
RECORD_LIMIT_BYTES = 1024 * 1024
#: The most a file holding an environment may hold (an mpirun host's registration, its ranks' environment, the
#: outcome): the kernel holds an environment to ARG_MAX (2 MiB on Linux) with the arguments, so twice that is more
#: than any true one.
ENVIRONMENT_LIMIT_BYTES = 4 * 1024 * 1024


def record_path(record_dir: str, rank: int) -> str:
    """The record file of one rank."""
    return os.path.join(record_dir, f"{RECORD_PREFIX}{rank}.json")


def tail_path(record_dir: str, rank: int) -> str:
    """The stderr tail file of one rank."""
    return os.path.join(record_dir, f"{RECORD_PREFIX}{rank}.stderr")


def write_atomically(path: str, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` (``mode``) under a temporary name, then rename it: a reader, on this host or another
    that shares the directory, sees the whole file or none. Every rank of the host (and every host, for a shared
    directory) can write where these files go, so the temporary's name is one nobody can guess, created exclusively
    without following a link (``mkstemp``): a link or a FIFO planted under any name is never written through nor
    blocked on, and one under ``path`` is replaced. The one way the runtime writes its files."""
    import tempfile

    directory, name = os.path.split(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
    try:
        with open(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def write_json_atomically(path: str, value: Any, mode: int = 0o600) -> None:
    """``value`` as JSON, by `write_atomically`."""
    write_atomically(path, json.dumps(value).encode("utf-8"), mode)


def write_record(record_dir: str, record: dict[str, Any]) -> None:
    """Write a rank's record atomically (`write_json_atomically`): readers never see half a record."""
    os.makedirs(record_dir, exist_ok=True)
    write_json_atomically(record_path(record_dir, int(record["rank"])), record, 0o644)


def read_records(record_dirs: Iterable[str]) -> list[dict[str, Any]]:
    """Every rank record found in the given directories (unreadable or half-written files are skipped), sorted by
    rank."""
    found: dict[int, dict[str, Any]] = {}
    for directory in record_dirs:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if not (name.startswith(RECORD_PREFIX) and name.endswith(".json")):
                continue
            try:
                record = json.loads(read_bounded(os.path.join(directory, name), RECORD_LIMIT_BYTES, whole=True))
                record["record_dir"] = directory
                found[int(record["rank"])] = record
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return [found[rank] for rank in sorted(found)]


def read_tail(record_dir: str, rank: int, lines: int = 40) -> list[str]:
    """The last ``lines`` lines of a rank's stderr tail file (empty when there is none)."""
    try:
        data = read_tail_bytes(tail_path(record_dir, rank), TAIL_KEEP_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    return [line for line in text.split("\n") if line.strip()][-lines:]


def clear_records(record_dir: str) -> None:
    """Remove the records and tails a previous launch left in this directory (a re-run in the same contract
    directory must not inherit them)."""
    try:
        names = os.listdir(record_dir)
    except OSError:
        return
    for name in names:
        if name.startswith(RECORD_PREFIX) or name.endswith(".json"):
            try:
                os.remove(os.path.join(record_dir, name))
            except OSError:
                pass


OBSERVED_FILE = "observed-failures.json"


def write_observed(record_dir: str, launcher: str, failures: list[dict[str, Any]]) -> None:
    """Keep what a launcher (torchrun's agent, mpirun) saw of failed ranks: ``[{"rank", "local_rank", "pid",
    "exit_code", "timestamp"}]`` where ``exit_code`` is negative for a signal, as ``subprocess`` reports it."""
    os.makedirs(record_dir, exist_ok=True)
    write_json_atomically(os.path.join(record_dir, OBSERVED_FILE), {"launcher": launcher, "failures": failures},
                          0o644)


def read_observed(record_dir: str) -> list[dict[str, Any]]:
    """The failures a launcher recorded with :func:`write_observed` (empty when none)."""
    try:
        failures = json.loads(read_bounded(os.path.join(record_dir, OBSERVED_FILE), RECORD_LIMIT_BYTES,
                                           whole=True)).get("failures", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [failure for failure in failures if isinstance(failure, dict)]
