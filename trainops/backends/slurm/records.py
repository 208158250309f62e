"""A Slurm job's records under the shared directory: what trainops knows of it after Slurm has forgotten it.

Slurm keeps an ended job only ``MinJobAge`` seconds (300 by default) unless the cluster runs slurmdbd, which many do
not, so trainops keeps its own, in the job's directory (``<shared_dir>/jobs/<name>/``, the user's alone):

- ``slurm-job.json``, written by trainops where it submits (before ``sbatch``, then with the Slurm job id) and again
  when a look sees the job end (``final``: the state Slurm gave it, and why);
- ``ended.json``, written by the job itself (`trainops.backends.slurm.node`, on the batch host): ``finish`` when its
  step ends, completed with the model's archive, or failed with the runtime's failure file as the reason;
  ``ended-by-slurm`` when Slurm ends it (the batch shell's trap on SIGTERM: ``slurm_state`` CANCELLED, TIMEOUT,
  NODE_FAIL or PREEMPTED);
- ``stop.json``, written by `SlurmBackend.stop` before ``scancel``: who asked and why.

Each is one small JSON file, replaced atomically; each is read as what a job can write (the job runs as the user
and ``ended.json`` is its own): `trainops.runtime.untrusted`, no link followed, no FIFO waited on, bounded, and
typed: every field trainops reads must hold the type it reads (`FIELDS`; a time a number, a Slurm state one of the
states an end has...), else the record is damaged, a `SpecError` naming the file and the field, never a crash on
the first use of the value (a job Slurm has forgotten is read from these alone).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from trainops.backends.hostfs import safe_fs
from trainops.errors import Problem, SpecError
from trainops.runtime.untrusted import read_bounded

JOB = "slurm-job.json"
ENDED = "ended.json"
STOP = "stop.json"
LIMIT = 4 * 1024 * 1024

_NUMBER = (int, float)
_TEXT = (str,)
#: The states a job's own end record may give (how Slurm ended it, or how its step ended).
ENDED_STATES = ("CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "FAILED",
                "COMPLETED")
ENDED_STATUSES = ("Completed", "Failed", "Stopped")
#: Per record, the fields trainops reads and the types each may hold (None is always allowed: not known). A tuple
#: of strings is the values a field may take.
FIELDS: dict[str, dict[str, tuple[Any, ...]]] = {
    JOB: {"job_name": _TEXT, "token": _TEXT, "user": _TEXT, "uid": (int,), "status": _TEXT, "submitted": _NUMBER,
          "started": _NUMBER, "transport": _TEXT, "nodes_requested": (int,), "instance_type": _TEXT,
          "instance_count": (int,), "max_run": (int,), "slurm_job_id": (int,), "checkpoint_dir": _TEXT,
          "output_dir": _TEXT, "hosts": (list,), "final": (dict,)},
    ENDED: {"status": ENDED_STATUSES, "slurm_state": ENDED_STATES, "slurm_line": _TEXT, "nodes": _TEXT,
            "ended": _NUMBER, "exit_code": (int,), "failure_reason": _TEXT, "model_artifact": _TEXT,
            "output_artifact": _TEXT, "secondary_status": _TEXT, "failed_host": _TEXT, "failed_node": _TEXT},
    STOP: {"reason": _TEXT, "at": _NUMBER, "pid": (int,)},
}


def write(job_dir: Path, name: str, record: dict[str, Any]) -> None:
    safe_fs.write_atomically(job_dir / name, json.dumps(record, indent=2, default=str).encode("utf-8"))


def _forget(job_dir: Path) -> str:
    """Never "remove its directory" while Slurm may still run the job: the record is unreadable, not the job gone."""
    return (f"the job may still be in Slurm's queue: check with `squeue --name {job_dir.name}` (and cancel it with "
            f"scancel if it should not run); once Slurm no longer runs it, remove {job_dir} to forget it")


def read(job_dir: Path, name: str) -> dict[str, Any] | None:
    """The record ``name`` of the job, or None when there is none; a link or a damaged file is a `SpecError`."""
    path = job_dir / name
    try:
        record = json.loads(read_bounded(path, LIMIT, whole=True).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise SpecError(Problem("job_name", f"{path} cannot be read ({error}): {_forget(job_dir)}"),
                        source="slurm job") from None
    if not isinstance(record, dict):
        raise SpecError(Problem("job_name", f"{path} does not hold a record: {_forget(job_dir)}"), source="slurm job")
    wrong = _mistyped(record, FIELDS.get(name, {}))
    if wrong:
        raise SpecError(Problem("job_name", f"{path} is damaged: {wrong}: {_forget(job_dir)}"), source="slurm job")
    return record


def _mistyped(record: dict[str, Any], fields: dict[str, tuple[Any, ...]]) -> str | None:
    """What is wrong with the first field of ``record`` that does not hold what ``fields`` says, or None."""
    for key, allowed in fields.items():
        value = record.get(key)
        if value is None:
            continue
        if all(isinstance(kind, str) for kind in allowed):
            if value not in allowed:
                return f"{key} is {value!r}, not one of {', '.join(allowed)}"
        elif isinstance(value, bool) or not isinstance(value, allowed) or (
                isinstance(value, float) and not math.isfinite(value)):
            names = " or ".join(dict.fromkeys(f"a {_NAMES[kind]}" for kind in allowed))
            return f"{key} is {_NAMES.get(type(value), type(value).__name__)} {value!r:.60}, not {names}"
    return None


_NAMES = {str: "text", int: "number", float: "number", list: "list", dict: "mapping", bool: "true/false"}


def update(job_dir: Path, name: str, **values: Any) -> dict[str, Any]:
    """The record with ``values`` laid over it, written back (its one writer is trainops' submitting side)."""
    record = {**(read(job_dir, name) or {}), **values}
    write(job_dir, name, record)
    return record
