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

A mark is input: whoever may set Airflow Variables may set it, to anything. A mark that is not a cursor (not a JSON
object of host or stream -> offset or token, an offset that is negative, text where a number belongs) or that the
backend refuses (`read`: an offset past the end of a host's log, or inside a line) is ignored with a warning in the
task log, and the log continues from the job's first line: lines may be repeated, none is hidden.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

PREFIX = "trainops_log_mark"
#: A cursor is small (one entry per host or log stream): a larger mark is not one trainops wrote.
MAX_MARK_CHARACTERS = 64 * 1024
MAX_TOKEN_CHARACTERS = 4096

_log = logging.getLogger(__name__)


def key(handle: Any) -> str:
    return f"{PREFIX}.{handle.backend}.{handle.job_name}"


def problem(value: Any) -> str | None:
    """What makes ``value`` (a mark, parsed) not a log cursor, or None: a JSON object whose keys are host or stream
    names and whose values are byte offsets (whole numbers >= 0) or tokens (text)."""
    if not isinstance(value, dict):
        return f"it is {type(value).__name__}, not a JSON object of host -> position"
    for name, position in value.items():
        if not isinstance(name, str) or not name:
            return f"{name!r} is not a host or log stream name"
        if isinstance(position, bool) or not isinstance(position, (int, str)):
            return f"the position of {name} is {json.dumps(position)}, not a byte offset or a token"
        if isinstance(position, int) and position < 0:
            return f"the position of {name} is {position}, a negative byte offset"
        if isinstance(position, str) and not 0 < len(position) <= MAX_TOKEN_CHARACTERS:
            return f"the position of {name} is not a token (empty, or over {MAX_TOKEN_CHARACTERS} characters)"
    return None


def _ignored(handle: Any, why: str, log: Any) -> dict[str, Any]:
    (log or _log).warning("the log mark of %s (Airflow Variable %s) is not a place in its log (%s): ignored; the "
                          "task log continues from the job's first line (lines may repeat, none is hidden)",
                          handle.job_name, key(handle), why)
    return {}  # the cursor of the log's start


def load(handle: Any, log: Any = None) -> dict[str, Any] | None:
    """The recorded cursor of the job's log (None: nothing recorded, or the store cannot be read; an empty cursor,
    the job's first line, for a mark that is not a cursor, warned about on ``log``)."""
    from trainops.operators.compat import get_variable

    try:
        text = get_variable(key(handle))
    except Exception:  # noqa: BLE001 - a mark is continuity, not the job's outcome
        return None
    if text is None or text == "":
        return None
    if not isinstance(text, str) or len(text) > MAX_MARK_CHARACTERS:
        return _ignored(handle, f"not text of at most {MAX_MARK_CHARACTERS} characters", log)
    try:
        value = json.loads(text)
    except ValueError as error:
        return _ignored(handle, f"not JSON: {error}", log)
    why = problem(value)
    return value if why is None else _ignored(handle, why, log)


def read(backend: Any, handle: Any, cursor: dict[str, Any] | None, limit: int, log: Any = None
         ) -> tuple[list[str], dict[str, Any]]:
    """`Backend.log_lines` after ``cursor``; a cursor the backend refuses (``ValueError``: a mark past the end of a
    host's log, or inside a line) is ignored with a warning and the lines are read from the job's first line."""
    try:
        return backend.log_lines(handle, cursor, limit=limit)  # type: ignore[no-any-return]
    except ValueError as error:
        if not cursor:
            raise
        _ignored(handle, str(error), log)
        return backend.log_lines(handle, {}, limit=limit)  # type: ignore[no-any-return]


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
