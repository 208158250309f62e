"""A heterogeneous cluster through the local backend (`trainops run`): a data-loading CPU group listed first and a
two-host training group that runs the distribution (issue 27 item 3).

Only the training group's hosts launch the distribution, over its ranks alone, with its first host as the master;
the data-loading host runs the script once, plainly, as AWS's toolkit does. mpirun's ranks map to the training
group's hosts (not to the first hosts of the cluster).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """\
import json, os
print("RESULT " + json.dumps({"host": os.environ["SM_CURRENT_HOST"], "group": os.environ["SM_CURRENT_INSTANCE_GROUP"],
                              "rank": os.environ.get("RANK"), "world": os.environ.get("WORLD_SIZE"),
                              "mode": os.environ["TRAINOPS_LAUNCH_MODE"]}), flush=True)
"""


@pytest.mark.parametrize("strategy", ["torch_distributed", "mpi"])
def test_the_distribution_runs_on_its_instance_group_only(tmp_path: Path, strategy: str):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: hetero\nentry_point: train.py\nsource_dir: src\noutput_path: out\ninstance_groups:\n"
        "  - {instance_group_name: cpus, instance_type: ml.c5.xlarge, instance_count: 1}\n"
        "  - {instance_group_name: gpus, instance_type: ml.g5.12xlarge, instance_count: 2}\n"
        f"distribution: {{type: {strategy}, processes_per_host: 2, instance_groups: [gpus]}}\n")
    result = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(spec), "--workdir", str(tmp_path / "w"),
                             "--job-name", f"hetero-{strategy.replace('_', '-')}"], capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line.split("RESULT ", 1)[1]) for line in result.stdout.splitlines() if "RESULT " in line]
    launcher = "torchrun" if strategy == "torch_distributed" else "mpirun"
    training = sorted((record["host"], record["rank"]) for record in records if record["group"] == "gpus")
    assert training == [("algo-2", "0"), ("algo-2", "1"), ("algo-3", "2"), ("algo-3", "3")]
    assert {(record["world"], record["mode"]) for record in records if record["group"] == "gpus"} == {("4", launcher)}
    # the data-loading host ran the script once, on its own
    assert [(record["host"], record["mode"], record["rank"]) for record in records if record["group"] == "cpus"] \
        == [("algo-1", "plain", None)]
