"""Free rendezvous ports that concurrent local jobs never share.

Binding port 0 and closing leaves a window in which another job can pick the same number. Each job instead holds
an exclusive lock file for its port for as long as it runs (`trainops.backends.local.locks`), so trainops jobs on
this machine never clash; the bind test on top keeps clear of ports other programs use.
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
from pathlib import Path

from trainops.backends.local.locks import HeldLock, try_lock

PORT_RANGE = (20000, 40000)


class PortReservation:
    """A TCP port on 127.0.0.1 reserved for one job until `release()` (or the process exits)."""

    def __init__(self, port: int, lock: HeldLock):
        self.port = port
        self._lock = lock

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> "PortReservation":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _locks_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"trainops-ports-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def reserve_port(attempts: int = 200) -> PortReservation:
    """Reserve a free port: lock-file first (no other trainops job gets it), then check that it can be bound."""
    locks = _locks_dir()
    generator = random.SystemRandom()
    for _ in range(attempts):
        port = generator.randrange(*PORT_RANGE)
        lock = try_lock(locks / f"{port}.lock", f"pid {os.getpid()}")
        if lock is None:
            continue
        if _bindable(port):
            return PortReservation(port, lock)
        lock.release()
    raise RuntimeError(f"no free TCP port found on 127.0.0.1 in {PORT_RANGE} after {attempts} attempts")
