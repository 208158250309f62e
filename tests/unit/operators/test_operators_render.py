"""RenderTrainingJobOperator: the example specs' requests, shown without any AWS call, under the training task's
job name, with secrets masked."""

from __future__ import annotations

import json
import socket
from types import SimpleNamespace

from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowFailException  # noqa: E402

from trainops.operators.render import RenderTrainingJobOperator  # noqa: E402
from trainops.spec.names import deterministic_job_name  # noqa: E402

SPECS = REPO / "examples" / "specs"
CONTEXT = {"ti": SimpleNamespace(dag_id="sagemaker_example", task_id="render", run_id="manual__1", map_index=-1)}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the dry run opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def render(spec_file: str, **options) -> dict:
    op = RenderTrainingJobOperator(task_id="render", spec=str(SPECS / spec_file), for_task_id="train", **options)
    return op.execute(CONTEXT)


def test_smddp_on_two_p4d():
    summary = render("smddp-p4d.yaml")
    assert (summary["instance_type"], summary["instance_count"]) == ("ml.p4d.24xlarge", 2)
    assert summary["distribution"]["type"] == "smddp"
    assert summary["channels"]["train"] == "s3://example-training-data/imagenet/train/"
    # The name the training task of the same run will use (same base, same dag/task/run/map index).
    assert summary["job_name"] == deterministic_job_name("smddp-p4d", "sagemaker_example", "train", "manual__1", -1)


def test_smp_v2_on_p5_is_spot_with_max_wait_and_masks_secrets(capsys):
    summary = render("smp-v2-p5.yaml")
    assert summary["instance_type"] == "ml.p5.48xlarge"
    assert summary["distribution"]["type"] == "smp"
    assert summary["distribution"]["parameters"]["tensor_parallel_degree"] == 2
    assert summary["spot"] is True and summary["max_wait_seconds"] == 518400
    assert "smdistributed-modelparallel" in summary["training_image"]
    log = capsys.readouterr().out
    assert "hf_exampleexampleexample" not in log and '"HF_TOKEN": "****"' in log
    assert "hf_exampleexampleexample" not in json.dumps(summary)


def test_torchrun_on_trn1_reads_fsx_inside_the_vpc():
    summary = render("torchrun-trn1-fsx.yaml")
    assert (summary["instance_type"], summary["instance_count"]) == ("ml.trn1.32xlarge", 2)
    assert summary["distribution"]["type"] == "torch_distributed"
    assert summary["channels"]["train"] == "FSxLustre:fs-0123456789abcdef0/fsx1a2b3c/bert/train (ro)"
    assert summary["vpc"] == {"SecurityGroupIds": ["sg-0a1b2c3d4e5f67890"], "Subnets": ["subnet-0a1b2c3d4e5f67890"]}
    assert "neuronx" in summary["training_image"]


def test_the_toolkit_launcher_shows_the_sdk_hyperparameters():
    summary = render("smddp-p4d.yaml", launcher="toolkit")
    assert summary["launcher"] == "toolkit"
    assert summary["distribution"]["sagemaker_distributed_dataparallel_enabled"] == "true"


def test_a_spec_sagemaker_cannot_run_fails_naming_each_field(tmp_path):
    spec = tmp_path / "local-only.yaml"
    spec.write_text("name: local\nentry_point: train.py\ninstance_type: ml.m5.large\n")
    with pytest.raises(AirflowFailException) as raised:
        RenderTrainingJobOperator(task_id="render", spec=str(spec)).execute(CONTEXT)
    for field in ("role", "output_path"):
        assert field in str(raised.value)
