"""The operators against SageMaker and S3 on a moto server: what a training task really submits (code uploaded, the
rendered request stored), a retried task re-attaching instead of creating a second job, and a model package.

moto creates training jobs already Completed, so nothing defers here; the deferrable path is in
test_airflow_deferral.py and the trigger's unit tests.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.operators.register import RegisterModelOperator  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402

pytestmark = pytest.mark.system


@pytest.fixture
def moto_aws(aws_clients, monkeypatch):
    """Operators get the moto-bound client factory where they would ask the Airflow connection for one."""
    import trainops.operators.common as common_module  # register, evaluate and stage build theirs lazily there

    # every client of the operators and the trigger comes from this one function (the connection's clients)
    monkeypatch.setattr(common_module, "aws_client_factory", lambda conn, region: (aws_clients, region or "us-east-1"))
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    aws_clients("s3").create_bucket(Bucket=bucket)
    return aws_clients, bucket


def ctx(try_number: int) -> dict:
    return {"ti": SimpleNamespace(dag_id="sagemaker_smddp_p4d", task_id="train", run_id="manual__moto",
                                  map_index=-1, try_number=try_number)}


def test_a_training_task_uploads_submits_and_a_retry_reattaches(moto_aws):
    clients, bucket = moto_aws
    from trainops.steps.train import load_spec

    # The SMDDP example (2 x ml.p4d.24xlarge), writing into this test's bucket.
    spec = load_spec(str(REPO / "examples" / "specs" / "smddp-p4d.yaml")).to_json_dict()
    spec["output_path"] = f"s3://{bucket}/smddp"

    def run(try_number: int) -> dict:
        op = DistributedTrainingOperator(task_id="train", spec=spec, backend="sagemaker", check_interval=0,
                                         stream_logs=False)
        return op.execute(ctx(try_number))

    first = run(1)
    name = first["job_name"]
    assert (first["status"], first["reattached"]) == ("Completed", False)
    stored = clients("sagemaker").describe_training_job(TrainingJobName=name)
    assert stored["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert stored["ResourceConfig"]["InstanceCount"] == 2
    uploaded = clients("s3").list_objects_v2(Bucket=bucket, Prefix=f"smddp/{name}/trainops/code/")
    assert any(item["Key"].endswith("train.py") for item in uploaded.get("Contents", []))
    retry = run(2)
    assert (retry["job_name"], retry["reattached"]) == (name, True)
    # The moto server is shared by the session: look for this job and its suffixed copies (<name>-2), not for every
    # job of the example spec another test may have created.
    jobs = clients("sagemaker").list_training_jobs(NameContains=name)["TrainingJobSummaries"]
    assert [job["TrainingJobName"] for job in jobs] == [name], "the retry created a second job"


def test_registering_a_model_package(moto_aws):
    clients, bucket = moto_aws
    artifact = f"s3://{bucket}/digits/output/model.tar.gz"
    clients("s3").put_object(Bucket=bucket, Key="digits/output/model.tar.gz", Body=b"model")
    group = f"digits-{uuid.uuid4().hex[:8]}"
    op = RegisterModelOperator(task_id="register", backend="sagemaker", model_artifact=artifact,
                               metrics={"accuracy": 0.97}, group=group, image_uri="image:1", job_name="digits-x")
    entry = op.execute(ctx(1))
    assert (entry["backend"], entry["group"], entry["version"], entry["approval_status"]) == (
        "sagemaker", group, 1, "Approved")
    assert entry["location"].startswith("arn:aws:sagemaker:")
    described = clients("sagemaker").describe_model_package(ModelPackageName=entry["location"])
    assert described["ModelPackageGroupName"] == group
    # the task's extra link opens the package it registered, in the region of its ARN
    from trainops.operators.links import ModelVersionLink

    link = ModelVersionLink().get_link(op, ti_key=None)
    region = entry["location"].split(":")[3]
    assert link.startswith(f"https://console.aws.amazon.com/sagemaker/home?region={region}#/model-packages/arn%3Aaws")
