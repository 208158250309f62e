"""ThrottlingException against a moto server on 127.0.0.1 (issue 26 item 7): moto never throttles, so an event
hook answers the first DescribeTrainingJob attempts with HTTP 400 ThrottlingException before they are sent, as
SageMaker does when an account polls too fast. The clients are trainops' own (adaptive retries, 10 attempts: the
SageMaker backend's and the Airflow connection's alike), so botocore backs off and retries: the train task and the
trigger see no error and the task succeeds. What botocore gives up on is the trigger's and the poke's to back off
(tests/unit/operators/test_operators_throttling.py)."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

from support.airflow_home import REPO, isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.operators.training import DistributedTrainingOperator  # noqa: E402

pytestmark = pytest.mark.system


class Throttle:
    """``before-send`` handler: the next ``count`` DescribeTrainingJob attempts get SageMaker's throttling answer."""

    def __init__(self) -> None:
        self.count = 0
        self.throttled = 0
        self.sent = 0

    def __call__(self, request, **kwargs):
        from botocore.awsrequest import AWSResponse

        if self.count <= 0:
            self.sent += 1
            return None  # sent to moto
        self.count -= 1
        self.throttled += 1
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, Raw(body))


class Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs):
        yield self.body


@pytest.fixture
def throttled(aws_environment, monkeypatch):
    """trainops' client factory on a session whose DescribeTrainingJob attempts the test may throttle; the
    operators and the trigger get it where they would ask the Airflow connection."""
    import boto3

    import trainops.operators.common as common_module
    from trainops.aws.clients import client_factory_from_session
    from trainops.operators import triggers

    throttle = Throttle()
    session = boto3.session.Session(region_name="us-east-1")
    session.events.register("before-send.sagemaker.DescribeTrainingJob", throttle)
    clients = client_factory_from_session(session)
    monkeypatch.setattr(common_module, "aws_client_factory", lambda conn, region: (clients, region or "us-east-1"))
    triggers._FACTORIES.clear()
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    clients("s3").create_bucket(Bucket=bucket)
    yield clients, throttle, bucket
    triggers._FACTORIES.clear()


def spec(bucket: str) -> dict:
    from trainops.steps.train import load_spec

    data = load_spec(str(REPO / "examples" / "specs" / "smddp-p4d.yaml")).to_json_dict()
    data["output_path"] = f"s3://{bucket}/smddp"
    return data


def context(run_id: str) -> dict:
    return {"ti": SimpleNamespace(dag_id="throttled", task_id="train", run_id=run_id, map_index=-1, try_number=1)}


def test_the_clients_retry_adaptively_with_ten_attempts(throttled):
    clients, throttle, bucket = throttled
    retries = clients("sagemaker").meta.config.retries
    assert retries["mode"] == "adaptive" and retries.get("total_max_attempts", retries.get("max_attempts")) >= 10


def test_a_train_task_whose_looks_are_throttled_still_succeeds_with_one_job(throttled):
    clients, throttle, bucket = throttled
    operator = DistributedTrainingOperator(task_id="train", spec=spec(bucket), backend="sagemaker", check_interval=0,
                                           stream_logs=False)
    throttle.count = 3  # three throttled attempts in a row: botocore retries the fourth
    result = operator.execute(context("manual__throttled"))
    assert result["status"] == "Completed"
    assert throttle.throttled == 3 and throttle.sent >= 1
    jobs = clients("sagemaker").list_training_jobs(NameContains=result["job_name"])["TrainingJobSummaries"]
    assert [job["TrainingJobName"] for job in jobs] == [result["job_name"]]


def test_the_trigger_waits_through_throttled_looks_and_the_task_resumes_with_success(throttled):
    import asyncio

    from trainops.operators.triggers import JobTrigger

    clients, throttle, bucket = throttled
    operator = DistributedTrainingOperator(task_id="train", spec=spec(bucket), backend="sagemaker", check_interval=0,
                                           stream_logs=False, wait_for_completion=False)
    submitted = operator.execute(context("manual__trigger"))  # moto's job: created Completed
    handle = {"backend": "sagemaker", "job_name": submitted["job_name"], "region": "us-east-1", "created": True}
    throttle.count = 4

    async def first_event():
        async for event in JobTrigger(handle, poll_seconds=0, stream_logs=False).run():
            return event.payload

    event = asyncio.run(first_event())
    assert event["status"] == "success", event
    assert throttle.throttled == 4
    result = DistributedTrainingOperator(task_id="train", spec=spec(bucket), backend="sagemaker",
                                         stream_logs=False).execute_complete(context("manual__trigger"), event)
    assert (result["status"], result["job_name"]) == ("Completed", submitted["job_name"])
