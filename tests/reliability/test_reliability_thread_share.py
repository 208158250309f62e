"""Issue 39, class 6: each rank of a local job gets its share of this machine's cores, unless told otherwise.

Every emulated host runs on this machine, so torch's default (one intra-op thread per CPU in every rank) put hosts x
ranks x CPUs threads on the CPUs: the digits example trained 3.4-4.7x slower on 2 cores (bench/reliability_threads.py,
which measures it; no timing is asserted here)."""

from __future__ import annotations

import json

import pytest
from local_breaks import cli

from trainops.runtime.host_facts import usable_cpus
from trainops.runtime.plan import local_thread_share

SCRIPT = """import json, os, torch
print("THREADS " + json.dumps({"rank": int(os.environ["RANK"]), "omp": os.environ.get("OMP_NUM_THREADS"),
                               "torch": torch.get_num_threads()}), flush=True)
"""


def test_the_share_is_the_cpus_over_every_rank_of_every_host_at_least_one():
    assert local_thread_share(16, 2, 1) == 8
    assert local_thread_share(16, 2, 4) == 2
    assert local_thread_share(2, 2, 4) == 1  # more ranks than CPUs: one each, never 0
    assert local_thread_share(7, 2, 1) == 3


def _threads(tmp_path, environment: dict[str, str] | None = None, env: dict[str, str] | None = None) -> list[dict]:
    (tmp_path / "src").mkdir(parents=True, exist_ok=True)
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: threads\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.g5.12xlarge\n"
                    "instance_count: 2\ndistribution: {type: torch_distributed, processes_per_host: 1}\n"
                    f"output_path: out\nenvironment: {json.dumps(environment or {})}\n")
    result = cli("run", str(spec), "--job-name", "threads",
                 env={"TRAINOPS_HOME": str(tmp_path / "home"), **(env or {})},
                 unset=("OMP_NUM_THREADS", "TRAINOPS_LOCAL_THREADS"))
    assert result.returncode == 0, (result.stdout, result.stderr)
    return sorted((json.loads(line.split("THREADS ", 1)[1]) for line in result.stdout.splitlines()
                   if "THREADS " in line), key=lambda seen: seen["rank"])


@pytest.mark.system
def test_each_rank_of_a_local_job_gets_its_share_and_torch_uses_it(tmp_path):
    share = local_thread_share(usable_cpus(), 2, 1)
    assert _threads(tmp_path) == [{"rank": 0, "omp": str(share), "torch": share},
                                  {"rank": 1, "omp": str(share), "torch": share}]


@pytest.mark.system
def test_a_thread_count_the_spec_or_the_machine_sets_is_left_as_it_is(tmp_path):
    assert [seen["omp"] for seen in _threads(tmp_path / "spec", {"OMP_NUM_THREADS": "3"})] == ["3", "3"]
    assert [seen["omp"] for seen in _threads(tmp_path / "machine", env={"OMP_NUM_THREADS": "5"})] == ["5", "5"]
    libraries = _threads(tmp_path / "libraries", env={"TRAINOPS_LOCAL_THREADS": "0"})
    assert [seen["omp"] for seen in libraries] == [None, None]  # torch's own default, as before
