"""The client factory: adaptive retries really retry throttling, and AWS errors become trainops errors.

Throttling is simulated below the retry layer: a ``before-send`` handler answers the HTTP request itself (a fake
transport), so botocore's real retry handler sees each throttling answer and decides to retry. (botocore's Stubber
answers above that layer, where retries never happen, so it cannot test this.)
"""

from __future__ import annotations

import json

import pytest
from botocore.awsrequest import AWSResponse
from support.sagemaker_shapes import training_description

from trainops.aws.clients import (
    RETRY_SETTINGS,
    advisory_client,
    client_config,
    client_factory_from_session,
    default_client_factory,
    resolve_region,
    translate_client_error,
)
from trainops.backends.sagemaker import training
from trainops.errors import JobFailed, SpecError


class _Raw:
    """The minimal raw-body object botocore's response parsing reads."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_options):
        yield self._body


class FakeTransport:
    """Answers every HTTP request of a client: ``throttles`` throttling errors first, then ``final``."""

    def __init__(self, throttles: int, final: dict, code: str = "ThrottlingException"):
        self.throttles = throttles
        self.final = final
        self.code = code
        self.calls = 0

    def __call__(self, request, **_kwargs):
        self.calls += 1
        if self.calls <= self.throttles:
            body = json.dumps({"__type": self.code, "message": "Rate exceeded"}).encode()
            return AWSResponse(request.url, 400, {"x-amzn-requestid": str(self.calls)}, _Raw(body))
        return AWSResponse(request.url, 200, {"x-amzn-requestid": "ok"}, _Raw(json.dumps(self.final, default=str).encode()))


def _client_with(transport: FakeTransport, monkeypatch, sleeps: list, rate_limited: list):
    import botocore.endpoint
    from botocore.retries.bucket import TokenBucket

    # botocore's retry loop sleeps through time.sleep between attempts, and adaptive mode's client-side rate limiter
    # (a token bucket, which standard mode does not have) blocks before sends: record both instead of waiting.
    monkeypatch.setattr(botocore.endpoint.time, "sleep", sleeps.append)
    monkeypatch.setattr(TokenBucket, "acquire", lambda self, amount=1, block=True: rate_limited.append(amount) or True)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://sagemaker.invalid")
    factory = default_client_factory(region="us-east-1")
    client = factory("sagemaker")
    client.meta.events.register("before-send", transport)
    return factory, client


def test_the_config_uses_adaptive_retries_with_ten_attempts():
    config = client_config()
    assert config.retries == {"mode": "adaptive", "max_attempts": 10}
    assert RETRY_SETTINGS["mode"] == "adaptive"


def test_the_environments_own_retry_settings_win(monkeypatch):
    """AWS_MAX_ATTEMPTS / AWS_RETRY_MODE are boto3's documented settings; an explicit Config would override them."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert client_config().retries == {"mode": "adaptive"}
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    assert client_config().retries == {}
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = default_client_factory(region="us-east-1")("sagemaker")
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}


def test_throttling_is_retried_until_success(monkeypatch):
    description = training_description("digits-1", "InProgress", "Training")
    description["CreationTime"] = "2026-01-02T03:04:05Z"
    transport = FakeTransport(throttles=2, final=description)
    sleeps: list = []
    rate_limited: list = []
    factory, client = _client_with(transport, monkeypatch, sleeps, rate_limited)
    summary = training.describe(factory, "digits-1")
    assert summary.status == "InProgress"
    assert transport.calls == 3  # two throttled answers, then the real one
    assert len(sleeps) == 2  # a backoff before each retry
    assert rate_limited  # the adaptive rate limiter took part (it exists only in adaptive mode)


def test_throttling_that_never_ends_gives_up_after_max_attempts(monkeypatch):
    transport = FakeTransport(throttles=100, final={})
    factory, client = _client_with(transport, monkeypatch, [], [])
    with pytest.raises(JobFailed) as raised:
        training.describe(factory, "digits-1")
    # botocore's retries "max_attempts" counts retries after the first attempt: 1 + 10.
    assert transport.calls == 11
    assert "ThrottlingException" in str(raised.value)


def test_factory_caches_one_client_per_service(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    factory = default_client_factory(region="eu-west-1")
    assert factory("s3") is factory("s3")
    assert factory("s3") is not factory("logs")
    assert factory("logs").meta.region_name == "eu-west-1"


def test_factory_from_a_session_uses_that_session(monkeypatch):
    import boto3

    session = boto3.session.Session(aws_access_key_id="a", aws_secret_access_key="b", region_name="ap-southeast-2")
    factory = client_factory_from_session(session)
    client = factory("sagemaker")
    assert client.meta.region_name == "ap-southeast-2"
    assert client.meta.config.retries["mode"] == "adaptive"


def test_endpoint_comes_from_boto3_configuration(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", "http://127.0.0.1:9")
    factory = default_client_factory(region="us-east-1")
    assert factory("sagemaker").meta.endpoint_url == "http://127.0.0.1:9"


def _client_error(code: str, message: str):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message}}, "CreateTrainingJob")


def test_validation_errors_become_spec_errors_naming_the_field():
    error = translate_client_error(_client_error("ValidationException", "bad value"), "CreateTrainingJob x", "instance_type")
    assert isinstance(error, SpecError)
    assert error.problems[0].path == "instance_type"
    assert "bad value" in str(error)


def test_other_errors_become_job_failed():
    error = translate_client_error(_client_error("AccessDeniedException", "no"), "CreateTrainingJob x")
    assert isinstance(error, JobFailed) and not isinstance(error, SpecError)
    assert "access denied" in str(error)


def test_advisory_clients_try_twice_with_short_timeouts_and_stubbed_factories_fall_back(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    factory = default_client_factory(region="us-east-1")
    advisory = advisory_client(factory, "service-quotas")
    assert advisory is advisory_client(factory, "service-quotas") and advisory is not factory("service-quotas")
    assert advisory.meta.config.retries == {"mode": "standard", "total_max_attempts": 2}
    assert (advisory.meta.config.connect_timeout, advisory.meta.config.read_timeout) == (5, 10)
    plain = factory("sagemaker")
    assert advisory_client(lambda service: plain, "sagemaker") is plain  # a factory without advisory clients


def test_the_region_comes_from_aws_region_too_and_none_at_all_says_every_way_to_set_one(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert resolve_region() is None
    with pytest.raises(SpecError) as raised:
        default_client_factory()("sagemaker")
    assert raised.value.exit_code == 2 and raised.value.problems[0].path == "region"
    for way in ("-o region=", "region: in the spec", "--region", "AWS_REGION", "AWS_DEFAULT_REGION", "aws configure set region",
                "Airflow AWS connection"):
        assert way in str(raised.value)
    monkeypatch.setenv("AWS_REGION", "eu-central-1")  # boto3 itself reads only AWS_DEFAULT_REGION
    assert default_client_factory()("sagemaker").meta.region_name == "eu-central-1"
    (tmp_path / "config").write_text("[default]\nregion = ap-south-1\n")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert resolve_region() == "ap-south-1"
