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

GROUP_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def script_arguments(hyperparameters: Mapping[str, Any] | None) -> list[str]:
    """Hyperparameters as ``--key value`` arguments, written as the training launchers write them."""
    from trainops.runtime.hyperparameters import script_arguments as toolkit_arguments
    from trainops.runtime.hyperparameters import user_hyperparameters

    # Encoded and decoded as the training launchers do (contracts section 2), framework keys dropped, so that a
    # script sees the same arguments in training and in evaluation.
    encoded = {str(key): json.dumps(value) for key, value in (hyperparameters or {}).items()}
    return toolkit_arguments(user_hyperparameters(encoded))


def validate_metrics(data: Any, where: str) -> dict[str, float]:
    """Check the contents of a ``metrics.json`` (found at ``where``): a non-empty, flat JSON object of metric
    name -> finite number. Raises `JobFailed` saying what the evaluation script must write instead."""
    how = f"write a flat JSON object of metric name -> number to {where}, e.g. {{\"accuracy\": 0.97}}"
    if not isinstance(data, dict):
        raise JobFailed(f"{where} holds a JSON {type(data).__name__}, not an object; {how}")
    if not data:
        raise JobFailed(f"{where} is an empty object; {how}")
    wrong = [name for name, value in data.items()
             if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)]
    if wrong:
        shown = ", ".join(f"{name}={data[name]!r}" for name in sorted(wrong))
        raise JobFailed(f"{where}: these metrics are not finite numbers: {shown}; {how} "
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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(Problem(f"{field_name}.{name}", f"{value!r} is not a finite number"), source="registry")
        checked[str(name)] = value
    return checked
