"""The local run's check of what it reads and writes in S3 (`trainops.backends.local.preflight.check_s3`), against the
moto server: each prefix listed once with a client made for a look (the advisory settings), a problem per field."""

from __future__ import annotations

import uuid

import pytest

from trainops.backends.local.preflight import _s3_client, check_s3


@pytest.fixture
def request_(aws_environment):
    import boto3

    bucket = f"preflight-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3")
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="train/part-0", Body=b"x")
    channels = {"train": f"s3://{bucket}/train/", "empty": f"s3://{bucket}/none/"}
    return {"InputDataConfig": [{"ChannelName": name, "DataSource": {"S3DataSource": {"S3Uri": uri}}}
                                for name, uri in channels.items()],
            "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}-missing/out"}}


def _said(problems):
    return {problem.path: problem.message for problem in problems}


def test_an_empty_prefix_and_a_missing_bucket_are_said_by_field(request_):
    said = _said(check_s3(request_, {}, None))
    assert sorted(said) == ["inputs.empty", "output_path"], said
    assert said["inputs.empty"].startswith("no objects under s3://")
    assert "cannot be listed (NoSuchBucket" in said["output_path"]


def test_a_given_factory_lends_its_advisory_client(request_):
    import boto3

    from trainops.aws.clients import client_factory_from_session

    factory = client_factory_from_session(boto3.session.Session())
    looks = []
    advisory = factory.advisory
    factory.advisory = lambda service: looks.append(service) or advisory(service)  # type: ignore[method-assign]
    assert sorted(_said(check_s3(request_, {}, factory))) == ["inputs.empty", "output_path"]
    assert looks == ["s3"]


def test_the_default_client_fails_fast(aws_environment):
    config = _s3_client(None).meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}
    assert (config.connect_timeout, config.read_timeout) == (5, 10)
