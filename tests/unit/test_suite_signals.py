"""The suite's processes get Ctrl-C whichever way the suite was started (tests/conftest.py): a shell without job
control starts ``make test &`` or ``nohup make test`` with SIGINT ignored, which every process of the run would
inherit through fork and exec, so the tests that send a Ctrl-C (a report server, ``make slurm-cluster``) failed
for the way the suite was started. Loading the conftest in a process that ignores SIGINT gives the processes it
starts the default Ctrl-C again; without it they keep ignoring it (the control)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

# A child's SIGINT disposition, as the child reports it (a Python whose SIGINT was not ignored at its start raises
# KeyboardInterrupt on it).
CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.mark.parametrize("load_conftest", [True, False], ids=["with-the-conftest", "control"])
def test_a_process_started_under_an_ignored_sigint_gets_ctrl_c_back(load_conftest):
    parent = ("import runpy, subprocess, sys\n"
              + (f"runpy.run_path({str(CONFTEST)!r})\n" if load_conftest else "")
              + f"print(subprocess.run([sys.executable, '-c', {CHILD!r}], capture_output=True, text=True).stdout)")
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(load_conftest), done.stdout
