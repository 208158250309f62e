"""A stand-in for `trainops.backends.hostfs.stage_sources.copy_descriptor` that fails on purpose, for the staging
tests of crashes, deaths and interruptions: on its ``at``-th call it writes half a file, then does what the test
asks (raise, kill itself, signal its process group, sleep); every other call copies normally. Tests that run
staging in a subprocess import it there too."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from trainops.backends.hostfs import stage_sources


def raising(message: str) -> Callable[[], None]:
    def fail() -> None:
        raise RuntimeError(message)
    return fail


def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def interrupted() -> None:
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group; the copy then goes on."""
    os.killpg(0, signal.SIGINT)


def stalled(seconds: float = 60) -> Callable[[], None]:
    return lambda: time.sleep(seconds)


def failing_copy(at: int, then: Callable[[], None], *, half: bool = True, from_then_on: bool = False
                 ) -> Callable[..., int]:
    """The stand-in: at call ``at`` (and every later one when ``from_then_on``) write half a file (unless not
    ``half``) and call ``then``."""
    original = stage_sources.copy_descriptor
    calls = [0]

    def copy(source_descriptor: int, target: int, size: int) -> int:
        calls[0] += 1
        if calls[0] == at or (from_then_on and calls[0] > at):
            if half:
                os.write(target, b"half")
            then()
        return original(source_descriptor, target, size)

    return copy


def install(copy: Callable[..., int]) -> None:
    """Put ``copy`` in place of the real one (for a subprocess script; tests use monkeypatch)."""
    stage_sources.copy_descriptor = copy
