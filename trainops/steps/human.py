"""A job's record as a person reads it: times as dates, durations in seconds or minutes, lists as lists.

`trainops status` prints these lines and the HTML report shows the same rows; ``--json`` keeps the machine form
(epoch seconds, lists, nested objects). The rules look at a value's key and type only, never at a backend's name, so
a new backend's record reads as well as the built-in ones'.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

#: Keys whose number is a moment (epoch seconds), beside any ending in ``_time`` / ``_at``.
MOMENT_KEYS = frozenset({"started", "ended", "created", "start", "end", "last_modified", "stopped"})
#: Epoch seconds between 2001 and 2286: a number outside is not read as a moment.
_EPOCH = (1e9, 1e10)
#: A list item of at most this many fields reads as its values (``job-1 Completed``); more are named (``rank=0``).
ITEM_VALUES_ONLY = 3
#: Nested records deeper than this are shown as one line.
MAX_DEPTH = 3


def is_moment(key: str, value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and _EPOCH[0] <= value < _EPOCH[1]
            and (key in MOMENT_KEYS or key.endswith(("_time", "_at", "_started", "_ended"))))


def moment(seconds: float) -> str:
    """Epoch seconds as this machine's local time, with its zone (``2026-12-07 03:12:05 UTC``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


def duration(seconds: float) -> str:
    """``42.0 s``, ``3 min 12 s``, ``2 h 05 min``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 120:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def scalar(key: str, value: Any) -> str:
    """One value as text."""
    if is_moment(key, value):
        return moment(float(value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and key.endswith("_seconds"):
        return duration(float(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _one_line(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key}={_one_line(item)}" for key, item in value.items() if not _empty(item))
    if isinstance(value, (list, tuple)):
        return ", ".join(_one_line(item) for item in value)
    return scalar("", value)


def _value(key: str, value: Any) -> str:
    return _one_line(value) if isinstance(value, (Mapping, list, tuple)) else scalar(key, value)


def _item(value: Any) -> str:
    """A list item: a record as its values (``job-1 Completed``), a scalar as itself."""
    if isinstance(value, Mapping):
        shown = {str(key): _value(str(key), item) for key, item in value.items() if not _empty(item)}
        if len(shown) > ITEM_VALUES_ONLY:  # many fields: each named
            return " ".join(f"{key}={text}" for key, text in shown.items())
        return " ".join(shown.values())
    return _one_line(value)


def lines(record: Mapping[str, Any], indent: str = "", depth: int = 0) -> list[str]:
    """``key: value`` lines of ``record``, empty values left out; a list of scalars on one line, a list of
    records one ``- `` line each, a nested record indented below its key."""
    out: list[str] = []
    for key, value in record.items():
        if _empty(value):
            continue
        if isinstance(value, Mapping):
            if depth >= MAX_DEPTH:
                out.append(f"{indent}{key}: {_one_line(value)}")
            else:
                out.append(f"{indent}{key}:")
                out.extend(lines(value, indent + "  ", depth + 1))
        elif isinstance(value, (list, tuple)):
            if any(isinstance(item, (Mapping, list, tuple)) for item in value):
                out.append(f"{indent}{key}:")
                out.extend(f"{indent}  - {_item(item)}" for item in value)
            else:
                out.append(f"{indent}{key}: {', '.join(scalar(str(key), item) for item in value)}")
        else:
            out.append(f"{indent}{key}: {scalar(str(key), value)}")
    return out


def rows(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, value as text) of the record's top level, for a table: nested values on one line."""
    found = []
    for key, value in record.items():
        if _empty(value):
            continue
        if isinstance(value, Mapping) or (isinstance(value, (list, tuple))
                                          and any(isinstance(item, Mapping) for item in value)):
            text = "; ".join(_item(item) for item in value) if isinstance(value, (list, tuple)) else _one_line(value)
        elif isinstance(value, (list, tuple)):
            text = ", ".join(scalar(str(key), item) for item in value)
        else:
            text = scalar(str(key), value)
        found.append((str(key), text))
    return found
