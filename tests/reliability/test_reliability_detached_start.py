"""Detached local jobs (`trainops run --no-wait`, `submit_detached`) at the moment they start.

- A stop asked for right after submit, while the supervisor is still laying the job out, used to be lost: the
  process watch cleared the `stop-request` file as it started (taking it for an earlier run's), so `trainops stop`
  waited 60 s, killed the supervisor and the job ended Failed. It must stop the job promptly and record Stopped.
- `--launcher` and `--image-python` must reach a detached job as they reach a foreground one.
"""

from __future__ import annotations

from pathlib import Path

import fault_scenarios
import pytest

from trainops.backends.local import status
from trainops.backends.local.control import stop_local_job
from trainops.backends.local.detached import submit_detached
from trainops.backends.local.processes import job_processes

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_a_stop_right_after_submit_stops_the_job_and_records_stopped(tmp_path: Path):
    spec = fault_scenarios.RunningJob(tmp_path, "early-stop", hosts=2).spec_path  # runs until stopped
    workdir = tmp_path / "work"
    record = submit_detached(spec, "early-stop", workdir=workdir)
    assert record["status"] == "InProgress" and record.get("secondary_status") == "Starting", record
    # A short timeout: a lost request would be forced (controller killed, job Failed) and say "forced".
    said = stop_local_job("early-stop", workdir, timeout=20.0)
    assert said.startswith("early-stop: Stopped") and "forced" not in said, said
    final = status.read("early-stop", workdir)
    assert final["status"] == "Stopped" and final["failure_reason"] == "Stopped by trainops stop", final
    assert job_processes(final["job_id"]) == []


def test_no_wait_passes_launcher_and_image_python_to_the_detached_job(tmp_path: Path):
    """The cheapest evidence: the toolkit launcher's sourcedir.tar.gz is laid out (the trainops launcher never
    builds one), and the host's container is started by the given interpreter (a wrapper that notes each start)."""
    import subprocess
    import sys
    import time

    spec = fault_scenarios.RunningJob(tmp_path, "options", hosts=1).spec_path
    interpreter, started = tmp_path / "image-python", tmp_path / "image-python.started"
    interpreter.write_text(f"#!/bin/sh\necho \"$@\" >> {started}\nexec {sys.executable} \"$@\"\n")
    interpreter.chmod(0o755)
    workdir = tmp_path / "work"
    submitted = subprocess.run(
        [sys.executable, "-m", "trainops.cli", "run", str(spec), "--backend", "local", "--no-wait", "--workdir",
         str(workdir), "--job-name", "options", "--launcher", "toolkit", "--image-python", str(interpreter)],
        capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    deadline = time.monotonic() + 120
    while not started.exists() and status.read("options", workdir)["status"] == "InProgress" \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    stop_local_job("options", workdir, timeout=30.0)
    assert started.is_file(), status.read("options", workdir)
    assert (workdir / "jobs" / "options" / "source" / "sourcedir.tar.gz").is_file()
    assert status.read("options", workdir)["status"] in ("Stopped", "Completed", "Failed")


def test_a_detached_jobs_own_messages_reach_the_supervisors_log_time_stamped(tmp_path: Path):
    """The controller's messages are `trainops.*` log records; a detached job's supervisor writes them to its log
    (``<job dir>/supervisor.log``), each with its time, and leaves the hosts' lines to ``<job dir>/logs``."""
    import re

    spec = fault_scenarios.RunningJob(tmp_path, "said", hosts=1).spec_path
    workdir = tmp_path / "work"
    submit_detached(spec, "said", workdir=workdir)
    said = stop_local_job("said", workdir, timeout=30.0)
    assert said.startswith("said: Stopped"), said
    import time

    path, deadline = workdir / "jobs" / "said" / "supervisor.log", time.monotonic() + 30
    while "ended" not in (log := path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)  # the supervisor says how the job ended after recording it
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \[trainops\] job said ended Stopped$", log, re.M), log
    assert not re.search(r"^\[algo-1", log, re.M), log  # no host line there
