"""Free rendezvous ports that concurrent local jobs never share.

Binding port 0 and closing leaves a window in which another job can pick the same number. Each job instead holds
an exclusive lock file for its port for as long as it runs, so trainops jobs on this machine never clash; the bind
test on top keeps clear of ports other programs use.

The lock files live in ``$TMPDIR/trainops-ports-<uid>``, a shared place where another user may have created that
name first (with links to files the victim can write: root's run would truncate them). The directory is therefore
created ``0700`` and then checked through a descriptor opened without following a link: it must be a directory,
owned by this user, with no access for group or others; anything else is refused with a message saying what to do.
Lock files are opened relative to that descriptor with ``O_NOFOLLOW`` and must be plain files of this user.

A job may need a block of ports (TensorFlow's parameter servers listen on the rendezvous port's neighbours), so a
reservation locks and bind-tests every port of a contiguous block. The range stays below the kernel's ephemeral
range (``ip_local_port_range``): any outgoing connection on the machine takes its source port from there, and a
port reserved inside it could be taken by one between the reservation and the server's bind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import stat
import tempfile
from pathlib import Path

from trainops.backends.hostfs.locks import HeldLock
from trainops.errors import JobFailed

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def _below_ephemeral(low: int = 20000, high: int = 40000) -> tuple[int, int]:
    """``(low, high)`` cut to end where the ephemeral range starts (when that leaves a range of 4,096 ports at
    least; a machine whose ephemeral range starts lower keeps the whole range and relies on the bind test)."""
    try:
        first = int(Path(EPHEMERAL_RANGE_FILE).read_text().split()[0])  # the kernel's (procfs), no job's
    except (OSError, ValueError, IndexError):
        return low, high
    return (low, min(high, first)) if first - low >= 4096 else (low, high)


PORT_RANGE = _below_ephemeral()


class PortReservation:
    """A block of TCP ports on 127.0.0.1, ``port`` to ``port + count - 1``, reserved for one job until `release()`
    (or the process exits)."""

    def __init__(self, port: int, locks: list[HeldLock]):
        self.port = port
        self.count = len(locks)
        self._locks = locks

    def release(self) -> None:
        for lock in self._locks:
            lock.release()

    def __enter__(self) -> PortReservation:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _locks_dir() -> Path:
    """The lock directory, created and checked (`open_locks_dir`)."""
    os.close(open_locks_dir())
    return Path(tempfile.gettempdir()) / f"trainops-ports-{os.getuid()}"


def _refuse(path: Path, why: str) -> JobFailed:
    return JobFailed(f"the port lock directory {path} {why}; another user may have created it to make trainops write "
                     f"through it. Remove it (check what it holds first) or set TMPDIR to a directory only you can "
                     f"write, then run again")


def open_locks_dir() -> int:
    """Create (``0700``) or open the port lock directory and return a descriptor of it, after checking that it is
    a real directory of this user that nobody else can use; raises `JobFailed` otherwise."""
    parent_path = Path(tempfile.gettempdir())
    name = f"trainops-ports-{os.getuid()}"
    path = parent_path / name
    parent = os.open(parent_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
        except FileExistsError:
            pass
        try:
            descriptor = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(path, "is a symbolic link or not a directory") from None
            raise
    finally:
        os.close(parent)
    details = os.fstat(descriptor)
    problem = None
    if details.st_uid != os.geteuid():
        problem = f"belongs to uid {details.st_uid}, not to you (uid {os.geteuid()})"
    elif stat.S_IMODE(details.st_mode) & 0o077:
        problem = f"has mode {stat.S_IMODE(details.st_mode):04o}; it must be 0700 (only you may use it)"
    if problem:
        os.close(descriptor)
        raise _refuse(path, problem)
    return descriptor


def _try_port_lock(directory: int, port: int, path: Path) -> HeldLock | None:
    """Lock ``<port>.lock`` in the open lock directory without waiting; None when another job holds it."""
    name = f"{port}.lock"
    try:
        descriptor = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600,
                             dir_fd=directory)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse(path, f"holds a symbolic link {name}") from None
        raise
    details = os.fstat(descriptor)
    if not stat.S_ISREG(details.st_mode) or details.st_uid != os.geteuid() or details.st_nlink != 1:
        os.close(descriptor)
        raise _refuse(path, f"holds {name}, which is not a plain file of yours")
    handle = os.fdopen(descriptor, "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return HeldLock(path / name, handle)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _reserve_block(directory: int, path: Path, base: int, count: int) -> list[HeldLock] | None:
    """Lock and bind-test ``base`` .. ``base + count - 1``; None (nothing held) when any is taken."""
    held: list[HeldLock] = []
    for port in range(base, base + count):
        lock = _try_port_lock(directory, port, path)
        if lock is not None:
            held.append(lock)
        if lock is None or not _bindable(port):
            for taken in held:
                taken.release()
            return None
    return held


def reserve_port(attempts: int = 200, count: int = 1) -> PortReservation:
    """Reserve ``count`` consecutive free ports: each lock file first (no other trainops job gets it), then a bind
    test (no other program holds it)."""
    if count < 1:
        raise ValueError(f"count must be at least 1, not {count}")
    low, high = PORT_RANGE
    if high - low < count:
        raise RuntimeError(f"the port range {PORT_RANGE} is smaller than the {count} ports a job needs")
    directory = open_locks_dir()
    path = Path(tempfile.gettempdir()) / f"trainops-ports-{os.getuid()}"
    generator = random.SystemRandom()
    try:
        for _ in range(attempts):
            base = generator.randrange(low, high - count + 1)
            held = _reserve_block(directory, path, base, count)
            if held is not None:
                return PortReservation(base, held)
    finally:
        os.close(directory)
    raise RuntimeError(f"no {count} free consecutive TCP ports found on 127.0.0.1 in {PORT_RANGE} after {attempts} "
                       f"attempts")
