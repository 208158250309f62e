"""The kubernetes backend's HyperPodPyTorchJob against SageMaker HyperPod's published model (PyPI ``sagemaker-hyperpod``
3.12.0, issue 44 item 2): each rendered object, read by the HyperPod SDK in its own venv (`support.k8s_hyperpod_venv`,
built once and cached: the package pins its own pytest, ruff, click and requests and a newer kubernetes client, so it
cannot share trainops' venv) and written back as its ``HyperPodPytorchJob.create`` would send it, is the object
trainops rendered: no field the model lacks, none of the wrong type, none dropped, and the model's defaults given.
Two broken objects show the check refuses what it should."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import k8s_hyperpod_venv
from support.cached_venv import clean_environment

from trainops.backends import get_backend
from trainops.cli import main
from trainops.spec.job import JobSpec

pytestmark = [pytest.mark.system, pytest.mark.timeout(1500)]

ORACLE = Path(__file__).resolve().parents[1] / "support" / "k8s_hyperpod_oracle.py"
SHARED = {"shared_dir": "/fsx/me/trainops", "shared_pvc": "fsx-claim", "namespace": "team-a"}


@pytest.fixture(scope="module")
def oracle() -> Path:
    """The oracle venv's interpreter (built on first use: about a minute and 220 MB, once per machine)."""
    return k8s_hyperpod_venv.build()


def _sdk_answers(python: Path, rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = subprocess.run([str(python), str(ORACLE)], input=json.dumps(rendered), capture_output=True, text=True,
                          env=clean_environment(), cwd="/", timeout=600, check=True)
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def _spec(**fields: object) -> JobSpec:
    return JobSpec.model_validate({"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
                                   "instance_count": 2, "max_run": 7200, "image_uri": "example.org/train:1",
                                   "environment": {"MODE": "fast", "WANDB_API_KEY": "s3cr3t"},
                                   "hyperparameters": {"epochs": 3}, **fields})


def test_the_rendered_hyperpod_jobs_are_what_the_hyperpod_sdk_would_send(oracle: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    backend = get_backend("kubernetes", options=SHARED)
    rendered = [
        backend.render_request(_spec(), "digits-1", options={"flavour": "hyperpod"}),
        backend.render_request(_spec(), "digits-2", options={
            "flavour": "hyperpod", "queue": "team-a-queue", "priority_class": "high", "service_account": "trainer",
            "node_selector": {"pool": "gpu"}, "max_retry": 0, "processes_per_host": 4,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoExecute",
                             "tolerationSeconds": 60}]}),
        backend.render_request(_spec(instance_type="ml.trn1.32xlarge", instance_count=4), "neuron-1",
                               options={"flavour": "hyperpod"}),
        backend.render_request(_spec(instance_type="ml.m5.xlarge", instance_count=1), "cpu-1",
                               options={"flavour": "hyperpod"}),
    ]
    spec_file = tmp_path / "job.yaml"  # and what the command line prints
    spec_file.write_text("entry_point: train.py\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n"
                         "image_uri: example.org/train:1\nmax_run: 600\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    assert main(["render", str(spec_file), "--backend", "kubernetes", "--job-name", "digits-3",
                 "-o", "flavour=hyperpod", "-o", "shared_dir=/fsx/t", "-o", "shared_pvc=fsx",
                 "-o", "namespace=ml"]) == 0
    out = capsys.readouterr().out
    rendered.append(json.loads(out[out.index("{"):]))
    # Two broken objects: a field the pod's container does not have, and a spec field the model would drop.
    misspelled = copy.deepcopy(rendered[0])
    misspelled["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["volumeMount"] = []
    dropped = copy.deepcopy(rendered[0])
    dropped["spec"]["replicaSpec"] = dropped["spec"].pop("replicaSpecs")
    *answers, refused, lost = _sdk_answers(oracle, [*rendered, misspelled, dropped])
    for mine, answer in zip(rendered, answers, strict=True):
        assert "error" not in answer, (mine["metadata"]["name"], answer)
        assert answer["sent"] == mine, mine["metadata"]["name"]
    assert "volumeMount" in refused["error"]
    assert "error" in lost or lost["sent"] != dropped
