"""What every backend requires of an evaluation's output and of a model version, so that the same pipeline passes
or fails the same way locally and on SageMaker: how hyperparameters become a script's arguments, what a
``metrics.json`` must hold, what a model group may be called.

Light and backend-neutral: the local and SageMaker backends both import it, neither imports the other.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from trainops.errors import JobFailed, Problem, SpecError
from trainops.runtime.hyperparameters import script_arguments as toolkit_arguments
from trainops.runtime.hyperparameters import user_hyperparameters

GROUP_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def script_arguments(hyperparameters: Mapping[str, Any] | None) -> list[str]:
    """Hyperparameters as ``--key value`` arguments, written as the training launchers write them."""
    # Encoded and decoded as the training launchers do (contracts section 2), framework keys dropped, so that a
    # script sees the same arguments in training and in evaluation.
    encoded = {str(key): json.dumps(value) for key, value in (hyperparameters or {}).items()}
    return toolkit_arguments(user_hyperparameters(encoded))


def finite_number(value: Any) -> bool:
    """Whether ``value`` is an int or float (not a bool) that a float can hold finitely: NaN, infinities and an
    integer too large for a float (``1`` followed by 400 zeros: ``math.isfinite`` raises OverflowError on it) are
    not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def shown_value(value: Any, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message (an integer of thousands of digits, or a
    long string, must not flood it; Python refuses to print an int of over 4,300 digits at all)."""
    try:
        text = repr(value)
    except ValueError:
        return "an integer of thousands of digits"
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text):,} characters)"


def validate_metrics(data: Any, where: str) -> dict[str, float]:
    """Check the contents of a ``metrics.json`` (found at ``where``): a non-empty, flat JSON object of metric
    name -> finite number. Raises `JobFailed` saying what the evaluation script must write instead."""
    how = f"write a flat JSON object of metric name -> number to {where}, e.g. {{\"accuracy\": 0.97}}"
    if not isinstance(data, dict):
        raise JobFailed(f"{where} holds a JSON {type(data).__name__}, not an object; {how}")
    if not data:
        raise JobFailed(f"{where} is an empty object; {how}")
    wrong = [name for name, value in data.items() if not finite_number(value)]
    if wrong:
        shown = ", ".join(f"{str(name)[:60]}={shown_value(data[name])}" for name in sorted(wrong)[:20])
        more = f" and {len(wrong) - 20} more" if len(wrong) > 20 else ""
        raise JobFailed(f"{where}: these metrics are not finite numbers a float can hold: {shown}{more}; {how} "
                        f"(put text, lists and nested results in another file of the same directory)")
    return {str(name): value for name, value in data.items()}


def check_group(group: Any, field_name: str = "group") -> str:
    """A valid group name, or `SpecError` naming the field: 1-63 letters, digits and hyphens, as SageMaker requires."""
    if not isinstance(group, str) or not GROUP_PATTERN.match(group):
        raise SpecError(Problem(field_name, f"{group!r} is not a model group name; use 1-63 letters, digits and "
                                            f"hyphens, starting with a letter or digit (e.g. digits-classifier)"),
                        source="registry")
    return group


def check_metrics(metrics: Any, field_name: str = "metrics") -> dict[str, float]:
    """Metrics as a dict of name -> finite number, or `SpecError` naming the first wrong entry."""
    if not isinstance(metrics, Mapping):
        raise SpecError(Problem(field_name, "give the evaluation's metrics as a mapping of name -> number"),
                        source="registry")
    checked: dict[str, float] = {}
    for name, value in metrics.items():
        if not finite_number(value):
            raise SpecError(Problem(f"{field_name}.{name}", f"{shown_value(value)} is not a finite number a float can "
                                                            "hold"), source="registry")
        checked[str(name)] = value
    return checked
