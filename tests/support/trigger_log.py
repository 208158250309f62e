"""A `JobTrigger` whose log (Airflow's task log in production) is a recorder: each line it writes, info or warning,
goes to ``note`` (by default appended to a list the test reads)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def recorded_trigger(note: Callable[[str], Any]) -> type:
    """A subclass of `JobTrigger` that hands every line it logs to ``note``."""
    from trainops.operators.triggers import JobTrigger

    class Recorder:
        def info(self, message: str, *args: Any) -> None:
            note(message % args)

        warning = info

    class RecordedTrigger(JobTrigger):
        log = property(lambda self: Recorder())

    return RecordedTrigger
