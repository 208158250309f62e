"""The quality gate: a rule a model's evaluation metrics must meet before it is registered as approved.

A gate compares one metric of ``metrics.json`` with either a fixed threshold or the same metric of the current
champion (the latest approved model of the registry group):

    accuracy >= 0.95          loss <= 0.3          accuracy > champion

Gates are written as such strings or as mappings (``{"metric": "accuracy", "operator": ">=", "threshold": 0.95}``,
``{"metric": "accuracy", "operator": ">", "champion": true}``); a list of gates passes only when every gate passes.
Checking a gate never raises: it returns a `GateResult` whose message names the metric, its value and the threshold,
so operators and components can fail, short-circuit or just report. `GateFailed` is there for callers that want an
exception with that message.

This module is pure (no I/O, no heavy imports): Airflow DAG files may import it.
"""

from __future__ import annotations

import math
import operator as _operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from trainops.errors import JobFailed, Problem, SpecError

#: The comparison operators a gate may use, and what they compute.
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": _operator.ge,
    ">": _operator.gt,
    "<=": _operator.le,
    "<": _operator.lt,
    "==": _operator.eq,
    "!=": _operator.ne,
}

#: The word that, in place of a threshold, means "the current champion's value of this metric".
CHAMPION = "champion"

_OPERATOR_LIST = ", ".join(OPERATORS)
# METRIC (letters, digits and _ . - / :), then a run of other symbols, then the right-hand side. The symbol run is
# validated afterwards so that a typo such as "=>" or "~" gets its own message instead of "does not parse".
_GATE_PATTERN = re.compile(r"^\s*(?P<metric>[\w.\-/:]*)\s*(?P<operator>[^\w\s.\-/:]+)\s*(?P<right>.*?)\s*$")
_MAPPING_KEYS = frozenset({"metric", "operator", "threshold", "champion"})


class GateFailed(JobFailed):
    """A model did not pass its quality gate (exit code 1). The message names the metric, value and threshold."""


def format_number(value: float) -> str:
    """A metric value as people read it: ``0.912``, ``0.95``, ``1200``, ``3.14159`` (six significant digits)."""
    return f"{value:.6g}"


@dataclass(frozen=True)
class GateResult:
    """The outcome of one gate.

    Attributes:
        passed: whether the gate passed.
        metric: the metric the gate compares.
        value: the metric's value in ``metrics.json`` (None when it was missing).
        threshold: the value compared against: the fixed threshold, or the champion's value (None when there is no
            champion yet, or the champion lacks the metric).
        operator: one of `OPERATORS`.
        message: one line for people, naming metric, value and threshold.
        champion: whether the threshold came from the champion.
    """

    passed: bool
    metric: str
    value: float | None
    threshold: float | None
    operator: str
    message: str
    champion: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A small JSON-able dict (XCom values, KFP outputs)."""
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """One rule: ``metric operator threshold``, or ``metric operator champion`` when ``threshold`` is None.

    Build gates with `Gate.parse` (strings and mappings) or `parse_gates` (also lists); the constructor does not
    validate.
    """

    metric: str
    operator: str
    threshold: float | None = None

    @property
    def uses_champion(self) -> bool:
        """Whether this gate compares with the current champion rather than a fixed threshold."""
        return self.threshold is None

    def __str__(self) -> str:
        right = CHAMPION if self.threshold is None else format_number(self.threshold)
        return f"{self.metric} {self.operator} {right}"

    def to_dict(self) -> dict[str, Any]:
        """The mapping form: ``{"metric", "operator", "threshold"}`` or ``{"metric", "operator", "champion": true}``."""
        if self.threshold is None:
            return {"metric": self.metric, "operator": self.operator, "champion": True}
        return {"metric": self.metric, "operator": self.operator, "threshold": self.threshold}

    @classmethod
    def parse(cls, value: Gate | str | Mapping[str, Any], field: str = "gate") -> Gate:
        """A gate from a string (``"accuracy >= 0.95"``, ``"accuracy > champion"``) or a mapping.

        Raises `SpecError` naming ``field`` (and the sub-field) with what to write instead.
        """
        if isinstance(value, Gate):
            return value
        if isinstance(value, str):
            return _parse_text(value, field)
        if isinstance(value, Mapping):
            return _parse_mapping(value, field)
        raise SpecError(Problem(field, f"a gate is a string like 'accuracy >= 0.95' or a mapping with metric, operator "
                                       f"and threshold, not a {type(value).__name__}"), source="gate")

    def check(self, metrics: Mapping[str, Any], champion_metrics: Mapping[str, Any] | None = None,
              champion_label: str = "the champion") -> GateResult:
        """Compare ``metrics`` (and, for a champion gate, ``champion_metrics``) with this gate.

        A missing metric fails, naming the metrics that are present. A champion gate passes when there is no
        champion yet (``champion_metrics`` is None: the first model has nothing to beat), and says so; it also passes
        when the champion lacks the metric, since there is nothing to compare with.
        """
        present = sorted(str(name) for name in metrics)
        raw = metrics.get(self.metric)
        if raw is None:
            listing = ", ".join(present) if present else "none"
            return self._result(False, None, None, f"gate failed: metric {self.metric!r} is not in metrics.json "
                                                   f"(metrics present: {listing})")
        value = _number(raw)
        if value is None:
            return self._result(False, None, None, f"gate failed: metric {self.metric!r} is {raw!r}, not a number")
        shown = format_number(value)
        if self.threshold is not None:
            threshold = self.threshold
            against = format_number(threshold)
        else:
            if champion_metrics is None:
                return self._result(True, value, None, f"gate passed: {self.metric} = {shown}; no champion yet, so "
                                                       f"this first model has nothing to beat")
            champion_value = _number(champion_metrics.get(self.metric))
            if champion_value is None:
                return self._result(True, value, None, f"gate passed: {self.metric} = {shown}; {champion_label} has no "
                                                       f"{self.metric} metric to compare with")
            threshold = champion_value
            against = f"{format_number(threshold)} ({champion_label})"
        passed = bool(OPERATORS[self.operator](value, threshold)) and not math.isnan(value)
        if passed:
            message = f"gate passed: {self.metric} = {shown} {self.operator} {against}"
        else:
            message = f"gate failed: {self.metric} = {shown} is not {self.operator} {against}"
        return self._result(passed, value, threshold, message)

    def _result(self, passed: bool, value: float | None, threshold: float | None, message: str) -> GateResult:
        return GateResult(passed=passed, metric=self.metric, value=value, threshold=threshold, operator=self.operator,
                          message=message, champion=self.uses_champion)


def _number(value: Any) -> float | None:
    """A metric value as a float, or None when it is not a number (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _check_metric(metric: Any, field: str) -> str:
    if not isinstance(metric, str) or not metric.strip():
        raise SpecError(Problem(f"{field}.metric", "the metric name is empty; name a key of metrics.json, as in "
                                                   "'accuracy >= 0.95'"), source="gate")
    return metric.strip()


def _check_operator(operator: Any, field: str) -> str:
    if operator not in OPERATORS:
        raise SpecError(Problem(f"{field}.operator",
                                f"{operator!r} is not a gate operator; use one of {_OPERATOR_LIST}"), source="gate")
    return str(operator)


def _check_threshold(threshold: Any, field: str) -> float:
    if isinstance(threshold, str):
        try:
            threshold = float(threshold)
        except ValueError:
            threshold = None
    elif isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        threshold = None
    if threshold is None or not math.isfinite(threshold):
        raise SpecError(Problem(f"{field}.threshold", f"the threshold must be a finite number (as in "
                                                      f"'accuracy >= 0.95') or the word {CHAMPION!r}"), source="gate")
    return float(threshold)


def _parse_text(text: str, field: str) -> Gate:
    match = _GATE_PATTERN.match(text)
    if match is None:
        raise SpecError(Problem(field, f"{text!r} is not a gate; write METRIC OPERATOR THRESHOLD, as in "
                                       f"'accuracy >= 0.95' or 'accuracy > champion' (operators: {_OPERATOR_LIST})"),
                        source="gate")
    metric = _check_metric(match["metric"], field)
    operator = _check_operator(match["operator"], field)
    right = match["right"]
    if right.lower() == CHAMPION:
        return Gate(metric, operator, None)
    if not right:
        raise SpecError(Problem(f"{field}.threshold", f"{text!r} has no threshold; add a number or {CHAMPION!r}"),
                        source="gate")
    try:
        return Gate(metric, operator, _check_threshold(right, field))
    except SpecError:
        raise SpecError(Problem(f"{field}.threshold", f"{right!r} in {text!r} is not a number; write a finite number "
                                                      f"(as in 'accuracy >= 0.95') or {CHAMPION!r}"),
                        source="gate") from None


def _parse_mapping(mapping: Mapping[str, Any], field: str) -> Gate:
    unknown = sorted(str(key) for key in mapping if key not in _MAPPING_KEYS)
    if unknown:
        raise SpecError(Problem(f"{field}.{unknown[0]}", "unknown gate key; a gate mapping has metric, operator and "
                                                         "threshold (or champion: true)"), source="gate")
    metric = _check_metric(mapping.get("metric"), field)
    operator = _check_operator(mapping.get("operator"), field)
    champion = mapping.get("champion", False)
    if not isinstance(champion, bool):
        raise SpecError(Problem(f"{field}.champion", "champion is true or false"), source="gate")
    has_threshold = mapping.get("threshold") is not None
    if champion and has_threshold:
        raise SpecError(Problem(f"{field}.threshold", "give either a threshold or champion: true, not both"),
                        source="gate")
    if champion:
        return Gate(metric, operator, None)
    if not has_threshold:
        raise SpecError(Problem(f"{field}.threshold", "missing; give a number, or champion: true to compare with the "
                                                      "current champion"), source="gate")
    return Gate(metric, operator, _check_threshold(mapping["threshold"], field))


def parse_gates(value: Any, field: str = "gate") -> list[Gate]:
    """Every gate of a gate setting: None (no gate), one gate (string, mapping, `Gate`) or a list of them.

    List items are named ``gate[0]``, ``gate[1]``... in errors.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [Gate.parse(item, f"{field}[{index}]") for index, item in enumerate(value)]
    return [Gate.parse(value, field)]


def needs_champion(gates: Iterable[Gate]) -> bool:
    """Whether any gate compares with the champion (so its metrics must be looked up)."""
    return any(gate.uses_champion for gate in gates)


def check_gates(gates: Iterable[Gate], metrics: Mapping[str, Any], champion_metrics: Mapping[str, Any] | None = None,
                champion_label: str = "the champion") -> list[GateResult]:
    """Check every gate (no short-circuit, so a report shows them all). All must pass: see `all_passed`."""
    return [gate.check(metrics, champion_metrics, champion_label) for gate in gates]


def all_passed(results: Iterable[GateResult]) -> bool:
    """Whether every gate passed (True for no gates)."""
    return all(result.passed for result in results)


def deciding_result(results: list[GateResult]) -> GateResult | None:
    """The result that decides the outcome: the first failed gate, else the last gate, else None."""
    for result in results:
        if not result.passed:
            return result
    return results[-1] if results else None


def summary(results: list[GateResult]) -> str:
    """One line per gate, failures first (what a failed task or CLI run should print)."""
    ordered = [result for result in results if not result.passed] + [result for result in results if result.passed]
    return "\n".join(result.message for result in ordered) if ordered else "no gate"
