"""Paths as the components see them at run time.

The compiled pipeline keeps the pipeline file's values as written (``${workdir}/raw``, ``train.yaml``), so the YAML
is the same on every machine; each component turns them into absolute paths where it runs:

- ``pipeline_dir``: the pipeline file's directory; relative to the component's working directory (the component
  image's ``WORKDIR`` holds the repository) unless absolute;
- ``workdir``: the local state directory; relative to ``pipeline_dir``; empty means ``$TRAINOPS_HOME``;
- every other value: ``${workdir}`` and ``${pipeline_dir}`` substituted, then relative paths resolved against
  ``pipeline_dir`` (URIs such as ``s3://`` stay as they are), exactly as `trainops.spec.pipeline` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.errors import Problem, SpecError
from trainops.home import trainops_home
from trainops.spec.pipeline import resolve, substitute


@dataclass(frozen=True)
class Places:
    """The two directories every relative value of a pipeline file is read against."""

    pipeline_dir: Path
    workdir: Path

    @property
    def variables(self) -> dict[str, str]:
        """The values of ``${pipeline_dir}`` and ``${workdir}``."""
        return {"pipeline_dir": str(self.pipeline_dir), "workdir": str(self.workdir)}

    def expand(self, value: Any, field: str = "") -> Any:
        """Substitute the variables in every string of ``value`` (a string, list or mapping)."""
        return substitute(value, self.variables, field)

    def path(self, value: str, field: str = "") -> str:
        """A path value of the pipeline file, absolute (URIs are left as they are)."""
        return resolve(self.expand(value, field), self.pipeline_dir)


def places(pipeline_dir: str, workdir: str) -> Places:
    """Resolve the pipeline directory (against the working directory) and the work directory (against it)."""
    base = Path(pipeline_dir or ".").expanduser().resolve()
    if workdir:
        candidate = Path(workdir).expanduser()
        work = candidate if candidate.is_absolute() else (base / candidate).resolve()
    else:
        work = trainops_home()
    return Places(pipeline_dir=base, workdir=work)


#: The prefix of a parameter that travels encoded (base64 of its JSON): KFP substitutes its placeholders
#: (``{{$.inputs.parameters['workdir']}}``, ``{{$}}``) inside every string a component receives, so a job spec whose
#: values hold one would mean something else, or break the run, under KFP than under every other front end.
ENCODED = "base64:"
PLACEHOLDER = "{{$"
#: Every form KFP turns into a run-time value: its IR placeholders (``{{$.inputs.parameters['x']}}``) and its DSL's
#: pipeline channels (``{{channel:task=;name=x;type=String;}}``, which the compiler reads in any string it is given,
#: a constant default included, and compiles into a reference to that parameter or task output).
PLACEHOLDERS = (PLACEHOLDER, "{{channel:")


def placeholder_in(text: str) -> str | None:
    """The KFP placeholder form ``text`` holds (`PLACEHOLDERS`), or None."""
    return next((form for form in PLACEHOLDERS if form in text), None)


def encode_parameter(value: Any) -> str:
    """``base64:<base64 of the value's JSON>``: nothing inside it looks like a KFP placeholder."""
    import base64

    text = json.dumps(value, sort_keys=True, default=str)
    return ENCODED + base64.b64encode(text.encode("utf-8")).decode("ascii")


def decode_parameter(text: str, field: str = "") -> str:
    """The JSON text of a parameter, decoded when it travelled encoded; a plain one holding a KFP placeholder is
    refused (whatever KFP made of it, it is not what the pipeline file says)."""
    import base64
    import binascii

    if text.startswith(ENCODED):
        try:
            return base64.b64decode(text[len(ENCODED):], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as error:
            raise SpecError(Problem(field, f"is not valid base64 after {ENCODED!r} ({error})"),
                            source="component input") from None
    form = placeholder_in(text)
    if form:
        raise SpecError(Problem(field, f"holds a KFP placeholder ({form}...}}}}), which KFP substitutes before "
                                       f"the component reads it: pass the value encoded ({ENCODED}<base64 JSON>, as "
                                       "`trainops kfp compile` writes it)"), source="component input")
    return text


def parse_json(text: str, field: str, expected: type | tuple[type, ...] = (dict, list, str)) -> Any:
    """A JSON parameter of a component (plain or `ENCODED`), or `SpecError` naming it."""
    text = decode_parameter(text, field) if text else text
    try:
        value = json.loads(text) if text else None
    except ValueError as error:
        raise SpecError(Problem(field, f"is not valid JSON ({error})"), source="component input") from None
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if value is not None and not isinstance(value, kinds):
        names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
        wanted = " or ".join(names.get(kind, kind.__name__) for kind in kinds)
        raise SpecError(Problem(field, f"must be JSON holding {wanted}, not {type(value).__name__}"),
                        source="component input")
    return value


def backend_options(text: str) -> dict[str, Any]:
    """The ``backend_options`` input of a component: the backend's one mapping of settings, as JSON (empty: none)."""
    return parse_json(text, "backend_options", dict) or {}
