"""Faults in a real launch: a rank that raises, a rank killed by a signal, SIGTERM to the launcher. Each time every
rank is gone afterwards (checked by pid and process group, and by scanning for anything the launch started) and the
failure file names the right rank."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts" / "runtime"))

from runtime_layout import (  # noqa: E402
    LocalJob,
    lay_out_job,
    live_group_members,
    rank_records,
    rank_results,
    wait_for,
    wait_until_gone,
)

from trainops.runtime.failure import read_failure  # noqa: E402
from trainops.runtime.processes import is_alive  # noqa: E402

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

TWO_RANKS = {"type": "torch_distributed", "processes_per_host": 2}


def assert_every_rank_gone(job: LocalJob, bases: list[Path]) -> None:
    assert wait_until_gone(job.marker) == []
    records = rank_records(bases)
    assert records, "no rank ever started"
    for record in records:
        assert not is_alive(record["pid"], record["start_ticks"]), record
        # Its process group (its children, its output relay) is gone too.
        assert live_group_members(record["pid"]) == [], record


def test_a_rank_that_raises(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution=TWO_RANKS, hyperparameters={"fail_rank": 1, "sleep": 120})
    with LocalJob(bases) as job:
        assert job.wait(timeout=90) == [1], job.output()
        assert_every_rank_gone(job, bases)
    failure = read_failure(str(bases[0] / "output" / "failure"))
    assert failure["summary"] == "rank 1 on host algo-1 exited with code 1: ValueError: rank 1 fails on purpose"
    assert (failure["rank"], failure["host"], failure["exit_code"], failure["reason"]) == ("1", "algo-1", "1", "error")
    assert failure["stderr"][-1] == "ValueError: rank 1 fails on purpose"
    assert not (bases[0] / "output" / "success").exists()
    assert "job failed: rank 1 on host algo-1" in job.output()


def test_a_rank_killed_by_a_signal(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution=TWO_RANKS, hyperparameters={"kill_rank": 0, "sleep": 120})
    with LocalJob(bases) as job:
        assert job.wait(timeout=90) == [1], job.output()
        assert_every_rank_gone(job, bases)
    failure = read_failure(str(bases[0] / "output" / "failure"))
    assert (failure["rank"], failure["signal"], failure["exit_code"], failure["reason"]) == ("0", "SIGKILL", "137",
                                                                                             "oom")
    assert failure["summary"] == "rank 0 on host algo-1 was killed by SIGKILL (exit code 137), likely out of memory"
    assert failure["stderr"][-1] == "rank 0 is about to be killed"


def test_sigterm_to_the_launcher_stops_every_rank(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution=TWO_RANKS, hyperparameters={"sleep": 120})
    with LocalJob(bases) as job:
        wait_for(lambda: len(rank_results(bases)) == 2, within=90, what="both ranks to reach their sleep")
        job.launchers[0].send_signal(signal.SIGTERM)
        assert job.wait(timeout=60) == [1], job.output()
        assert_every_rank_gone(job, bases)
    failure = read_failure(str(bases[0] / "output" / "failure"))
    assert failure["summary"] == "the job was stopped by SIGTERM on host algo-1"
    assert (failure["reason"], failure["signal"], failure["rank"]) == ("stopped", "SIGTERM", "")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (make mpi)")
def test_an_mpi_rank_that_raises_on_the_second_host(tmp_path):
    bases = lay_out_job(tmp_path, hosts=2, distribution={"type": "mpi", "processes_per_host": 1},
                        hyperparameters={"fail_rank": 1, "sleep": 120})
    with LocalJob(bases) as job:
        assert job.wait(timeout=90) == [1, 1], job.output()
        assert_every_rank_gone(job, bases)
    for base in bases:  # the worker host reports the same root cause as the master
        failure = read_failure(str(base / "output" / "failure"))
        assert failure["summary"] == "rank 1 on host algo-2 exited with code 1: ValueError: rank 1 fails on purpose"
        assert failure["stderr"][-1] == "ValueError: rank 1 fails on purpose"


def test_a_job_past_its_time_limit_is_stopped(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution={"type": "none"}, hyperparameters={"sleep": 120})
    job = LocalJob(bases)
    job.common["TRAINOPS_MAX_RUN_SECONDS"] = "3"
    with job:
        assert job.wait(timeout=60) == [1], job.output()
        assert_every_rank_gone(job, bases)
    failure = read_failure(str(bases[0] / "output" / "failure"))
    assert failure["reason"] == "timeout"
    assert failure["summary"] == "the job ran longer than its limit of 3 s and was stopped on host algo-1"
