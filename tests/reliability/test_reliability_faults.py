"""Faults in the local backend (issue 10, item 4), each on a real 2-host job (torchrun, one rank per host).

For every fault the job ends within a stated bound (the figures measured are in RELIABILITY.md, from
bench/reliability.py), no process of the job is left (by its marker and by pgrep), and the failure file names the
root cause. The bounds, generous on a shared 2-core machine:

- a rank exits non-zero, a rank is SIGKILLed, the launcher of host 2 is SIGKILLed: the job ends within 30 s;
- a rank hangs: max_run stops the job, which ends within max_run + 30 s;
- the whole job is SIGTERMed: it ends within 30 s, and a re-run resumes from the checkpoint, losing at most one
  checkpoint interval of steps;
- the output path is read-only: from the start, the job is refused before anything runs; mid-job, the archive
  fails with a clear error, nothing is left under its final name, and the model directory is kept.
"""

from __future__ import annotations

import fault_scenarios as scenarios
import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def read_only_scenario(scenario, tmp_path) -> scenarios.FaultRun:
    try:
        return scenario(tmp_path)
    except scenarios.CannotMakeReadOnly as error:
        pytest.skip(str(error))


def assert_nothing_left(run: scenarios.FaultRun) -> None:
    assert run.processes_left == [] and run.pgrep_left == [], run.output
    assert run.status.get("processes_left") in (0, None)


def test_a_rank_that_exits_non_zero_ends_the_job(tmp_path):
    run = scenarios.rank_exits_non_zero(tmp_path)
    assert run.returncode == 1 and run.status["status"] == "Failed"
    assert run.seconds_to_end < scenarios.FAILED_RANK_BOUND
    assert run.failure.startswith("rank 1 on host algo-2 exited with code 3")
    assert "rank 1 fails on purpose at step 2" in run.failure  # the rank's last stderr lines
    assert_nothing_left(run)


def test_a_sigkilled_rank_ends_the_job(tmp_path):
    run = scenarios.rank_is_sigkilled(tmp_path)
    assert run.returncode == 1 and run.status["status"] == "Failed"
    assert run.seconds_to_end < scenarios.FAILED_RANK_BOUND
    assert run.failure.startswith("rank 1 on host algo-2 was killed by SIGKILL")
    assert_nothing_left(run)


def test_a_hung_rank_is_stopped_by_max_run(tmp_path):
    # max_run counts from the job's start, so it must leave both hosts time to start their ranks and reach the hang:
    # 8 s did not beside a CPU hog (max_run stopped the job before rank 1 had started, so no hang was tested).
    run = scenarios.rank_hangs(tmp_path, max_run=30)
    assert run.returncode == 1
    assert (run.status["status"], run.status["secondary_status"]) == ("Stopped", "MaxRuntimeExceeded")
    assert run.seconds_to_end < 30 + scenarios.TIMEOUT_SLACK
    assert "longer than max_run (30 s)" in run.failure
    assert_nothing_left(run)


def test_a_killed_launcher_of_host_2_ends_the_job(tmp_path):
    run = scenarios.launcher_of_host_2_dies(tmp_path)
    assert run.returncode == 1 and run.status["status"] == "Failed"
    assert run.seconds_to_end < scenarios.FAILED_RANK_BOUND
    assert run.failure.startswith("the launcher of host algo-2 killed by signal 9")
    assert_nothing_left(run)  # its orphaned torchrun agent and rank were found by the job's marker


def test_a_sigtermed_job_stops_and_a_rerun_resumes_losing_at_most_one_interval(tmp_path):
    stopped, rerun = scenarios.spot_sigterm_then_rerun(tmp_path, every=5)
    assert stopped.returncode == 1 and stopped.status["status"] == "Stopped"
    assert stopped.seconds_to_end < scenarios.STOP_BOUND
    assert "SIGTERM" in stopped.failure
    assert_nothing_left(stopped)
    facts = stopped.extra
    assert facts["resumed_step"] >= 10 and 0 <= facts["steps_lost"] <= facts["checkpoint_every"]
    assert rerun.returncode == 0 and facts["rerun_status"] == "Completed" and facts["model_steps"] == 40
    assert "resuming: checkpoint directory" in rerun.output
    assert_nothing_left(rerun)


def test_a_read_only_output_path_refuses_the_job_before_it_runs(tmp_path):
    run = read_only_scenario(scenarios.output_read_only_from_the_start, tmp_path)
    assert run.returncode == 1 and (run.status["status"], run.status["secondary_status"]) == ("Failed", "Starting")
    assert "cannot be written" in run.failure and str(tmp_path / "out") in run.failure
    assert "started rank" not in run.output  # nothing ran
    assert run.extra["entries_in_output"] == []
    assert_nothing_left(run)


def test_an_output_path_made_read_only_mid_job_leaves_nothing_half_written(tmp_path):
    run = read_only_scenario(scenarios.output_read_only_mid_job, tmp_path)
    assert run.returncode == 1 and (run.status["status"], run.status["secondary_status"]) == ("Failed", "Uploading")
    assert run.failure.startswith("could not write the model artifact") and "model directory is kept" in run.failure
    assert run.extra["entries_in_output"] == ["readonly-mid", "readonly-mid/output"]  # no archive, no partial file
    assert run.extra["model_kept"]
    assert run.status.get("model_artifact") is None
    assert_nothing_left(run)
