"""The quality gate: parsing (strings, mappings, lists), every operator, champion gates, and the messages."""

from __future__ import annotations

import json

import pytest

from trainops.errors import JobFailed, SpecError
from trainops.steps.gate import (
    Gate,
    GateFailed,
    all_passed,
    check_gates,
    deciding_result,
    needs_champion,
    parse_gates,
    summary,
)


@pytest.mark.parametrize(
    ("text", "metric", "operator", "threshold"),
    [
        ("accuracy >= 0.95", "accuracy", ">=", 0.95),
        ("loss <= 0.3", "loss", "<=", 0.3),
        ("f1>0.5", "f1", ">", 0.5),
        ("  val-loss <   2  ", "val-loss", "<", 2.0),
        ("epochs == 10", "epochs", "==", 10.0),
        ("errors != 0", "errors", "!=", 0.0),
        ("delta>=-1e-3", "delta", ">=", -0.001),
        ("eval/top-1:acc >= 0.5", "eval/top-1:acc", ">=", 0.5),
        ("accuracy > champion", "accuracy", ">", None),
        ("loss <= CHAMPION", "loss", "<=", None),
    ],
)
def test_parse_text(text, metric, operator, threshold):
    gate = Gate.parse(text)
    assert (gate.metric, gate.operator, gate.threshold) == (metric, operator, threshold)
    assert gate.uses_champion is (threshold is None)


def test_parse_mapping_forms_and_round_trip():
    fixed = Gate.parse({"metric": "accuracy", "operator": ">=", "threshold": 0.95})
    champion = Gate.parse({"metric": "accuracy", "operator": ">", "champion": True})
    assert fixed == Gate("accuracy", ">=", 0.95)
    assert champion == Gate("accuracy", ">", None)
    for gate in (fixed, champion):
        assert Gate.parse(gate.to_dict()) == gate
        assert Gate.parse(str(gate)) == gate


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("accuracy => 0.95", "gate.operator", "'=>' is not a gate operator"),
        ("accuracy = 0.95", "gate.operator", ">="),
        ("accuracy ~ 0.95", "gate.operator", "'~' is not a gate operator"),
        (">= 0.95", "gate.metric", "metric name is empty"),
        ("accuracy >= high", "gate.threshold", "'high'"),
        ("accuracy >= nan", "gate.threshold", "not a number"),
        ("accuracy >=", "gate.threshold", "no threshold"),
        ("accuracy", "gate", "METRIC OPERATOR THRESHOLD"),
        ({"metric": "", "operator": ">=", "threshold": 1}, "gate.metric", "empty"),
        ({"metric": "accuracy", "operator": "gte", "threshold": 1}, "gate.operator", "'gte'"),
        ({"metric": "accuracy", "operator": ">=", "threshold": "high"}, "gate.threshold", "finite number"),
        ({"metric": "accuracy", "operator": ">=", "threshold": True}, "gate.threshold", "finite number"),
        ({"metric": "accuracy", "operator": ">="}, "gate.threshold", "missing"),
        ({"metric": "accuracy", "operator": ">=", "threshold": 1, "champion": True}, "gate.threshold", "not both"),
        ({"metric": "accuracy", "op": ">=", "threshold": 1}, "gate.op", "unknown gate key"),
        (0.95, "gate", "not a float"),
    ],
)
def test_bad_gates_name_the_field(value, field, words):
    with pytest.raises(SpecError) as caught:
        Gate.parse(value)
    assert caught.value.exit_code == 2
    [problem] = caught.value.problems
    assert problem.path == field
    assert words in problem.message


def test_parse_gates_list_names_each_item():
    assert parse_gates(None) == []
    assert parse_gates("loss <= 1") == [Gate("loss", "<=", 1.0)]
    gates = parse_gates(["accuracy >= 0.9", {"metric": "loss", "operator": "<", "threshold": 0.3}])
    assert gates == [Gate("accuracy", ">=", 0.9), Gate("loss", "<", 0.3)]
    with pytest.raises(SpecError) as caught:
        parse_gates(["accuracy >= 0.9", "loss << 0.3"])
    assert caught.value.problems[0].path == "gate[1].operator"


@pytest.mark.parametrize(
    ("operator", "value", "threshold", "passed"),
    [
        (">=", 0.95, 0.95, True), (">=", 0.94, 0.95, False),
        (">", 0.96, 0.95, True), (">", 0.95, 0.95, False),
        ("<=", 0.3, 0.3, True), ("<=", 0.31, 0.3, False),
        ("<", 0.29, 0.3, True), ("<", 0.3, 0.3, False),
        ("==", 10, 10, True), ("==", 9, 10, False),
        ("!=", 1, 0, True), ("!=", 0, 0, False),
    ],
)
def test_every_operator(operator, value, threshold, passed):
    result = Gate("metric", operator, float(threshold)).check({"metric": value})
    assert result.passed is passed
    assert result.value == float(value) and result.threshold == float(threshold)
    assert result.operator == operator and result.champion is False


def test_failure_message_names_metric_value_and_threshold():
    result = Gate.parse("accuracy >= 0.95").check({"accuracy": 0.912, "loss": 0.4})
    assert not result.passed
    assert result.message == "gate failed: accuracy = 0.912 is not >= 0.95"
    passed = Gate.parse("loss <= 0.5").check({"accuracy": 0.912, "loss": 0.4})
    assert passed.message == "gate passed: loss = 0.4 <= 0.5"


def test_missing_metric_fails_and_lists_metrics_present():
    result = Gate.parse("f1 >= 0.5").check({"loss": 0.2, "accuracy": 0.9})
    assert not result.passed and result.value is None
    assert "'f1' is not in metrics.json" in result.message
    assert "metrics present: accuracy, loss" in result.message


def test_non_numeric_metric_fails():
    result = Gate.parse("accuracy >= 0.5").check({"accuracy": "high"})
    assert not result.passed and "not a number" in result.message


def test_champion_gate_compares_with_champion():
    gate = Gate.parse("accuracy > champion")
    better = gate.check({"accuracy": 0.97}, {"accuracy": 0.95}, "champion version 3")
    worse = gate.check({"accuracy": 0.94}, {"accuracy": 0.95}, "champion version 3")
    assert better.passed and better.threshold == 0.95 and better.champion
    assert "0.97 > 0.95 (champion version 3)" in better.message
    assert not worse.passed
    assert worse.message == "gate failed: accuracy = 0.94 is not > 0.95 (champion version 3)"


def test_champion_gate_with_no_champion_passes_and_says_so():
    result = Gate.parse("accuracy > champion").check({"accuracy": 0.5}, None)
    assert result.passed and result.threshold is None
    assert "no champion yet" in result.message


def test_champion_without_the_metric_passes_and_says_so():
    result = Gate.parse("f1 > champion").check({"f1": 0.5}, {"accuracy": 0.9})
    assert result.passed
    assert "has no f1 metric" in result.message


def test_several_gates_all_must_pass():
    gates = parse_gates(["accuracy >= 0.9", "loss <= 0.3", "accuracy > champion"])
    assert needs_champion(gates) and not needs_champion(gates[:2])
    good = check_gates(gates, {"accuracy": 0.95, "loss": 0.2}, {"accuracy": 0.93})
    assert all_passed(good)
    assert deciding_result(good) is good[-1]
    mixed = check_gates(gates, {"accuracy": 0.95, "loss": 0.4}, {"accuracy": 0.93})
    assert not all_passed(mixed)
    assert deciding_result(mixed).metric == "loss"
    assert summary(mixed).splitlines()[0] == "gate failed: loss = 0.4 is not <= 0.3"
    assert all_passed([]) and deciding_result([]) is None


def test_results_are_json_and_gate_failed_is_a_job_failure():
    result = Gate.parse("accuracy >= 0.95").check({"accuracy": 0.9})
    assert json.loads(json.dumps(result.to_dict()))["message"] == result.message
    error = GateFailed(result.message)
    assert isinstance(error, JobFailed) and error.exit_code == 1
