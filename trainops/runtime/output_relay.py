"""A rank's output relay: stderr (and, with a line prefix, stdout) pass through a pipe to a small forked process
that copies them to where they pointed before, prefixes each line when asked, and appends stderr to a bounded tail
file.

A separate process, not a thread, because the tail must survive the rank: when a rank is killed by SIGKILL the
kernel still holds what it wrote last in the pipe, and the relay, still alive, drains it to the tail file and the
log before it sees end-of-file and exits. It ignores SIGTERM / SIGINT (a teardown signal to the rank's process group
must not cut the last lines off) and is forked before the user's script starts, while the rank has a single thread.

Secrets: the values of the environment variables named in ``TRAINOPS_MASK_VARIABLES`` (comma-separated; the local
backend names the job's secret-looking ``environment`` entries) are replaced by ``****`` in everything the relay
writes, the log and the tail alike, so a script that prints its token, or fails with it in its exception message,
does not put it in the logs or the failure file. The value still reaches the script's environment untouched. Masking
works line by line (a partial line is held back up to 0.2 s); values shorter than 4 characters are not masked, they
would garble every line.

Standard library only.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Mapping

from trainops.runtime import records
from trainops.runtime.untrusted import read_tail_bytes

#: The tail file is in the host's record directory, which every rank of the host can write: it is never opened
#: through a link, nor blocking on a FIFO left there (no reader: ENXIO, and the tail is given up, not the output).
TAIL_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _write_tail(path: str, data: bytes, how: int) -> None:
    descriptor = os.open(path, TAIL_FLAGS | how, 0o666)  # as open(path, 'ab') made it
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)


#: How long a partial line is held back waiting for its end, so lines of different ranks do not interleave.
PARTIAL_LINE_SECONDS = 0.2
#: A partial line longer than this is written without waiting for its end (all but a secret's length of it).
PARTIAL_LINE_BYTES = 64 * 1024

MASK_VARIABLES = "TRAINOPS_MASK_VARIABLES"
MASK = "****"
MIN_SECRET_LENGTH = 4


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask: those of the variables named in ``TRAINOPS_MASK_VARIABLES``, longest first (a secret
    that contains another is masked whole)."""
    source: Mapping[str, str] = os.environ if environ is None else environ
    names = [name.strip() for name in source.get(MASK_VARIABLES, "").split(",") if name.strip()]
    values = {source[name] for name in names if len(source.get(name) or "") >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def mask(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every secret value replaced by ``****`` (``secrets`` default: :func:`secret_values`)."""
    for secret in secret_values() if secrets is None else secrets:
        text = text.replace(secret, MASK)
    return text


def _whole_lines(data: bytes, limit: int = select.PIPE_BUF) -> list[bytes]:
    """``data`` in pieces of whole lines of at most ``limit`` bytes each (a longer line is a piece of its own)."""
    pieces, start = [], 0
    while len(data) - start > limit:
        cut = max(data.rfind(b"\n", start, start + limit), data.rfind(b"\r", start, start + limit)) + 1
        if cut <= start:  # one line longer than the limit: up to its end
            ends = [found for found in (data.find(b"\n", start + limit), data.find(b"\r", start + limit))
                    if found >= 0]
            cut = min(ends) + 1 if ends else len(data)
        pieces.append(data[start:cut])
        start = cut
    if start < len(data):
        pieces.append(data[start:])
    return pieces


def _mask_bytes(data: bytes, secrets: list[bytes]) -> bytes:
    for secret in secrets:
        data = data.replace(secret, MASK.encode())
    return data


class _Stream:
    """One relayed descriptor: where its bytes go, its prefix, and (for stderr) its tail file."""

    def __init__(self, read_end: int, destination: int, prefix: bytes, tail_file: str | None,
                 secrets: list[bytes] | None = None):
        self.read_end = read_end
        self.destination = destination
        self.prefix = prefix
        self.tail_file = tail_file
        self.secrets = secrets or []
        self.tail_size = 0
        self.lost_bytes = 0
        self.failure = ""
        self.pending = b""
        self.at_line_start = True
        self.pending_since = 0.0

    def prefixed(self, data: bytes) -> bytes:
        if not self.prefix:
            return data
        pieces = []
        for line in data.splitlines(keepends=True):
            if self.at_line_start:
                pieces.append(self.prefix)
            pieces.append(line)
            self.at_line_start = line.endswith((b"\n", b"\r"))
        return b"".join(pieces)

    def write(self, data: bytes) -> None:
        """Write whole lines in pieces of at most PIPE_BUF bytes: every rank's relay writes into the same pipe, and
        the kernel keeps only such writes whole, so lines of different ranks never cut into each other under a
        flood (a longer write is split wherever the pipe has room). A line longer than that goes alone."""
        data = self.prefixed(data)
        try:
            for piece in _whole_lines(data):
                while piece:
                    piece = piece[os.write(self.destination, piece):]
        except OSError:
            pass

    def append_tail(self, chunk: bytes) -> None:
        if not self.tail_file:
            return
        try:
            _write_tail(self.tail_file, chunk, os.O_APPEND)
            self.tail_size += len(chunk)
            if self.tail_size > records.TAIL_LIMIT_BYTES:
                kept = read_tail_bytes(self.tail_file, records.TAIL_KEEP_BYTES)
                _write_tail(self.tail_file, kept, os.O_TRUNC)
                self.tail_size = len(kept)
        except OSError:
            self.tail_file = None  # a full disk (or a FIFO, a link left there) must not stop the rank's output

    def take(self, chunk: bytes) -> None:
        data = self.pending + chunk
        if self.prefix or self.secrets:
            # Whole lines only: a prefix belongs at a line's start, a secret may arrive split across reads.
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if cut == 0 and len(data) > PARTIAL_LINE_BYTES:
                # Masked first, then cut before the last (longest secret - 1) bytes: any secret that begins before
                # the cut is whole and masked; the start of one that continues in the next read is kept back.
                data = _mask_bytes(data, self.secrets)
                cut = len(data) - max((len(secret) for secret in self.secrets), default=1) + 1
            if cut < len(data) and not self.pending:
                self.pending_since = time.monotonic()
            self.pending = data[cut:]
            data = data[:cut]
        if data:
            self.emit(data)

    def emit(self, data: bytes) -> None:
        """Mask, then write to the destination (prefixed) and to the tail (as the rank wrote it)."""
        data = _mask_bytes(data, self.secrets)
        self.append_tail(data)
        self.write(data)

    def flush_pending(self) -> None:
        if self.pending:
            self.emit(self.pending)
            self.pending = b""


def _guarded(stream: _Stream, action, *arguments) -> None:
    """Run one step of the relay; an exception (a MemoryError) loses that output, never the relay: were the relay
    to exit, the rank's next write to its pipe would kill it with SIGPIPE."""
    try:
        action(*arguments)
    except Exception as error:  # noqa: BLE001
        stream.lost_bytes += len(stream.pending) + sum(len(argument) for argument in arguments
                                                      if isinstance(argument, bytes))
        stream.pending = b""
        stream.failure = stream.failure or f"{type(error).__name__}: {error}"


def _report_losses(streams: list[_Stream]) -> None:
    for stream in streams:
        if stream.lost_bytes:
            note = (f"[trainops relay] {stream.lost_bytes} bytes of this rank's output were lost "
                    f"({stream.failure})\n").encode()
            try:
                os.write(stream.destination, note)
            except OSError:
                pass


def _relay_loop(streams: list[_Stream]) -> None:
    open_streams = {stream.read_end: stream for stream in streams}
    while open_streams:
        waiting = [s for s in open_streams.values() if s.pending]
        timeout = None
        if waiting:
            oldest = min(s.pending_since for s in waiting)
            timeout = max(0.0, oldest + PARTIAL_LINE_SECONDS - time.monotonic())
        ready, _, _ = select.select(list(open_streams), [], [], timeout)
        if not ready:
            for stream in waiting:
                _guarded(stream, stream.flush_pending)
            continue
        for descriptor in ready:
            stream = open_streams[descriptor]
            try:
                chunk = os.read(descriptor, 65536)
            except OSError:
                chunk = b""
            if chunk:
                _guarded(stream, stream.take, chunk)
            else:
                _guarded(stream, stream.flush_pending)
                os.close(descriptor)
                del open_streams[descriptor]
    _report_losses(streams)


class OutputRelay:
    """Started with :meth:`start` before the user's script runs; :meth:`stop` puts the descriptors back and waits
    (bounded) for the relay to drain."""

    def __init__(self, prefix: bytes = b"", tail_file: str | None = None, relay_stdout: bool = False):
        self.prefix = prefix
        self.tail_file = tail_file
        # With secrets to mask, stdout goes through the relay too, prefix or not.
        self.descriptors = (1, 2) if relay_stdout or secret_values() else (2,)
        self.saved: dict[int, int] = {}
        self.pid = 0

    def start(self) -> None:
        """Fork the relay and move the descriptors onto its pipes."""
        pipes = {fd: os.pipe() for fd in self.descriptors}
        self.saved = {fd: os.dup(fd) for fd in self.descriptors}
        secrets = [secret.encode("utf-8", "surrogateescape") for secret in secret_values()]
        pid = os.fork()
        if pid == 0:  # the relay
            try:
                for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_IGN)
                streams = []
                for fd, (read_end, write_end) in pipes.items():
                    os.close(write_end)
                    streams.append(_Stream(read_end, self.saved[fd], self.prefix,
                                           self.tail_file if fd == 2 else None, secrets))
                _relay_loop(streams)
            finally:
                os._exit(0)
        self.pid = pid
        for fd, (read_end, write_end) in pipes.items():
            os.close(read_end)
            os.dup2(write_end, fd)
            os.close(write_end)

    @property
    def destination(self) -> int:
        """The descriptor stderr pointed at before the relay (for output that must bypass it)."""
        return self.saved.get(2, 2)

    def stop(self, timeout: float = 2.0) -> None:
        """Put stdout/stderr back and wait up to ``timeout`` seconds for the relay to finish. Children of the rank
        that still hold the pipe (a DataLoader worker) keep the relay alive until they end."""
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self.saved = {}
        deadline = time.monotonic() + timeout
        while self.pid and time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            time.sleep(0.01)
