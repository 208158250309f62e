"""What `trainops kfp run-local` shows while kfp.local runs: each task's start and end with its time, the lines the
steps print themselves (``[prepare]``, ``[trainops]``, ``[algo-1 rank 0] epoch ...``), and the summary; the rest
(each task's executor input and outputs as JSON, kfp's per-task warnings: about 380 lines for the digits pipeline)
goes to a log file the command names at the end.

kfp.local prints everything through Python (its logging handler on ``sys.stdout``, ``print`` of each subprocess's
merged output, ``warnings``), so a stream in place of ``sys.stdout`` and a ``showwarning`` see all of it.
"""

from __future__ import annotations

import io
import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from typing import IO, Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STARTED = re.compile(r"Executing task '?(?P<task>[\w.-]+)'?")
_FINISHED = re.compile(r"Task '?(?P<task>[\w.-]+)'? finished with status (?P<status>[A-Z]+)")
#: kfp's own lines inside a task's streamed output: not the step's.
_KFP_EXECUTOR = "[KFP Executor"
#: A line a step printed with its own prefix: ``[prepare] ...``, ``[algo-1 rank 0] ...``, ``[trainops] ...``.
_STEP_LINE = re.compile(r"^\[[A-Za-z][\w .-]*\] ")


class SummaryStream(io.TextIOBase):
    """A text stream that keeps every line in ``log`` and passes the lines a person follows to ``console``."""

    def __init__(self, log: IO[str], console: IO[str]):
        super().__init__()
        self.log, self.console = log, console
        self._partial = ""
        self._started: dict[str, float] = {}

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.log.write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            shown = self.shown(_ANSI.sub("", line))
            if shown is not None:
                self.console.write(shown + "\n")
                self.console.flush()
        return len(text)

    def flush(self) -> None:
        self.log.flush()
        self.console.flush()

    def shown(self, line: str) -> str | None:
        """The line as the console shows it, or None for a line only the log keeps."""
        started = _STARTED.search(line)
        if started and " - INFO - " in line:
            self._started[started.group("task")] = time.monotonic()
            return f"[kfp] {started.group('task')}: running"
        finished = _FINISHED.search(line)
        if finished and " - INFO - " in line:
            task = finished.group("task")
            seconds = time.monotonic() - self._started.get(task, time.monotonic())
            return f"[kfp] {task}: {finished.group('status')} after {seconds:.0f} s"
        text = line.strip()
        if text.startswith("[kfp]"):
            return line
        if _STEP_LINE.match(text) and not text.startswith(_KFP_EXECUTOR):
            return "  " + text  # a step's own line (its prefix names the step, host and rank)
        return None


@contextmanager
def summarized(log: IO[str], console: IO[str]) -> Iterator[SummaryStream]:
    """While the block runs, ``sys.stdout`` is a `SummaryStream` and warnings go to the log only."""
    stream = SummaryStream(log, console)

    def to_log(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
               line: str | None = None) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings(), redirect_stdout(stream):
        warnings.showwarning = to_log
        try:
            yield stream
        finally:
            stream.write("\n" if stream._partial else "")
            stream.flush()
