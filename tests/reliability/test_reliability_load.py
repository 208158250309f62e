"""Load (issue 10, item 6): 8 local jobs of one spec submitted at once on this 2-core machine all finish correctly,
each with its own rendezvous port, job directory and checkpoint directory; and two controllers never run one job.

Found on the way: the 8 jobs of a sweep shared one checkpoint directory (keyed by the spec's name), so each
resumed from the others' checkpoints; and two processes running the same job name at once would have shared one
job directory. Both are locked now (trainops.backends.hostfs.locks).
"""

from __future__ import annotations

import threading
import time

import fault_scenarios
import pytest
import yaml
from load_scenario import JOBS, submit_at_once

from trainops.errors import JobFailed

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]


def test_eight_jobs_submitted_at_once_all_finish_without_sharing_anything(tmp_path):
    run = submit_at_once(tmp_path, JOBS)
    assert all(code == 0 for code in run.returncodes.values()), run.outputs
    assert {record["status"] for record in run.statuses.values()} == {"Completed"}
    assert sorted(run.models) == sorted(run.returncodes)
    for name, model in run.models.items():
        assert (model["job"], model["sum"], model["world_size"]) == (name, 3.0, 2)  # its own ranks, all-reduced
    assert len({model["port"] for model in run.models.values()}) == JOBS  # no port shared
    assert len(set(run.checkpoint_dirs.values())) == JOBS and run.clashes == []  # no checkpoint directory shared
    assert len({record["job_dir"] for record in run.statuses.values()}) == JOBS
    assert run.processes_left == 0


def test_a_second_controller_for_the_same_job_is_refused_while_the_first_runs(tmp_path):
    from trainops.backends.local.job import LocalJob
    from trainops.backends.local.job_input import from_spec
    from trainops.spec import load_job_spec

    def run_local_job(spec, name, **options):  # two controllers of one name, past the re-attach policy
        return LocalJob(from_spec(spec), name, **options).run()

    job = fault_scenarios.RunningJob(tmp_path, "twice", environment={"STEPS": "15"})  # writes the spec
    spec = load_job_spec(job.spec_path)
    lines: list[str] = []
    first: dict = {}
    thread = threading.Thread(target=lambda: first.update(result=run_local_job(
        spec, "twice", workdir=str(tmp_path / "work"), log=lines.append)))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not any("started rank 0" in line for line in lines):
            assert time.monotonic() < deadline and thread.is_alive(), "\n".join(lines)
            time.sleep(0.1)
        with pytest.raises(JobFailed) as refused:
            run_local_job(spec, "twice", workdir=str(tmp_path / "work"), log=lines.append)
        assert "local job twice is already running" in str(refused.value) and "controller pid" in str(refused.value)
    finally:
        thread.join(timeout=300)
    assert first["result"].status == "Completed"
    assert yaml.safe_load((tmp_path / "work" / "jobs" / "twice" / "status.json").read_text())["status"] == "Completed"
