"""The pipeline part of issue 10, item 5, shared by test_reliability_idempotency.py and bench/reliability.py: a
pipeline whose evaluation fails is re-run after the fix; the finished training (same inputs, same spec hash) is not
run again unless --force, and is run again when its data or its spec change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

SCRIPTS = Path(__file__).parent / "scripts" / "pipeline"


@dataclass
class PipelineRun:
    """One `trainops run pipeline.yaml`."""

    returncode: int
    seconds: float
    stdout: str
    stderr: str
    record: dict  # last-run.json
    trainings: list[str]  # the job names the training script ran as, so far

    @property
    def train(self) -> dict:
        return self.record.get("steps", {}).get("train", {})


class IdempotentPipeline:
    """A small pipeline (train: one plain process; evaluate with a gate) in a directory of its own."""

    def __init__(self, root: Path):
        self.root = root
        self.directory = root / "pipeline"
        self.directory.mkdir(parents=True)
        for script in ("train.py", "evaluate.py"):
            shutil.copy(SCRIPTS / script, self.directory / script)
        self.data = root / "data"
        self.data.mkdir()
        (self.data / "part-0.csv").write_text("0,1\n")
        self.runs_file = root / "trainings.txt"
        self.path = self.directory / "pipeline.yaml"
        self.write(hyperparameters={"epochs": 1})

    def write(self, hyperparameters: dict) -> None:
        self.path.write_text(yaml.safe_dump({
            "name": "idempotent", "workdir": str(self.root / "state"),
            "steps": {
                "train": {"spec": {"name": "idem", "entry_point": "train.py", "source_dir": ".",
                                   "instance_type": "local", "hyperparameters": hyperparameters,
                                   "environment": {"RUNS_FILE": str(self.runs_file)},
                                   "inputs": {"train": str(self.data)}},
                          "channels": {"train": str(self.data)}},
                "evaluate": {"entry_point": "evaluate.py", "source_dir": ".", "gate": "accuracy >= 0.5",
                             "channels": {"test": str(self.data)}},
            }}))

    def fix_evaluation(self) -> None:
        (self.directory / "evaluation-fixed").write_text("fixed")

    def run(self, *extra: str) -> PipelineRun:
        started = time.monotonic()
        completed = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(self.path), *extra],
                                   capture_output=True, text=True, timeout=300)
        seconds = round(time.monotonic() - started, 2)
        record_path = self.root / "state" / "pipelines" / "idempotent" / "last-run.json"
        record = json.loads(record_path.read_text()) if record_path.exists() else {}
        trainings = self.runs_file.read_text().split() if self.runs_file.exists() else []
        return PipelineRun(completed.returncode, seconds, completed.stdout, completed.stderr, record, trainings)


def rerun_after_failed_evaluation(root: Path) -> dict[str, PipelineRun]:
    """The whole story: fail, fix and re-run (skipped), --force, changed data, changed spec."""
    pipeline = IdempotentPipeline(root)
    runs = {"first (evaluation fails)": pipeline.run()}
    pipeline.fix_evaluation()
    runs["re-run after the fix"] = pipeline.run()
    runs["re-run with --force"] = pipeline.run("--force")
    (pipeline.data / "part-1.csv").write_text("2,3\n")
    runs["re-run, data changed"] = pipeline.run()
    pipeline.write(hyperparameters={"epochs": 2})
    runs["re-run, spec changed"] = pipeline.run()
    runs["re-run, nothing changed"] = pipeline.run()
    return runs
