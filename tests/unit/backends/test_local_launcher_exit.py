"""Issue 24, break 5 (the hang): the controller's process watch must never reap a launcher it started itself.

The watch reaps orphans adopted by the controller (a child subreaper). It used to reap every zombie child it had
recorded, launchers included: when a launcher that had failed was reaped by the watch thread before the job's own
`Popen.poll()`, `poll()` found no child (ECHILD) and answered 0, so the job took a failed host for a finished one and
waited for the others (algo-1 in torchrun's rendezvous) until max_run. The same holds for a launcher ending at any
moment of any attempt: its exit status is the job's to read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from trainops.backends.local.tracking import JobProcesses, clock_ticks_now, launching
from trainops.runtime.processes import process_start_ticks


def test_a_launcher_that_exited_keeps_its_exit_status_for_the_job_whatever_the_watch_scans(tmp_path):
    job_id = "reaping-test"
    processes = JobProcesses(tmp_path, job_id, adopter=os.getpid(), since_ticks=clock_ticks_now())
    processes.activate()
    try:
        with launching(job_id) as launch:
            launcher = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"], start_new_session=True)
            launch.register(launcher.pid)
        processes.known[launcher.pid] = process_start_ticks(launcher.pid) or 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a zombie now: exited, not yet waited for
            try:
                with open(f"/proc/{launcher.pid}/stat", "rb") as handle:
                    if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                        break
            except OSError:
                break
            time.sleep(0.01)
        for _ in range(3):
            processes.scan()  # what the watch thread does every few seconds while the job runs
        processes.stop(grace_seconds=0.2)  # and what the job's end does
        assert launcher.wait(timeout=10) == 3  # not 0: the failure is seen
    finally:
        processes.deactivate()
