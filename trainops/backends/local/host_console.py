"""The console of a local job's hosts: the lines the log pumps show, printed by a thread of its own.

A pump must never wait for the console. If it did, a slow terminal (or a pipe read slowly) would slow the pump, the
pump the ranks' relays, and when the job ends the relays would still hold the ranks' last lines when their host's
launcher stops what is left of the host: those lines would reach neither the console nor the log file. So each pump
writes its log file itself and hands the console its lines here, into a bounded queue that never blocks: when the
console falls behind by `QUEUE_LINES`, the oldest waiting lines are left out (the log file has them, and
`trainops logs` shows them), and when the job ends every source (a host, or a rank of it: the line's ``[algo-N
rank R]`` prefix) whose last lines were among those left out gets them shown after a note saying how many were.

The end of a job waits for the console at most `CLOSE_SECONDS`. A console that is still behind then (a slow
terminal, a pipe read slowly, one nobody reads) does not make the last lines wait behind the backlog: what is still
waiting is left out as above, and the note and each source's last lines are queued in its place, given
`LAST_LINES_SECONDS` more. Before, the whole backlog was dropped at that bound, the last lines of the sources that
ended last with it. A line that arrives after the end (a pump that outlived its bound) is printed at once, never
queued for a printer that has stopped.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable

#: How many lines may wait for the console before the oldest are left out.
QUEUE_LINES = 20_000
#: How many of its last lines each source is guaranteed on the console.
LAST_LINES = 10
#: How long the end of a job waits for the console to print what waits (a console nobody reads never returns).
CLOSE_SECONDS = 120.0
#: How much longer it waits for the note and each source's last lines once the backlog was left out at that bound.
LAST_LINES_SECONDS = 30.0
_SOURCE = re.compile(r"^\[(algo-\d+(?: rank \d+)?)\]")


class HostConsole:
    """Lines for the console, printed in order by one thread (`put` never blocks; `close` at the job's end)."""

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self._waiting: deque[tuple[int, str, str]] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._printer_done = False
        self._number = 0
        self._last: dict[str, deque[tuple[int, str]]] = {}  # source -> its last lines, numbered
        self._shown: dict[str, int] = {}  # source -> the number of its last line printed
        self.left_out = 0
        self.lost = 0  # lines the console refused (closed, broken pipe)
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._print, name="trainops-console", daemon=True)
        self._thread.start()

    def put(self, line: str) -> None:
        """Queue ``line`` for the console (the oldest waiting line is left out when `QUEUE_LINES` wait); after
        `close`, print it at once (the printer has stopped)."""
        found = _SOURCE.match(line)
        source = found.group(1) if found else ""
        with self._changed:
            late = self._printer_done
        if late:
            self._write(line)
            return
        with self._changed:
            self._number += 1
            self._last.setdefault(source, deque(maxlen=LAST_LINES)).append((self._number, line))
            if len(self._waiting) >= QUEUE_LINES:
                self._waiting.popleft()
                self.left_out += 1
            self._waiting.append((self._number, source, line))
            self._changed.notify()

    def _print(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    self._printer_done = True  # under the lock: whoever queues after this prints it instead
                    return
                number, source, line = self._waiting.popleft()
            self._write(line)
            if number:  # 0: a line of the end (`_ending`), already counted
                self._shown[source] = max(number, self._shown.get(source, 0))

    def _write(self, line: str) -> None:
        try:
            self.log(line)
        except Exception as error:  # noqa: BLE001 - a closed console loses lines, never the job
            self.lost += 1
            if len(self.errors) < 5:
                self.errors.append(f"{type(error).__name__}: {error}")

    def close(self, timeout: float | None = None, last_timeout: float | None = None) -> None:
        """Print what waits, then, when lines were left out, each source's last lines that were among them. A
        console still behind after ``timeout`` (`CLOSE_SECONDS`) gets the note and those last lines instead of the
        rest of the backlog (``last_timeout`` more: `LAST_LINES_SECONDS`); what it has still not printed then is
        counted in `lost`."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join(CLOSE_SECONDS if timeout is None else timeout)
        if self._thread.is_alive():
            with self._changed:  # the backlog is left out, the last lines go first
                self.left_out += len(self._waiting)
                self._waiting.clear()
                ending = self._ending()
                if not self._printer_done:
                    self._waiting.extend((0, "", line) for line in ending)
                    self._changed.notify()
                    ending = []
            for line in ending:  # the printer ended meanwhile
                self._write(line)
            self._thread.join(LAST_LINES_SECONDS if last_timeout is None else last_timeout)
            with self._changed:
                self.lost += len(self._waiting)  # the printer prints them if the console takes them before exit
            return
        for line in self._ending():
            self._write(line)

    def _ending(self) -> list[str]:
        """The note and each source's last lines not shown, when lines were left out (none otherwise)."""
        if not self.left_out:
            return []
        shown = dict(self._shown)
        missing = [line for _, line in sorted((number, line) for source, lines in self._last.items()
                                              for number, line in lines if number > shown.get(source, 0))]
        return [f"[trainops] the console could not keep up: {self.left_out} line(s) were not shown here (the "
                "hosts' log files have every line: trainops logs NAME); the last lines of each host and rank that "
                "were among them follow", *missing]
