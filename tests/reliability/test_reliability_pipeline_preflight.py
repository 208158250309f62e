"""A pipeline file with invalid input is refused whole (exit 2) before any step runs.

Found while building the corpus: an inline train spec with a typo was only read once the prepare and stage steps
had run, its problem reported without its place in the pipeline (`instance_cont`, not
`steps.train.spec.instance_cont`), and a misspelt gate was only found after training.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def write_pipeline(directory: Path, **changes) -> Path:
    (directory / "prepare.py").write_text("import pathlib, sys\np = pathlib.Path(sys.argv[1]); p.parent.mkdir(parents=True, exist_ok=True); p.write_text('ran')\n")
    (directory / "train.py").write_text("print('training')\n")
    (directory / "evaluate.py").write_text("print('evaluating')\n")
    document = {
        "name": "preflight",
        "steps": {
            "prepare": {"script": "prepare.py", "args": ["${workdir}/prepare-ran"]},
            "train": {"spec": {"entry_point": "train.py", "source_dir": ".", "instance_type": "local"}},
            "evaluate": {"entry_point": "evaluate.py", "source_dir": ".", "gate": "accuracy >= 0.9"},
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = document
        for part in parents:
            node = node[part]
        node[last] = value
    path = directory / "pipeline.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def run(path: Path, workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(path), "--workdir", str(workdir)],
                          capture_output=True, text=True, timeout=120)


def test_every_problem_is_reported_at_its_path_before_the_prepare_step_runs(tmp_path):
    path = write_pipeline(tmp_path, steps__train__spec={"entry_point": "missing.py", "source_dir": ".",
                                                        "instance_type": "local", "instance_cont": 2,
                                                        "hyperparameters": {"hf_token": "x"}},
                          steps__evaluate__gate="accuracy >>> 0.9", steps__prepare__script="nope.py")
    result = run(path, tmp_path / "work")
    assert result.returncode == 2, result.stdout + result.stderr
    for field in ("steps.train.spec.instance_cont", "steps.train.spec.hyperparameters.hf_token",
                  "steps.evaluate.gate.operator", "steps.prepare.script"):
        assert f"  - {field}: " in result.stderr, result.stderr
    assert "[pipeline] step" not in result.stdout  # no step started
    assert not (tmp_path / "work").exists()


def test_missing_training_and_evaluation_code_is_found_first(tmp_path):
    path = write_pipeline(tmp_path, steps__evaluate__entry_point="gone.py")
    (tmp_path / "train.py").unlink()
    result = run(path, tmp_path / "work")
    assert result.returncode == 2
    assert "  - steps.train.spec.entry_point: train.py is not a file" in result.stderr
    assert "  - steps.evaluate.entry_point: gone.py is not a file" in result.stderr
    assert not (tmp_path / "work" / "prepare-ran").exists()


def test_a_spec_file_problem_names_the_file(tmp_path):
    (tmp_path / "bad-spec.yaml").write_text("entry_point: train.py\ninstance_type: local\nmax_run: 0\n")
    path = write_pipeline(tmp_path, steps__train__spec="bad-spec.yaml")
    result = run(path, tmp_path / "work")
    assert result.returncode == 2
    assert "  - steps.train.spec.max_run: " in result.stderr and "bad-spec.yaml" in result.stderr


def test_a_valid_pipeline_still_runs(tmp_path):
    path = write_pipeline(tmp_path)
    document = yaml.safe_load(path.read_text())
    del document["steps"]["evaluate"]  # the evaluation contract needs metrics.json; training alone is enough
    path.write_text(yaml.safe_dump(document))
    result = run(path, tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "work" / "prepare-ran").read_text() == "ran"
    assert "training" in result.stdout
