"""Documentation generated from the model itself: the JSON Schema and the README's table of spec fields."""

from __future__ import annotations

from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from trainops.spec.job import JobSpec


def job_spec_schema() -> dict[str, Any]:
    """The JSON Schema of a job spec file (both spellings of `distribution` included)."""
    schema = JobSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trainops job spec"
    return schema


def _type_text(annotation: Any) -> str:
    """A short, readable type: `one of: File, FastFile, Pipe`, `int or None`, `list[str]`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return "one of: " + ", ".join(str(arg) for arg in args)
    if origin in (Union, UnionType):
        return " or ".join(_type_text(arg) for arg in args)
    if annotation is type(None):
        return "None"
    if origin is not None:
        inner = ", ".join(_type_text(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(annotation, "__name__", str(annotation))


def fields_markdown() -> str:
    """A Markdown table of every job-spec field: name, type, default and description."""
    rows = ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
    for name, field in JobSpec.model_fields.items():
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = "`" + repr(field.default_factory()).replace("NoDistribution(instance_groups=None, type='none')",
                                                                 "none") + "`"
        else:
            default = f"`{field.default!r}`"
        kind = {"distribution": "SDK dict or typed form", "inputs": "channel -> URI / TrainingInput / "
                "FileSystemInput"}.get(name, _type_text(field.annotation))
        rows.append(f"| `{name}` | {kind.replace('|', 'or')} | {default} | {field.description or ''} |")
    return "\n".join(rows) + "\n"
