"""Reading an Airflow home's SQLite database while its scheduler and DAG processor write to it.

A read can find the schema still being created, or the database locked past the timeout by a writer under load.
Waits treat that as "not yet" (`rows` answers no rows); an assertion must not, or "no runs" would pass and a
single-row unpacking would fail by chance, so it reads with `answer`, which retries until the database answers.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path


def read(database: Path, sql: str, *parameters: object) -> list[tuple] | None:
    """The rows, or None when the database cannot answer now."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(sql, parameters).fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        connection.close()


def rows(database: Path, sql: str, *parameters: object) -> list[tuple]:
    """For waits: the rows, none while the database cannot answer."""
    return read(database, sql, *parameters) or []


def answer(database: Path, sql: str, *parameters: object, seconds: float = 180) -> list[tuple]:
    """For assertions: the rows, once the database answers (an AssertionError if it never does)."""
    deadline = time.monotonic() + seconds
    while (found := read(database, sql, *parameters)) is None:
        assert time.monotonic() < deadline, f"the database at {database} did not answer {sql!r} in {seconds} s"
        time.sleep(0.5)
    return found


def utc(text: object) -> datetime:
    """A timestamp as SQLite holds Airflow's (naive UTC text), made aware."""
    return datetime.fromisoformat(str(text)).replace(tzinfo=timezone.utc)


def coming_tick_stored(database: Path, dag_id: str) -> bool:
    """Whether the clock is in a quiet second (10-40) and the DAG's stored next run is still ahead.

    The DAG processor stores the next run when it parses the file; a parse before a tick stored that tick, which stays
    due until the next parse. Unpausing at such a moment misses a tick for sure, and the coming one is 20 s away.
    """
    now = datetime.now(timezone.utc)
    found = read(database, "SELECT next_dagrun_create_after FROM dag WHERE dag_id = ?", dag_id)
    return 10 <= now.second <= 40 and bool(found) and found[0][0] is not None and utc(found[0][0]) > now
