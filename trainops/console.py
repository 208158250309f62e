"""Where trainops' own messages go: stdlib `logging`, under the ``trainops`` logger and its children.

Library code logs (``logging.getLogger(__name__)``) and never prints; whoever runs it decides where the messages go.
Airflow's task handler takes them into the task log, the KFP executor configures the root logger for the pod's log,
and the `trainops` command attaches `attach_console`, which prints them as plain lines on standard output, in order
with the job's own output (the hosts' lines, which are the job's data and reach the caller through its ``log``
callback).
"""

from __future__ import annotations

import logging
import os
import sys

_MARK = "_trainops_console"


class _CurrentStdout(logging.Handler):
    """Writes each record to the ``sys.stdout`` of the moment (a test's captured stream, a redirected one)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            reader_gone()
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def reader_gone() -> None:
    """Standard output's reader left (``trainops run ... | head``): what is left to print goes nowhere, quietly.

    The command goes on (a job is not stopped because its reader left) and standard output becomes /dev/null, so
    neither later lines nor the interpreter's flush at exit raise again (the way Python's documentation handles
    SIGPIPE's absence)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real descriptor behind sys.stdout (a test's capture): nothing to point away
        pass


def attach_console(level: int = logging.INFO) -> None:
    """Print the ``trainops`` loggers' messages (``level`` and above) as plain lines on standard output; attached
    once per process."""
    logger = logging.getLogger("trainops")
    if any(getattr(handler, _MARK, False) for handler in logger.handlers):
        return
    handler = _CurrentStdout()
    handler.setFormatter(logging.Formatter("%(message)s"))
    setattr(handler, _MARK, True)
    logger.addHandler(handler)
    logger.setLevel(level)
