"""trainops against the SageMaker SDK v3's ModelTrainer (goldens/render_v3.json, captured by generate_v3.py from
sagemaker 3.27.0): every case agrees, or differs by a rule of adjudications.V3_RULES that docs/spec.md's SDK v3 table
or its API-limits table explains; every rule settles a case."""

from __future__ import annotations

import json

import pytest

from differential.adjudications import V3_RULES
from differential.compare import V3_RENDER_GOLDEN

GOLDEN = json.loads(V3_RENDER_GOLDEN.read_text())


@pytest.fixture(scope="module")
def verdicts():
    from differential.v3_compare import judge_v3

    return [judge_v3(case) for case in GOLDEN["cases"]]


def test_every_v3_case_agrees_or_is_adjudicated(verdicts):
    disagreements = [(verdict.case_id, verdict.detail) for verdict in verdicts if verdict.kind == "disagree"]
    assert not disagreements
    assert len(verdicts) >= 30 and sum(verdict.kind == "agree" for verdict in verdicts) >= 25


def test_every_v3_rule_settles_a_case(verdicts):
    used = {verdict.adjudication for verdict in verdicts if verdict.kind == "adjudicated"}
    assert used == {rule.name for rule in V3_RULES}


def test_the_golden_is_v3_s_and_holds_its_encoding():
    assert GOLDEN["sdk"].startswith("sagemaker 3.")
    case = next(case for case in GOLDEN["cases"] if case["id"] == "v3-hyperparameters")
    assert case["oracle"]["request"]["HyperParameters"]["name"] == "[1,2]"  # v3 sends a string as it is
    assert case["oracle"]["request"]["HyperParameters"]["amp"] == "true"
