"""The prepare step: a local script that produces the raw data (the current Python, no shell, its own process group,
stopped at its timeout or when the caller is interrupted)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable

from trainops.errors import JobFailed, Problem, SpecError


def run_script(script: str, arguments: list[str], *, cwd: str, timeout: float | None,
               log: Callable[[str], None] | None = None) -> str:
    """Run `script` with `arguments`; stream its output through `log` (prefixed `[prepare]`) or straight through.

    Returns a one-line summary; raises `SpecError` when the script is missing and `JobFailed` when it fails.
    """
    if not os.path.isfile(script):
        raise SpecError(Problem("script", f"{script} does not exist"), source="prepare step")
    command = [sys.executable, script, *map(str, arguments)]
    output = subprocess.PIPE if log else None
    process = subprocess.Popen(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT if log else None,
                               start_new_session=True)
    try:
        if log and process.stdout is not None:  # piped whenever there is a log to write to
            for raw in iter(process.stdout.readline, b""):
                log(f"[prepare] {raw.decode('utf-8', 'replace').rstrip()}")
        code = process.wait(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise JobFailed(f"{script} ran longer than {timeout} s and was stopped") from None
    except BaseException:
        _kill_group(process)  # interrupted: take the script's whole process group with it
        raise
    if code != 0:
        raise JobFailed(f"{script} exited with code {code}")
    return f"{os.path.basename(script)} ran"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
