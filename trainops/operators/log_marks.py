"""Where a task's log stands in its job's log: the cursor after the last job line written into the task log.

A deferred train task's trigger writes the job's lines into the task log as the job prints them. When the trigger
moves to another triggerer (a crash, a restart) or a later try of the task re-attaches to the job (a clear, a
retry), the next writer must continue from the last line already written: from the job's first line it repeats
them, from the job's end it loses the lines since the last poll (and, for a job that ended between two polls, its
tail). So after each batch it writes, the writer records the job log's cursor (`Backend.log_lines`' small JSON) in
an Airflow Variable named after the job (``trainops_log_mark.<backend>.<job name>``: the job name is the task
instance's, the same for every try), which every triggerer and worker reads through Airflow; the task forgets it
once it has the job's outcome. A crash between writing lines and recording the cursor repeats at most that batch.

A store that cannot be read or written (no Variable backend reachable) costs continuity, never the task: the mark
is then missing and the trigger falls back to skipping to the log's end when it was resumed.
"""

from __future__ import annotations

import json
from typing import Any

PREFIX = "trainops_log_mark"


def key(handle: Any) -> str:
    return f"{PREFIX}.{handle.backend}.{handle.job_name}"


def load(handle: Any) -> dict[str, Any] | None:
    """The recorded cursor of the job's log (None: nothing recorded, or the store cannot be read)."""
    from trainops.operators.compat import get_variable

    try:
        text = get_variable(key(handle))
        value = json.loads(text) if text else None
    except Exception:  # noqa: BLE001 - a mark is continuity, not the job's outcome
        return None
    return value if isinstance(value, dict) else None


def save(handle: Any, cursor: dict[str, Any] | None, log: Any = None) -> None:
    """Record ``cursor`` as where the task log stands (a failure is logged as a warning, never raised)."""
    if cursor is None:
        return
    from trainops.operators.compat import set_variable

    try:
        set_variable(key(handle), json.dumps(cursor, sort_keys=True))
    except Exception as error:  # noqa: BLE001 - a mark is continuity, not the job's outcome
        if log is not None:
            log.warning("could not record where the task log stands in %s's log (%s): a trigger moved to another "
                        "triggerer or a later try may repeat or miss lines", handle.job_name, error)


def forget(handle: Any) -> None:
    """The task has the job's outcome: drop its mark (best effort)."""
    from trainops.operators.compat import delete_variable

    try:
        delete_variable(key(handle))
    except Exception:  # noqa: BLE001 - a leftover mark is a small Variable, not a fault
        pass
