"""The controller's log pump: one per host, it drains the launcher's output into the host's log file and the
console, and it never stops doing so.

If the pump stopped reading, the pipe would fill, every rank writing to it would block, and the job would "run"
until max_run. So:

- the pipe is read in bounded chunks (64 KiB), never by line: a rank that prints 300 MB without a newline costs a
  buffer of about 128 KiB, not 300 MB. A line longer than 64 KiB is cut there and each piece but the last ends with
  `LINE_SPLIT_MARK` (cut on a UTF-8 character boundary and never inside a secret, which would escape masking);
- a `\\r` ends a line too (tqdm's progress bars): the log file keeps the `\\r` as written, the console gets the
  newest state at most once a second while the bar moves, and the last one when it stops;
- a failure to write (a full disk, a `MemoryError`, a closed console) loses that output, not the pump: it goes on
  draining, counts what it could not write, and says so when the job ends (`LogPump.summary`).
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from trainops.backends.hostfs.host_logs import printable
from trainops.backends.hostfs.safe_fs import open_state_file
from trainops.backends.local.secrets import mask

READ_BYTES = 64 * 1024
LINE_LIMIT = 64 * 1024
LINE_SPLIT_MARK = " [trainops: line longer than 64 KiB, continued on the next line]"
PROGRESS_SECONDS = 1.0
#: Lines of a host's output the pump keeps in memory: the failure's evidence when the host could not write its own
#: (a full disk loses the rank's stderr tail, not the controller's view of it).
RECENT_LINES = 12
EMPTY = re.compile(r"^\s*(\[algo-\d+( rank \d+)?\]\s*)?$")
class LogPump:
    """Drain one host's output (`run` is a thread's target); the counters are read once it has ended."""

    def __init__(self, host: str, descriptor: int, log_file: Path, *, secrets: list[str],
                 log: Callable[[str], None], log_lock: threading.Lock):
        self.host = host
        self.descriptor = descriptor
        self.log_file = log_file
        self.secrets = secrets
        self.encoded_secrets = [secret.encode("utf-8", "surrogateescape") for secret in secrets]
        self.hold = max((len(secret) for secret in self.encoded_secrets), default=1) - 1
        self.log = log
        self.log_lock = log_lock
        self.lines = 0
        self.lines_split = 0
        self.lost_lines = 0
        self.lost_bytes = 0
        self.console_lost = 0
        self.errors: list[str] = []
        self._sink: int | None = None
        self._out = bytearray()
        self._out_lines = 0
        self._progress: str | None = None
        self._progress_shown = 0.0
        self._partial_shown = b""
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)  # the last complete lines as shown (masked)

    # --- the loop ---
    def run(self) -> None:
        self._open_sink()
        buffer = b""
        while True:
            try:
                waiting = self._progress is not None or (buffer and buffer != self._partial_shown)
                ready, _, _ = select.select([self.descriptor], [], [], PROGRESS_SECONDS if waiting else None)
                if not ready:  # quiet for a second: show what is held back
                    buffer = self._drain(buffer, final=False, settle=True)
                    self._show_progress(force=True)
                    self._show_partial(buffer)
                    self._flush()
                    continue
                chunk = os.read(self.descriptor, READ_BYTES)
            except InterruptedError:
                continue
            except Exception as error:  # noqa: BLE001 - the pipe itself failed: nothing more can be read
                self._note(error)
                break
            if not chunk:
                break
            try:
                buffer = self._drain(buffer + chunk, final=False)
                self._flush()
            except Exception as error:  # noqa: BLE001 - a MemoryError or worse: lose this output, keep draining
                self._note(error)
                self.lost_bytes += len(buffer) + len(chunk)
                self.lost_lines += 1
                buffer = b""
        try:
            self._drain(buffer, final=True)
            self._show_progress(force=True)
            self._flush()
        except Exception as error:  # noqa: BLE001
            self._note(error)
        if self._sink is not None:
            try:
                os.close(self._sink)
            except OSError:
                pass

    def _drain(self, data: bytes, *, final: bool, settle: bool = False) -> bytes:
        """Emit every complete line of `data` (and, when `final`, the rest); returns what waits for more. With
        `settle` (the pipe has been quiet), a `\r` at the very end ends a line too."""
        start = 0
        newline = carriage = -1  # the next of each at or after `start`, searched again only once passed
        while True:
            if newline < start:
                newline = data.find(b"\n", start)
                newline = len(data) if newline < 0 else newline
            if carriage < start:
                carriage = data.find(b"\r", start)
                carriage = len(data) if carriage < 0 else carriage
            end = min(newline, carriage)
            end = -1 if end == len(data) else end
            if end >= 0 and end - start <= LINE_LIMIT:
                if data[end:end + 1] == b"\r":
                    if end + 1 == len(data) and not (final or settle):
                        return data[start:]  # a \r\n may be split across reads: wait for the next byte
                    if data[end + 1:end + 2] == b"\n":
                        self._line(data[start:end], "\n")
                        start = end + 2
                        continue
                    self._line(data[start:end], "\r")
                else:
                    self._line(data[start:end], "\n")
                start = end + 1
                continue
            if len(data) - start > LINE_LIMIT + self.hold or (end >= 0 and end - start > LINE_LIMIT):
                cut = self._cut(data, start)
                self._line(data[start:cut], "split")
                start = cut
                continue
            if final and start < len(data):
                self._line(data[start:], "\n")
                return b""
            return data[start:]

    def _cut(self, data: bytes, start: int) -> int:
        cut = start + LINE_LIMIT
        for secret in self.encoded_secrets:  # never inside a secret: both halves would escape the mask
            found = data.find(secret, max(start, cut - len(secret) + 1), cut + len(secret) - 1)
            if start < found < cut:
                cut = found
        while cut > start + 1 and (data[cut] & 0xC0) == 0x80:  # not inside a UTF-8 character either
            cut -= 1
        return cut

    # --- one line out ---
    def _line(self, raw: bytes, end: str) -> None:
        # Masked here too: the launcher's and torchrun's own lines do not pass the ranks' relays.
        text = mask(raw.decode("utf-8", errors="replace"), self.secrets)
        self.lines += 1
        if end == "split":
            self.lines_split += 1
            text += LINE_SPLIT_MARK
        self._out += (text + ("\r" if end == "\r" else "\n")).encode("utf-8", "surrogateescape")
        self._out_lines += 1
        if len(self._out) >= READ_BYTES:
            self._flush()
        shown = text if text.startswith("[algo-") else f"[{self.host}] {text}"
        if end == "\r":
            if not EMPTY.match(text):  # the \r that only starts the next state of a bar shows nothing
                self._progress = shown
            self._show_progress(force=False)
            return
        self._progress = None  # the line that ends a progress bar shows its final state
        self.recent.append(shown)  # only a failure reads them (`recent_lines`): no work per line beyond this
        self._show(shown)

    def recent_lines(self) -> list[str]:
        """The host's last non-empty lines, printable (for a failure reason)."""
        return [printable(line) for line in self.recent if not EMPTY.match(line)]

    def _show_progress(self, *, force: bool) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if force or now - self._progress_shown >= PROGRESS_SECONDS:
            self._progress_shown = now
            shown, self._progress = self._progress, None
            self._show(shown)

    def _show_partial(self, buffer: bytes) -> None:
        """The console sees the newest state of a line still being written (tqdm writes `\\r` + state), all but
        a secret's length of its end (the rest of a secret may be in the next read)."""
        if not buffer or buffer == self._partial_shown:
            return
        self._partial_shown = buffer
        visible = buffer[:len(buffer) - self.hold] if self.hold else buffer
        text = mask(visible.decode("utf-8", errors="replace"), self.secrets)
        if not EMPTY.match(text):
            self._show(text if text.startswith("[algo-") else f"[{self.host}] {text}")

    def _show(self, shown: str) -> None:
        try:
            with self.log_lock:
                self.log(printable(shown))
        except Exception as error:  # noqa: BLE001 - a closed console loses lines, never the job
            self.console_lost += 1
            self._note(error)

    # --- the log file ---
    def _open_sink(self) -> None:
        try:
            # Never through a link planted under the log's name: the output is then counted lost, and said.
            self._sink = open_state_file(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as error:
            self._note(error)

    def _flush(self) -> None:
        if not self._out:
            return
        data, lines = bytes(self._out), self._out_lines
        self._out.clear()
        self._out_lines = 0
        if self._sink is None:
            self._open_sink()  # the disk may have room again
            if self._sink is None:
                self.lost_lines += lines
                self.lost_bytes += len(data)
                return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._sink, view):]
        except OSError as error:
            self._note(error)
            self.lost_bytes += len(view)
            self.lost_lines += max(1, bytes(view).count(b"\n"))

    def _note(self, error: BaseException) -> None:
        text = f"{type(error).__name__}: {error}"
        if text not in self.errors and len(self.errors) < 5:
            self.errors.append(text)

    # --- the end ---
    def summary(self) -> str | None:
        """A line for the console and the record when anything was lost; None when nothing was."""
        if not (self.lost_lines or self.console_lost):
            return None
        parts = []
        if self.lost_lines:
            parts.append(f"{self.lost_lines} line(s) ({self.lost_bytes} bytes) could not be written to "
                         f"{self.log_file}")
        if self.console_lost:
            parts.append(f"{self.console_lost} line(s) could not be shown")
        return f"host {self.host}: " + " and ".join(parts) + f" ({'; '.join(self.errors)})"
