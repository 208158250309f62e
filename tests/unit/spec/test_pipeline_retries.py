"""The train step's retry budgets in a pipeline file: defaults, and bad budgets named by field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainops.spec.pipeline import TrainStep


def test_default_budgets_retry_infrastructure_only():
    assert TrainStep(spec="train.yaml").retries == {"infrastructure": 2, "user": 0}


@pytest.mark.parametrize("retries, message", [
    ({"infra": 3}, "unknown key(s) infra"),
    ({"user": "lots"}, "valid number"),
    ({"infrastructure": 50}, "between 0 and 20"),
])
def test_bad_budgets_are_refused_naming_the_key(retries, message):
    with pytest.raises(ValidationError, match="retries") as error:
        TrainStep(spec="train.yaml", retries=retries)
    assert message in str(error.value)
