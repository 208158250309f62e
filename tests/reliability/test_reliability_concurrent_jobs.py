"""Several local jobs controlled by ONE process at the same time (threads of a test runner, an Airflow worker or a
notebook) never touch each other's processes.

Found by tests/system/test_parallel_parity.py running three jobs at once: all launchers and guards of the jobs are
children of that one process, and a job counted every child of the controller (a child subreaper) started after it
as an adopted orphan of its own; so a job ending first stopped the launchers of the others ("launcher killed by
signal 15") and their guards. Now nothing is adopted or scanned by the controller: each host's own launcher
(trainops.backends.local.host_init) stops only its host, known by the kernel's own record.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import fault_scenarios
import pytest

from trainops.backends.local.job import LocalJob
from trainops.backends.local.job_input import from_spec
from trainops.backends.local.processes import job_processes
from trainops.errors import JobFailed
from trainops.spec import load_job_spec

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def _run(root: Path, name: str, environment: dict, hosts: int, results: dict) -> None:
    job = fault_scenarios.RunningJob(root / name, name, environment=environment, hosts=hosts)
    lines: list[str] = []
    try:
        result = LocalJob(from_spec(load_job_spec(job.spec_path)), name, workdir=str(root / name / "work"),
                          log=lines.append).run()
        results[name] = (result.status, result.failure_reason, lines)
    except JobFailed as error:
        results[name] = ("Failed", str(error), lines)


def test_jobs_ending_early_leave_the_concurrent_jobs_of_the_same_process_running(tmp_path):
    jobs = {
        # ends first, through the controller's normal finish (leftover sweep of its own processes)
        "quick": ({"STEPS": "1", "STEP_SECONDS": "0.1"}, 1),
        # a rank fails at step 2: the failed-job path stops what is left of that job
        "failing": ({"FAULT": "exit:0", "STEP_SECONDS": "0.2"}, 1),
        # must run on, untouched, until long after both have ended
        "long-1": ({"STEPS": "40", "STEP_SECONDS": "0.2"}, 2),
        "long-2": ({"STEPS": "40", "STEP_SECONDS": "0.2"}, 1),
    }
    results: dict = {}
    threads = [threading.Thread(target=_run, args=(tmp_path, name, environment, hosts, results))
               for name, (environment, hosts) in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=280)
    assert sorted(results) == sorted(jobs)
    summary = {name: (status, reason) for name, (status, reason, _) in results.items()}
    assert results["quick"][0] == "Completed", summary
    assert results["failing"][0] == "Failed" and "fails on purpose" in (results["failing"][1] or ""), summary
    for name in ("long-1", "long-2"):
        status, reason, lines = results[name]
        assert status == "Completed", (name, reason, "\n".join(lines[-30:]))
        assert not any("SIGTERM" in line or "signal 15" in line for line in lines), "\n".join(lines[-30:])
    for name in jobs:  # and each left nothing running
        record = json.loads((tmp_path / name / "work" / "jobs" / name / "status.json").read_text())
        assert job_processes(record["job_id"]) == []
