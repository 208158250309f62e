"""An outside engine brings its own vocabulary and trainops consults it (issue 43, item 2).

``claims_backend`` (beside this file) is a package as a third party would publish one: a backend whose channels are
persistent volume claims (``pvc://namespace/claim/path``), with its own states, a lost-node failure rule, no price
and a spec rule set of its own (node pools, not ``ml.*`` types). It is installed with ``pip install --target`` into
a directory only this module's processes see. A pipeline file whose ``channels:`` name a claim then runs through the
pipeline runner (``trainops run PIPELINE``) and the KFP train component (``trainops kfp run-local``): the channel is
fingerprinted as text (it used to be stat-ed: an internal error), the first attempt loses its node and is retried on
the infrastructure budget by the engine's own rule, and the cost is reported unknown (the engine has no price).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parent / "claims_backend"
TRAIN = """\
import os, pathlib
data = pathlib.Path(os.environ["CLAIMS_CHANNEL_TRAIN"])
print("read", (data / "part-0.txt").read_text().strip(), "from the claim", flush=True)
pathlib.Path(os.environ["CLAIMS_MODEL_DIR"], "model.txt").write_text("trained")
"""


@pytest.fixture(scope="module")
def claims_path(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("claims-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(PACKAGE)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return target


@pytest.fixture
def setup(claims_path, tmp_path) -> tuple[dict[str, str], Path, Path]:
    """The environment (the package on PYTHONPATH), the engine's root with a claim holding the data, and a pipeline
    file whose train step reads the claim, on a node pool, with one infrastructure retry (at once: the default
    backoff of 30 s, which nothing here checks, was half of each retrying test's time)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(claims_path),
                                                                     os.environ.get("PYTHONPATH")])),
           "TRAINOPS_HOME": str(tmp_path / "home"), "TRAINOPS_BACKENDS": os.devnull}
    root = tmp_path / "root"
    claim = root / "claims" / "team" / "data" / "train"
    claim.mkdir(parents=True)
    (claim / "part-0.txt").write_text("42\n")
    (root / "lose-next-node").write_text("the first job's node goes away")
    (tmp_path / "train.py").write_text(TRAIN)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(f"name: claims-retrain\nbackend: claims\nworkdir: {tmp_path / 'work'}\n"
                        f"backend_options: {{root: {root}}}\n"
                        "steps:\n  train:\n    job_name: claims-1\n    retries: {infrastructure: 1, backoff_seconds: 0}\n"
                        "    channels: {train: pvc://team/data/train}\n"
                        "    spec: {entry_point: train.py, source_dir: ., instance_type: pool-cpu, instance_count: 1}\n")
    return env, root, pipeline


def record(root: Path, name: str) -> dict:
    return json.loads((root / "jobs" / name / "status.json").read_text())


def test_the_pipeline_runner_reads_a_pvc_channel_and_retries_a_lost_node(setup):
    env, root, pipeline = setup
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(pipeline)], capture_output=True,
                          text=True, timeout=600, cwd=str(ROOT), env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "internal error" not in output.lower()
    assert record(root, "claims-1")["state"] == "NodeLost"  # attempt 1 lost its node ...
    assert record(root, "claims-1-2")["state"] == "Succeeded"  # ... and attempt 2 ran, on the infrastructure budget
    assert "infrastructure" in output and "the claims engine lost the job's node" in output, output[-6000:]
    assert (root / "jobs" / "claims-1-2" / "model" / "model.txt").read_text() == "trained"
    assert "read 42 from the claim" in (root / "jobs" / "claims-1-2" / "output.log").read_text()
    assert "cost unknown" in output and "the claims backend has no price list" in output, output[-6000:]


def test_a_pvc_channel_on_an_engine_that_cannot_read_it_is_refused_naming_the_channel(setup, tmp_path):
    env, _, pipeline = setup
    text = pipeline.read_text().replace("backend: claims", "backend: local").replace("instance_type: pool-cpu",
                                                                                    "instance_type: ml.m5.large")
    text = text.replace(f"backend_options: {{root: {tmp_path / 'root'}}}\n", "").replace(
        "instance_count: 1}", "instance_count: 1, inputs: {train: s3://bucket/train}}")
    local = tmp_path / "local.yaml"
    local.write_text(text)
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(local)], capture_output=True, text=True,
                          timeout=600, cwd=str(ROOT), env=env)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "internal error" not in output.lower(), output[-6000:]
    assert "pvc://team/data/train" in output, output[-6000:]


def test_kfp_local_runs_the_train_component_on_a_pvc_channel(setup):
    env, root, pipeline = setup
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "kfp", "run-local", str(pipeline), "--backend",
                           "claims"], capture_output=True, text=True, timeout=600, cwd=str(ROOT), env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "[kfp] pipeline claims-retrain: SUCCEEDED" in done.stdout, output[-6000:]
    assert record(root, "claims-1")["state"] == "NodeLost" and record(root, "claims-1-2")["state"] == "Succeeded"
    assert "read 42 from the claim" in (root / "jobs" / "claims-1-2" / "output.log").read_text()


def test_the_engines_spec_rules_bind_its_jobs_and_the_sagemaker_requests_do_not(setup, tmp_path):
    env, _, pipeline = setup
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(pipeline.read_text().replace("instance_type: pool-cpu", "instance_type: ml.m5.large"))
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(wrong)], capture_output=True, text=True,
                          timeout=600, cwd=str(ROOT), env=env)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "is not a node pool of the claims engine" in output, output[-6000:]
