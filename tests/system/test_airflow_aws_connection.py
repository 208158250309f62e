"""The Airflow AWS connection decides where trainops' AWS calls go: a connection whose extra holds ``endpoint_url``
(moto on 127.0.0.1 here; a VPC endpoint or LocalStack for users) and its own region and credentials is reached by the
training, register and stage operators and by the deferrable trigger, with nothing patched.

The connection is an ``AIRFLOW_CONN_AWS_MOTO`` environment variable (JSON), the way a deployment's secrets backend
or environment provides it. boto3's own endpoint variable points at a closed port, so a client that ignored the
connection would fail instead of silently reaching moto.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from types import SimpleNamespace

from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

pytestmark = pytest.mark.system

CONN_ID = "aws_moto"
#: Nothing listens here: the default endpoint a client would use if it ignored the connection.
DEAD_ENDPOINT = "http://127.0.0.1:9"


@pytest.fixture
def moto_connection(monkeypatch, moto_endpoint):
    """``aws_moto``: moto's endpoint, region and test credentials, all in the connection; boto3's defaults wrong."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    connection = {"conn_type": "aws", "login": "testing", "password": "testing",
                  "extra": {"endpoint_url": moto_endpoint, "region_name": "us-east-1",
                            "config_kwargs": {"connect_timeout": 5, "retries": {"mode": "standard",
                                                                                "max_attempts": 2}}}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(connection))
    return moto_endpoint


@pytest.fixture
def moto_bucket(moto_connection):
    from trainops.operators.common import aws_client_factory

    factory, region = aws_client_factory(CONN_ID, None)
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    factory("s3").create_bucket(Bucket=bucket)
    return factory, bucket


def ctx(task_id: str = "train") -> dict:
    return {"ti": SimpleNamespace(dag_id="connection_test", task_id=task_id, run_id=f"manual__{uuid.uuid4().hex}",
                                  map_index=-1, try_number=1)}


def test_clients_take_the_connections_endpoint_region_and_botocore_config(moto_connection):
    from trainops.operators.common import aws_client_factory

    factory, region = aws_client_factory(CONN_ID, None)
    client = factory("sagemaker")
    assert region == "us-east-1"
    assert client.meta.endpoint_url == moto_connection and client.meta.region_name == "us-east-1"
    assert client.meta.config.connect_timeout == 5
    # the connection's retries win over trainops' adaptive 10 (botocore counts the first call: 2 retries = 3)
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert factory("sagemaker") is client  # one client per service
    # an explicit region wins over the connection's
    other, other_region = aws_client_factory(CONN_ID, "eu-west-1")
    assert other_region == "eu-west-1" and other("s3").meta.region_name == "eu-west-1"


def test_a_training_task_reaches_the_connections_endpoint(moto_bucket, caplog):
    factory, bucket = moto_bucket
    caplog.set_level("WARNING", logger="trainops")
    from trainops.operators.training import DistributedTrainingOperator
    from trainops.steps.train import load_spec

    spec = load_spec(str(REPO / "examples" / "specs" / "smddp-p4d.yaml")).to_json_dict()
    spec["output_path"] = f"s3://{bucket}/smddp"
    spec.pop("region", None)
    op = DistributedTrainingOperator(task_id="train", spec=spec, backend="sagemaker", check_interval=0,
                                     stream_logs=False, aws_conn_id=CONN_ID)
    result = op.execute(ctx())
    assert (result["status"], result["region"]) == ("Completed", "us-east-1")
    described = factory("sagemaker").describe_training_job(TrainingJobName=result["job_name"])
    assert described["ResourceConfig"]["InstanceCount"] == 2
    uploaded = factory("s3").list_objects_v2(Bucket=bucket, Prefix=f"smddp/{result['job_name']}/")
    assert uploaded.get("KeyCount", 0) > 0  # the code went to moto's S3 through the connection too
    # The preflight ran with the default settings, through the connection: moto has no SageMaker quotas (a note).
    assert ("preflight: the account's service quotas not checked: servicequotas:ListServiceQuotas failed (500: 500 "
            "Internal Server Error)") in caplog.messages


def test_register_and_stage_reach_the_connections_endpoint(moto_bucket, tmp_path):
    factory, bucket = moto_bucket
    from trainops.operators.register import RegisterModelOperator
    from trainops.operators.stage import StageDataOperator

    factory("s3").put_object(Bucket=bucket, Key="digits/output/model.tar.gz", Body=b"model")
    factory("s3").put_object(Bucket=bucket, Key="data/train/part-0.csv", Body=b"1,2,3\n")
    group = f"digits-{uuid.uuid4().hex[:8]}"
    entry = RegisterModelOperator(task_id="register", backend="sagemaker", aws_conn_id=CONN_ID,
                                  model_artifact=f"s3://{bucket}/digits/output/model.tar.gz",
                                  metrics={"accuracy": 0.97}, group=group, image_uri="image:1",
                                  job_name="digits-x").execute(ctx("register"))
    assert entry["location"].startswith("arn:aws:sagemaker:us-east-1:")
    assert factory("sagemaker").describe_model_package(
        ModelPackageName=entry["location"])["ModelPackageGroupName"] == group

    report = StageDataOperator(task_id="stage", source=f"s3://{bucket}/data/train/", aws_conn_id=CONN_ID,
                               destination=str(tmp_path / "train")).execute(ctx("stage"))
    assert report["files_copied"] == 1
    assert (tmp_path / "train" / "part-0.csv").read_bytes() == b"1,2,3\n"


def test_the_trigger_reaches_the_connections_endpoint(moto_bucket):
    factory, bucket = moto_bucket
    from trainops.operators.triggers import JobTrigger

    name = f"conn-{uuid.uuid4().hex[:10]}"
    factory("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/trainops-test",
        AlgorithmSpecification={"TrainingImage": "image:1", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/out"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 600})
    # the trigger as the triggerer rebuilds it: from its serialized form, in another event loop
    handle = {"backend": "sagemaker", "job_name": name, "region": None}  # the connection names the region
    classpath, kwargs = JobTrigger(handle, aws_conn_id=CONN_ID, poll_seconds=0).serialize()
    trigger = JobTrigger(**kwargs)

    async def first_event():
        async for event in trigger.run():
            return event.payload

    event = asyncio.run(first_event())
    assert (event["status"], event["job_name"], event["region"]) == ("success", name, "us-east-1"), event
