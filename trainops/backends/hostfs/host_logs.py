"""The hosts' log files of a job (``<job dir>/logs/algo-N.log``), read as `trainops logs` and a poller show them:
each line prefixed with its host (the runtime already prefixes a rank's lines with host and rank), its control
characters escaped. The local backend's hosts and the slurm backend's nodes write the same files.
"""

from __future__ import annotations

import os
import re
from typing import BinaryIO

from trainops.backends.hostfs import paths
from trainops.backends.hostfs.safe_fs import open_regular

# What a terminal obeys rather than shows: C0 controls but tab, DEL, C1 (U+0080-U+009F: \x9b is a CSI on its own),
# and the Unicode line separators and direction overrides that reorder what is shown.
CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` for a terminal: every control character written as its escape (``\\x1b``, ``\\u202e``), so a
    rank can neither retitle the window, set the clipboard (OSC 52), move the cursor nor forge trainops' own lines
    on the console or in ``trainops logs``; the log file keeps the bytes as written."""
    return CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}" if ord(found.group()) < 0x100
                        else f"\\u{ord(found.group()):04x}", text)


def shown(host: str, line: str) -> str:
    """A log line as shown: prefixed with its host, its control characters escaped (`printable`)."""
    line = printable(line.rstrip("\r"))
    return line if line.startswith("[algo-") else f"[{host}] {line}"


def read_new_lines(job_name: str, workdir: str | os.PathLike | None, cursor: dict[str, int] | None,
                   limit: int) -> tuple[list[str], dict[str, int]]:
    """At most ``limit`` complete log lines written after ``cursor`` (host -> byte offset; None: from the start),
    each prefixed with its host, and the cursor after them (JSON). A poller (the Airflow trigger) calls it again and
    again; a line still being written is left for the next call.

    A cursor may come from outside (an Airflow Variable anyone with access can set): an offset that is not a whole
    number >= 0, lies past the end of its host's log or inside a line is refused with `ValueError` naming the host,
    never read from (past the end, it would hide every later line)."""
    logs_dir = paths.job_dir(job_name, workdir) / "logs"
    cursor = dict(cursor or {})
    lines: list[str] = []
    for path in sorted(logs_dir.glob("algo-*.log")) if logs_dir.is_dir() else []:
        if len(lines) >= limit:
            break
        try:
            descriptor = open_regular(path)
        except OSError:
            continue  # not a log file trainops wrote (a FIFO, a link): nothing of it is read
        with open(descriptor, "rb") as handle:
            handle.seek(_line_start(handle, path.stem, cursor.get(path.stem, 0)))
            while len(lines) < limit:
                raw = handle.readline()
                if not raw.endswith(b"\n"):
                    break
                cursor[path.stem] = handle.tell()
                lines.append(shown(path.stem, raw.decode("utf-8", "replace").rstrip("\n")))
    return lines, cursor


def _line_start(handle: BinaryIO, host: str, offset: object) -> int:
    """``offset`` when it is where a line of ``host``'s log starts (0, or just after a newline); else `ValueError`."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"the log cursor of {host} is {offset!r}, not a byte offset")
    if offset == 0:
        return 0
    size = os.fstat(handle.fileno()).st_size
    if offset > size:
        raise ValueError(f"the log cursor of {host} is byte {offset}, past the end of its log ({size} bytes)")
    handle.seek(offset - 1)
    if handle.read(1) != b"\n":
        raise ValueError(f"the log cursor of {host} is byte {offset}, inside a line of its log")
    return offset
