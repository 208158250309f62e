"""The prepare and stage components: variables, no shell, exit codes and timeouts, a small stage summary."""

from __future__ import annotations

import json

import pytest

from trainops.components.data_tasks import stage_summary
from trainops.components.factory import build_components
from trainops.components.settings import LOCAL_SETTINGS
from trainops.errors import JobFailed, SpecError

ops = build_components(LOCAL_SETTINGS)

PREPARE = """\
import os, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(os.path.join(out, "train"), exist_ok=True)
open(os.path.join(out, "train", "x.txt"), "w").write(" ".join(sys.argv[1:]))
time.sleep(float(os.environ.get("PREPARE_SLEEP", "0")))
sys.exit(int(os.environ.get("PREPARE_EXIT", "0")))
"""


@pytest.fixture
def pipeline_dir(tmp_path):
    directory = tmp_path / "pipeline"
    directory.mkdir()
    (directory / "prepare.py").write_text(PREPARE)
    return directory


def prepare(pipeline_dir, tmp_path, **changes):
    inputs = dict(script="prepare.py", args_json=json.dumps(["--out", "${workdir}/raw", "$(touch pwned); x"]),
                  timeout=60, workdir="../work", pipeline_dir=str(pipeline_dir))
    inputs.update(changes)
    return ops.prepare.python_func(**inputs)


def test_prepare_runs_the_script_with_variables_substituted_and_no_shell(pipeline_dir, tmp_path):
    assert prepare(pipeline_dir, tmp_path) == "prepare.py ran"
    written = (tmp_path / "work" / "raw" / "train" / "x.txt").read_text()
    assert written == f"--out {tmp_path / 'work' / 'raw'} $(touch pwned); x"
    assert not (pipeline_dir / "pwned").exists() and not (tmp_path / "pwned").exists()


def test_prepare_failures_and_timeouts_fail_the_task(pipeline_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PREPARE_EXIT", "3")
    with pytest.raises(JobFailed, match="exited with code 3"):
        prepare(pipeline_dir, tmp_path)
    monkeypatch.setenv("PREPARE_EXIT", "0")
    monkeypatch.setenv("PREPARE_SLEEP", "30")
    with pytest.raises(JobFailed, match="ran longer than 1 s"):
        prepare(pipeline_dir, tmp_path, timeout=1)
    with pytest.raises(SpecError, match="script"):
        prepare(pipeline_dir, tmp_path, script="missing.py")


def test_stage_copies_into_the_destination_and_returns_a_small_summary(pipeline_dir, tmp_path):
    source = tmp_path / "work" / "raw"
    (source / "train").mkdir(parents=True)
    (source / "train" / "a.npz").write_bytes(b"12345")
    destination, summary_json = ops.stage.python_func(
        source="${workdir}/raw", destination="${workdir}/fsx/data", backend="local", workdir="../work",
        pipeline_dir=str(pipeline_dir), s3_prefix="", workers=2, region="")
    assert destination == str(tmp_path / "work" / "fsx" / "data")
    assert (tmp_path / "work" / "fsx" / "data" / "train" / "a.npz").read_bytes() == b"12345"
    summary = json.loads(summary_json)
    assert summary["files_copied"] == 1 and summary["bytes_copied"] == 5


def test_stage_summaries_count_lists_instead_of_carrying_them():
    report = {"files_copied": 3, "refused": [{"name": "../x"}, {"name": "/etc"}], "files": ["a"] * 1000}
    assert stage_summary(report) == {"files_copied": 3, "refused": 2}
