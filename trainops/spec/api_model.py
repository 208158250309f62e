"""What the SageMaker API itself accepts, read from `sagemaker_api.json` (generated from botocore's service model by
tests/differential/generate_api_model.py; never typed by hand).

Two readers: `trainops.backends.request.api_limits` checks a whole CreateTrainingJob request against the model's
lengths, counts, patterns and enumerations, and `training_instance_types` is the list an engine that runs the
SageMaker request (sagemaker, local) refuses an unknown ``ml.*`` type against, with the closest names offered.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

MODEL_FILE = Path(__file__).with_name("sagemaker_api.json")


@cache
def api_model() -> dict[str, Any]:
    """The generated file, read once."""
    return json.loads(MODEL_FILE.read_text())


def training_instance_types() -> frozenset[str]:
    """CreateTrainingJob's ``TrainingInstanceType`` enumeration, as the installed botocore's model lists it."""
    return frozenset(api_model()["training_instance_types"])


def request_constraints() -> dict[str, dict[str, Any]]:
    """Each constrained path of CreateTrainingJob's input (``Tags[].Key``): type, min, max, pattern, enum."""
    return api_model()["create_training_job"]


def closest_instance_types(name: str, count: int = 3) -> list[str]:
    """The known instance types closest to ``name`` (same family first: ml.g5.xxlarge -> ml.g5.xlarge ...)."""
    known = sorted(training_instance_types())
    family = name.split(".")[1] if name.count(".") >= 2 else None
    same_family = [item for item in known if family and item.split(".")[1] == family]
    close = difflib.get_close_matches(name, same_family or known, n=count, cutoff=0.6)
    return close or difflib.get_close_matches(name, known, n=count, cutoff=0.5)


def unknown_instance_type_message(name: str) -> str:
    """Why ``name`` is refused, with "did you mean" from the API's own list."""
    close = closest_instance_types(name)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (f"{name!r} is not a SageMaker training instance type: {hint}CreateTrainingJob takes one of the "
            f"{len(training_instance_types())} types of its TrainingInstanceType list (botocore "
            f"{api_model()['botocore']}); local and local_gpu run on this machine")


# Java's Unicode classes in the API's patterns (the tag pattern's [\p{L}\p{Z}\p{N}...]) have no `re` spelling: each
# stands for a private-use character, and every character of a value in that category is replaced by it before the
# match. \p{Alnum} is ASCII in Java's default mode.
_CATEGORY_STANDINS = {"L": "\ue000", "Z": "\ue001", "N": "\ue002"}


@cache
def _compiled(pattern: str) -> tuple[re.Pattern[str], bool]:
    uses_categories = False
    translated = pattern.replace(r"\p{Alnum}", "A-Za-z0-9")
    for category, standin in _CATEGORY_STANDINS.items():
        if f"\\p{{{category}}}" in translated:
            uses_categories = True
            translated = translated.replace(f"\\p{{{category}}}", standin)
    # Java's \d, \w and \s are ASCII unless asked otherwise, and its '.' stops at a line end as Python's does (at
    # \n; Java's at \r and \u2028 too); the API matches the whole value.
    return re.compile(translated, re.ASCII), uses_categories


def matches_api_pattern(pattern: str, value: str) -> bool:
    """Whether ``value`` matches one of the model's (Java) patterns as a whole, as the service matches it."""
    compiled, uses_categories = _compiled(pattern)
    if uses_categories:
        value = "".join(_CATEGORY_STANDINS.get(unicodedata.category(char)[0], char) for char in value)
    return compiled.fullmatch(value) is not None


def tag_problem(part: str, text: str) -> str | None:
    """Why a tag's ``key`` or ``value`` is refused by the API, or None: its pattern (letters, digits, spaces and
    ``_ . : / = + - @``, botocore's TagKey / TagValue) and, for keys, the ``aws:`` prefix AWS reserves for itself
    (Tagging AWS resources, "Tag naming limits and requirements")."""
    shape = "Key" if part == "key" else "Value"
    pattern = request_constraints()[f"Tags[].{shape}"]["pattern"]
    if not matches_api_pattern(pattern, text):
        bad = sorted({char for char in text if not matches_api_pattern(pattern, char)})
        return (f"{text[:60]!r} holds {', '.join(repr(char) for char in bad)}: tag {part}s take letters, digits, "
                "spaces and _ . : / = + - @ only (the API's pattern)")
    if part == "key" and text.lower().startswith("aws:"):
        return f"{text!r}: the aws: prefix is reserved for AWS's own tags; choose another key"
    return None
