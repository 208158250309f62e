"""The shared pieces of spec policy: secret-looking names, shell metacharacters, identifier formats, error plumbing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainops.errors import Problem
from trainops.spec.base import (
    CHANNEL_NAME,
    ENV_NAME,
    FILE_SYSTEM_ID,
    JOB_NAME,
    REGION,
    ROLE_ARN,
    S3_URI,
    SECURITY_GROUP_ID,
    SUBNET_ID,
    CoreModel,
    looks_secret,
    raise_problems,
    relocated,
    shell_metacharacter_problem,
)


@pytest.mark.parametrize("name", [
    "hf_token", "HF_TOKEN", "token", "github_token", "auth_token", "access_token", "AccessToken", "hfToken",
    "refresh_token_path", "password", "DB_PASSWORD", "db_passwd", "passphrase", "secret", "client_secret",
    "aws_secret_access_key", "AWS_ACCESS_KEY_ID", "apiKey", "APIKEY", "api_key", "wandbApiKey", "private_key",
    "credentials", "session_token",
])
def test_secret_looking_names(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", [
    "tokenizer_name", "max_tokens", "num_tokens", "pad_token_id", "eos_token", "bos_token", "max_token_length",
    "token_budget", "tokens_per_batch", "learning_rate", "key_dim", "passwordless", "sort_key", "secretary_count",
    "",
])
def test_names_that_are_not_secrets(name):
    assert not looks_secret(name)


@pytest.mark.parametrize("text, shown", [
    ("-x A; rm -rf /", "';'"), ("a && b", "'&'"), ("a | b", "'|'"), ("`id`", "'`'"), ("$HOME", "'$'"),
    ("> out", "'>'"), ("< in", "'<'"), ("$(id)", "'('"), ("{a,b}", "'{'"), ("a\nb", "'\\n'"), ("*.py", "'*'"),
    ("a\\b", "'\\\\'"), ("!x", "'!'"), ("a?", "'?'"),
])
def test_shell_metacharacters_are_named(text, shown):
    problem = shell_metacharacter_problem("distribution.custom_mpi_options", text)
    assert problem is not None
    assert problem.path == "distribution.custom_mpi_options"
    assert shown in problem.message
    assert "shlex" in problem.message


@pytest.mark.parametrize("text", ["", "-x NCCL_DEBUG=INFO", "--mca btl_tcp_if_exclude lo,docker0",
                                  "-x FOO='a b' -verbose", "-x PATH=/usr/bin:/bin"])
def test_plain_mpi_options_pass(text):
    assert shell_metacharacter_problem("x", text) is None


@pytest.mark.parametrize("pattern, good, bad", [
    (S3_URI, ["s3://bucket", "s3://my.bucket-1/a/b/", "s3://abc/key with spaces"],
     ["s3://b", "s3://Bucket/x", "s3:/bucket", "http://bucket/x", "s3://bucket\n", "s3://-bucket/x"]),
    (ROLE_ARN, ["arn:aws:iam::111122223333:role/Name", "arn:aws-cn:iam::111122223333:role/path/Name+x=,.@-"],
     ["arn:aws:iam::1111:role/x", "arn:aws:iam::111122223333:user/x", "role/x",
      "arn:aws:iam::111122223333:role/x\n"]),
    (JOB_NAME, ["a", "job-1", "A1-b-2", "a" * 63], ["-a", "a-", "a_b", "a b", "", "abc\n"]),
    (REGION, ["us-east-1", "eu-west-3", "us-gov-west-1", "us-iso-east-1", "us-isob-east-1", "ap-southeast-7"],
     ["us-east", "US-EAST-1", "nowhere", "us-east-1\n", "us-east-1a"]),
    (SUBNET_ID, ["subnet-0a1b2c3d", "subnet-0a1b2c3d4e5f67890"], ["subnet-xyz", "sn-0a1b2c3d", "subnet-0a1b2c3d\n"]),
    (SECURITY_GROUP_ID, ["sg-0a1b2c3d", "sg-0a1b2c3d4e5f67890"], ["sg-zz", "sg-0a1b2c3d\n", "group-0a1b2c3d"]),
    (FILE_SYSTEM_ID, ["fs-0123456789abcdef0", "fs-01234567"], ["fs-xyz", "fs-0123", "fs-01234567\n"]),
    (ENV_NAME, ["A", "_x", "NCCL_DEBUG", "a1"], ["1A", "A-B", "", "A\n"]),
    (CHANNEL_NAME, ["train", "a.b_c-d", "x" * 64], ["", "a/b", "x" * 65, "train\n"]),
])
def test_identifier_formats(pattern, good, bad):
    assert [value for value in good if not pattern.match(value)] == []
    assert [value for value in bad if pattern.match(value)] == []


class _Inner(CoreModel):
    value: int = 0


class _Outer(CoreModel):
    inner: _Inner = _Inner()
    tags: list[str] = []


def test_core_model_forbids_unknown_keys_and_validates_assignment():
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate({"inner": {"valeu": 1}})
    assert caught.value.errors()[0]["type"] == "extra_forbidden"
    assert caught.value.errors()[0]["loc"] == ("inner", "valeu")
    outer = _Outer()
    with pytest.raises(ValidationError):
        outer.tags = "not a list"


def test_raise_problems_reports_every_problem_at_its_path():
    with pytest.raises(ValidationError) as caught:
        raise_problems("t", [Problem("a.b", "first"), Problem("c", "second {braces} kept"), Problem("", "whole")],
                       None)
    errors = caught.value.errors()
    assert [(error["loc"], error["msg"]) for error in errors] == [
        (("a", "b"), "first"), (("c",), "second {braces} kept"), ((), "whole")]
    assert {error["type"] for error in errors} == {"trainops_rule"}


def test_raise_problems_without_problems_returns():
    assert raise_problems("t", [], None) is None


def test_relocated_moves_locations_and_keeps_kinds_and_messages():
    try:
        _Outer.model_validate({"inner": {"value": "x", "extra": 1}, "tags": [1]})
    except ValidationError as error:
        moved = relocated(error, lambda loc: ("prefix", *loc))
    errors = {error["loc"]: error for error in moved.errors()}
    assert errors[("prefix", "inner", "value")]["type"] == "int_parsing"
    assert errors[("prefix", "inner", "extra")]["type"] == "extra_forbidden"
    assert errors[("prefix", "tags", 0)]["type"] == "string_type"


def test_relocated_keeps_custom_errors():
    try:
        raise_problems("t", [Problem("sdk.x", "a message with {braces}")], None)
    except ValidationError as error:
        moved = relocated(error, lambda loc: loc[1:])
    (item,) = moved.errors()
    assert item["loc"] == ("x",)
    assert item["type"] == "trainops_rule"
    assert item["msg"] == "a message with {braces}"
    assert item["ctx"]["message"] == "a message with {braces}"
