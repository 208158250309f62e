"""Load (issue 10, item 6), shared by test_reliability_load.py and bench/reliability.py: JOBS local jobs of the same
spec (a sweep) submitted at once on this 2-core machine, each a real torchrun job of 2 ranks with a gloo all-reduce.
Every job must complete with its own model, its own rendezvous port and its own checkpoint directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainops.backends.local.processes import job_processes

SCRIPT = Path(__file__).parent / "scripts" / "load_train.py"
JOBS = 8


@dataclass
class LoadRun:
    """What the concurrent submission gave."""

    seconds: float  # from the first submission to the last job's end
    returncodes: dict[str, int]
    models: dict[str, dict]  # job name -> model.json from its archive
    statuses: dict[str, dict]
    checkpoint_dirs: dict[str, str]
    clashes: list[str]  # "CLASH" lines the jobs printed
    processes_left: int
    outputs: dict[str, str]


def submit_at_once(root: Path, jobs: int = JOBS) -> LoadRun:
    source = root / "src"
    source.mkdir(parents=True)
    shutil.copy(SCRIPT, source / "load_train.py")
    spec = root / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "sweep", "entry_point": "load_train.py", "source_dir": str(source), "instance_type": "local",
        "distribution": {"type": "torch_distributed", "processes_per_host": 2}, "output_path": str(root / "out"),
        "max_run": 900, "environment": {"OMP_NUM_THREADS": "1"}}))
    names = [f"sweep-{index + 1}" for index in range(jobs)]
    started = time.monotonic()
    processes = {name: subprocess.Popen([sys.executable, "-m", "trainops.cli", "run", str(spec), "--workdir",
                                         str(root / "work"), "--job-name", name], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True) for name in names}
    outputs = {name: process.communicate(timeout=900)[0] for name, process in processes.items()}
    seconds = round(time.monotonic() - started, 2)
    statuses, models, checkpoints, left = {}, {}, {}, 0
    for name in names:
        record = json.loads((root / "work" / "jobs" / name / "status.json").read_text())
        statuses[name] = record
        checkpoints[name] = record.get("checkpoint_dir")
        left += len(job_processes(record["job_id"]))
        if record.get("model_artifact"):
            with tarfile.open(record["model_artifact"]) as tar:
                models[name] = json.load(tar.extractfile("model.json"))
    clashes = [line for output in outputs.values() for line in output.splitlines() if "CLASH" in line]
    return LoadRun(seconds, {name: process.returncode for name, process in processes.items()}, models, statuses,
                   checkpoints, clashes, left, outputs)
