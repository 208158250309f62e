"""Issue 24, break 4: two `trainops run` of one new job name at once make exactly one job; the other caller follows
it to its end (the re-attach rule), whichever of them gets there first and however short the job is."""

from __future__ import annotations

import os
import subprocess

import pytest
from local_breaks import TRAINOPS, write_job


@pytest.mark.parametrize("sleep", ["2", "0"])
def test_two_runs_of_one_new_name_at_once_make_one_job_and_both_follow_it(tmp_path, sleep):
    spec = write_job(tmp_path, {"SLEEP": sleep})
    workdir = tmp_path / "work"
    for round_number in range(3):
        name = f"same-{round_number}"
        callers = [subprocess.Popen([*TRAINOPS, "run", str(spec), "--job-name", name, "--workdir", str(workdir)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=dict(os.environ)) for _ in range(2)]
        outputs = [caller.communicate(timeout=300) for caller in callers]
        codes = [caller.returncode for caller in callers]
        assert codes == [0, 0], (codes, outputs)
        # Each caller shows the one run's lines at most once: since the backend kit (issue 43) a follower streams the
        # job's log as the creator does, so both may show "trained", but neither shows a second run.
        trained = [out.count("rank 0] trained") + out.count("[algo-1] trained") for out, _ in outputs]
        assert max(trained) <= 1, outputs
        log = (workdir / "jobs" / name / "logs" / "algo-1.log").read_text()
        assert log.count("trained") == 1, log  # the job ran once
        assert sorted(os.listdir(workdir / "jobs")) == [f"same-{n}" for n in range(round_number + 1)]
        assert any("re-attaching" in out or "following" in out for out, _ in outputs), outputs
