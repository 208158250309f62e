"""The sagemaker backend passes the backend conformance suite (`trainops.backends.testing`) on a moto server.

The backend is the one a user has (its defaults: the preflight on, the trainops launcher, its code uploaded to S3),
pointed at moto by ``AWS_ENDPOINT_URL``. moto alone runs nothing (a job reads Completed at once, no logs, no
StopTrainingJob), so `support.moto_training_jobs.TrainingService` stands in for the service behind the API: it runs
each job's program from the code the backend uploaded, writes its lines to CloudWatch Logs and answers
StopTrainingJob. A failed look is a DescribeTrainingJob that fails (`LookFailed`), through the clients the backend
was given."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support.moto_server import REGION
from support.moto_training_jobs import TrainingService
from support.sagemaker_shapes import ROLE_ARN

from trainops.backends import get_backend
from trainops.backends.looks import LookFailed
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/conformance:1"


@pytest.fixture(scope="module")
def service(moto_endpoint, tmp_path_factory) -> Iterator[str]:
    """boto3 pointed at the module's moto server for every test of the class (its fixture outlives one test), and
    the training service behind it; yields a bucket for the jobs' code and models."""
    with pytest.MonkeyPatch.context() as environment:
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            environment.delenv(name, raising=False)
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                            ("AWS_DEFAULT_REGION", REGION), ("AWS_REGION", REGION),
                            ("AWS_ENDPOINT_URL", moto_endpoint), ("AWS_CONFIG_FILE", "/dev/null"),
                            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")):
            environment.setenv(name, value)
        training = TrainingService(moto_endpoint, tmp_path_factory.mktemp("sagemaker-jobs")).install()
        try:
            from trainops.aws.clients import default_client_factory

            bucket = f"conformance-{uuid.uuid4().hex[:12]}"
            default_client_factory(region=REGION)("s3").create_bucket(Bucket=bucket)
            yield bucket
        finally:
            training.uninstall()


class FailingLooks:
    """A client factory whose SageMaker client's DescribeTrainingJob fails (`LookFailed`) while ``failing`` says so:
    the first ``failing`` calls (None: every one; 0: none)."""

    def __init__(self, factory: Any):
        self.factory = factory
        self.failing: int | None = 0
        self.failed = [0]
        self.advisory = factory.advisory  # the preflight's fast-failing reads, as the backend's own clients have them

    def __call__(self, service: str) -> Any:
        client = self.factory(service)
        if service != "sagemaker":
            return client
        outer = self

        class Client:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def describe_training_job(self, **arguments: Any) -> Any:
                if outer.failing is None or outer.failed[0] < outer.failing:
                    outer.failed[0] += 1
                    raise LookFailed("the conformance suite failed this look on purpose")
                return client.describe_training_job(**arguments)

        return Client()


class SageMakerHarness(Harness):
    def __init__(self, factory: FailingLooks, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.factory = factory

    @contextlib.contextmanager
    def failing_looks(self, count: int | None) -> Iterator[list[int]]:
        self.factory.failing, self.factory.failed[0] = count, 0
        try:
            yield self.factory.failed
        finally:
            self.factory.failing = 0


class TestSageMakerConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, service, tmp_path_factory) -> Harness:
        from trainops.aws.clients import default_client_factory

        factory = FailingLooks(default_client_factory(region=REGION))
        backend = get_backend("sagemaker", region=REGION, client_factory=factory, poll_seconds=0.5)
        return SageMakerHarness(factory, backend, tmp_path_factory.mktemp("sagemaker-code"),
                                options={"preflight": True}, bad_options={"colour": "blue"},
                                spec_fields={"role": ROLE_ARN, "output_path": f"s3://{service}/output",
                                             "image_uri": IMAGE}, limit=180.0)

    def test_what_moto_lacks_is_said_not_hidden(self, harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
        """moto has no Service Quotas for SageMaker (ListServiceQuotas answers 500): the preflight, on by default,
        says the quotas were not checked, as it says to a user whose quotas cannot be read, and the job runs."""
        import logging

        from trainops.backends.states import JobStatus

        with caplog.at_level(logging.WARNING, logger="trainops.backends.sagemaker.preflight"):
            handle = harness.submit("succeed", harness.name("quotas"))
        assert [record for record in caplog.records if "service quotas not checked" in record.getMessage()]
        assert harness.backend.wait(handle).status is JobStatus.COMPLETED
