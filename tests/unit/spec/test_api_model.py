"""The spec-level API limits read from the generated model (trainops.spec.api_model): tags, the warm-pool range."""

from __future__ import annotations

import pytest

from trainops.errors import SpecError
from trainops.spec import parse_job_spec
from trainops.spec.api_model import matches_api_pattern, request_constraints
from trainops.spec.job import KEEP_ALIVE_LIMIT

BASE = {"entry_point": "train.py", "instance_type": "ml.c5.xlarge"}


def problems(**fields):
    with pytest.raises(SpecError) as caught:
        parse_job_spec({**BASE, **fields})
    return {problem.path: problem.message for problem in caught.value.problems}


@pytest.mark.parametrize("key", ["team#1", "a;b", "x\ny", "emoji\U0001f600"])
def test_tag_keys_outside_the_api_pattern(key):
    message = problems(tags={key: "v"})["tags.0.Key"]
    assert "letters, digits, spaces and _ . : / = + - @ only" in message


def test_tag_values_outside_the_pattern_and_reserved_prefix():
    assert "letters, digits" in problems(tags=[{"Key": "team", "Value": "a|b"}])["tags.0.Value"]
    assert "aws: prefix is reserved" in problems(tags={"AWS:createdBy": "me"})["tags.0.Key"]
    assert "given twice" in problems(tags=[{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}])["tags"]


def test_unicode_letters_digits_and_spaces_are_tag_text():
    job = parse_job_spec({**BASE, "tags": {"équipe vision": "Zürich 7", "cost:center/x=y+z@w_-.": "٣"}})
    assert [tag.key for tag in job.tags] == ["équipe vision", "cost:center/x=y+z@w_-."]


def test_keep_alive_range_is_the_service_model_s():
    assert KEEP_ALIVE_LIMIT == request_constraints()["ResourceConfig.KeepAlivePeriodInSeconds"]["max"] == 21600
    assert parse_job_spec({**BASE, "keep_alive_period_in_seconds": 21600}).keep_alive_period_in_seconds == 21600
    assert "keep_alive_period_in_seconds" in problems(keep_alive_period_in_seconds=21601)


def test_java_patterns():
    assert matches_api_pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "job-1")
    assert not matches_api_pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "job-1-")
    assert matches_api_pattern(r"arn:[\p{Alnum}\-]+:lambda:x", "arn:aws-cn:lambda:x")
    assert not matches_api_pattern(".*", "two\nlines")
