"""The console of a local job's hosts: the lines the log pumps show, printed by a thread of its own.

A pump must never wait for the console. If it did, a slow terminal (or a pipe read slowly) would slow the pump, the
pump the ranks' relays, and when the job ends the relays would still hold the ranks' last lines when their host's
launcher stops what is left of the host: those lines would reach neither the console nor the log file. So each pump
writes its log file itself and hands the console its lines here, into a bounded queue that never blocks: when the
console falls behind by `QUEUE_LINES`, the oldest waiting lines are left out (the log file has them, and
`trainops logs` shows them), and when the job ends every source (a host, or a rank of it: the line's ``[algo-N
rank R]`` prefix) whose last lines were among those left out gets them shown after a note saying how many were.
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
_SOURCE = re.compile(r"^\[(algo-\d+(?: rank \d+)?)\]")


class HostConsole:
    """Lines for the console, printed in order by one thread (`put` never blocks; `close` at the job's end)."""

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self._waiting: deque[tuple[int, str, str]] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._number = 0
        self._last: dict[str, deque[tuple[int, str]]] = {}  # source -> its last lines, numbered
        self._shown: dict[str, int] = {}  # source -> the number of its last line printed
        self.left_out = 0
        self.lost = 0  # lines the console refused (closed, broken pipe)
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._print, name="trainops-console", daemon=True)
        self._thread.start()

    def put(self, line: str) -> None:
        """Queue ``line`` for the console (the oldest waiting line is left out when `QUEUE_LINES` wait)."""
        found = _SOURCE.match(line)
        source = found.group(1) if found else ""
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
                    return
                number, source, line = self._waiting.popleft()
            self._write(line)
            self._shown[source] = number

    def _write(self, line: str) -> None:
        try:
            self.log(line)
        except Exception as error:  # noqa: BLE001 - a closed console loses lines, never the job
            self.lost += 1
            if len(self.errors) < 5:
                self.errors.append(f"{type(error).__name__}: {error}")

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Print what waits, then, when lines were left out, each source's last lines that were among them."""
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._changed:
                self.lost += len(self._waiting)
                self._waiting.clear()
            return
        if not self.left_out:
            return
        missing = [line for _, line in sorted((number, line) for source, lines in self._last.items()
                                              for number, line in lines if number > self._shown.get(source, 0))]
        self._write(f"[trainops] the console could not keep up: {self.left_out} line(s) were not shown here (the "
                    "hosts' log files have every line: trainops logs NAME); the last lines of each host and rank "
                    "that were among them follow")
        for line in missing:
            self._write(line)
