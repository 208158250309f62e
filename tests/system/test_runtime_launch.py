"""The runtime for real: `python -m trainops.runtime launch` on CPU, from contract directories under tmp_path, as the
local backend starts it (one launcher per simulated host)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts" / "runtime"))

from runtime_layout import LocalJob, lay_out_job, rank_records, rank_results, wait_until_gone  # noqa: E402

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]


def test_two_processes_all_reduce_with_gloo(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution={"type": "torch_distributed", "processes_per_host": 2},
                        hyperparameters={"sleep": 0.2})
    with LocalJob(bases) as job:
        assert job.wait() == [0], job.output()
        assert wait_until_gone(job.marker) == []
    results = rank_results(bases)
    assert sorted(results) == [0, 1]
    for rank, seen in results.items():
        assert seen["sum"] == 3.0 and seen["world_size"] == 2 and seen["backend"] == "gloo"
        assert seen["local_rank"] == rank and seen["host"] == "algo-1"
        assert seen["channels"] == {"train": str(bases[0] / "input" / "data" / "train")}
        assert seen["hyperparameters"] == {"sleep": 0.2}
    assert (bases[0] / "output" / "success").exists() and not (bases[0] / "output" / "failure").exists()
    assert [(r["rank"], r["state"], r["exit_code"]) for r in rank_records(bases)] == [(0, "exited", 0),
                                                                                     (1, "exited", 0)]
    log = job.output()
    assert "[algo-1 rank 0] rank 0 of 2 on algo-1: sum 3.0" in log
    assert "[algo-1 rank 1] rank 1 of 2 on algo-1: sum 3.0" in log


def test_two_simulated_hosts_through_torchrun(tmp_path):
    bases = lay_out_job(tmp_path, hosts=2, distribution={"type": "torch_distributed", "processes_per_host": 1})
    with LocalJob(bases) as job:
        assert job.wait() == [0, 0], job.output()
        assert wait_until_gone(job.marker) == []
    results = rank_results(bases)
    assert {rank: (seen["host"], seen["env_host"], seen["sum"], seen["world_size"]) for rank, seen in results.items()} \
        == {0: ("algo-1", "algo-1", 3.0, 2), 1: ("algo-2", "algo-2", 3.0, 2)}
    # Each simulated host writes to its own model directory.
    assert results[1]["model_dir"] == str(bases[1] / "model")
    assert all((base / "output" / "success").exists() for base in bases)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (make mpi)")
def test_mpi_two_ranks_on_two_simulated_hosts(tmp_path):
    bases = lay_out_job(tmp_path, hosts=2, distribution={"type": "mpi", "processes_per_host": 1})
    with LocalJob(bases) as job:
        assert job.wait() == [0, 0], job.output()
        assert wait_until_gone(job.marker) == []
    results = rank_results(bases)
    assert {rank: (seen["host"], seen["env_host"], seen["sum"], seen["backend"]) for rank, seen in results.items()} \
        == {0: ("algo-1", "algo-1", 3.0, "gloo"), 1: ("algo-2", "algo-2", 3.0, "gloo")}
    assert results[1]["model_dir"] == str(bases[1] / "model")
    assert "mpirun --host localhost:2 -np 2" in job.output()
    assert all((base / "output" / "success").exists() for base in bases)
    # Each rank kept its record with its own simulated host.
    assert [(r["rank"], r["host"]) for r in rank_records(bases)] == [(0, "algo-1"), (1, "algo-2")]


def test_no_distribution_runs_one_process_that_sees_the_contract(tmp_path):
    bases = lay_out_job(tmp_path, hosts=1, distribution={"type": "none"}, hyperparameters={"sleep": 0})
    with LocalJob(bases) as job:
        assert job.wait() == [0], job.output()
    seen = rank_results(bases)[0]
    assert (seen["world_size"], seen["backend"], seen["host"]) == (1, None, "algo-1")
    assert os.path.exists(bases[0] / "output" / "success")
