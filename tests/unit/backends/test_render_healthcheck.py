"""The spec's health_check reaches the container as TRAINOPS_HEALTHCHECK (trainops launcher), or not at all, so the
runtime's default (on for multi-node GPU jobs on SageMaker) applies."""

from __future__ import annotations

import pytest

from trainops.backends.request.render import render
from trainops.spec import parse_job_spec

BASE = {"role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1", "entry_point": "train.py",
        "framework_version": "2.3.0", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
        "output_path": "s3://bucket/out"}


@pytest.mark.parametrize("value, expected", [(True, "1"), (False, "0"), (None, None)])
def test_health_check_field_sets_the_runtime_variable(value, expected):
    fields = dict(BASE) if value is None else {**BASE, "health_check": value}
    request = render(parse_job_spec(fields), job_name="j-1", launcher="trainops")
    assert request.get("Environment", {}).get("TRAINOPS_HEALTHCHECK") == expected


def test_health_check_must_be_a_boolean():
    from trainops.errors import SpecError

    with pytest.raises(SpecError, match="health_check"):
        parse_job_spec({**BASE, "health_check": "sometimes"})
