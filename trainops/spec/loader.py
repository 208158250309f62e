"""Reading spec files and turning pydantic's errors into the project's own.

Spec files are YAML or JSON, small, written by people. Hostile ones (YAML alias bombs, deeply nested documents,
huge files, non-UTF-8 bytes) are refused quickly with a message instead of eating memory or raising a traceback.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import BaseModel, ValidationError

from trainops.errors import Problem, SpecError

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 64
MAX_NODES = 200_000


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses alias bombs and absurd nesting while composing, before anything is built."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._nodes = 0

    def compose_node(self, parent, index):  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise SpecError(f"the document uses more than {MAX_ALIASES} YAML aliases: write the values out")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise SpecError(f"the document has more than {MAX_NODES} nodes: a spec is far smaller than that")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise SpecError(f"the document is nested more than {MAX_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_depth(value: Any, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise SpecError(f"the document is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for item in value.values():
            _check_depth(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_depth(item, depth + 1)


def parse_text(text: str, source: str = "document") -> Any:
    """Parse YAML (JSON is YAML too, but is read by the json module when it looks like JSON, for exact errors)."""
    stripped = text.lstrip()
    if not stripped:
        raise SpecError(f"{source} is empty: write the spec as YAML or JSON (see trainops schema)")
    try:
        if stripped[0] in "{[":
            try:
                data = json.loads(text)
                _check_depth(data)
                return data
            except RecursionError:
                raise SpecError(f"{source} is nested too deeply") from None
            except json.JSONDecodeError:
                pass  # flow-style YAML also starts with { or [
        loader = _BoundedLoader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except SpecError as error:
        raise SpecError(error.problems, source) from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        position = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SpecError(f"not valid YAML or JSON{position}: {problem}", source) from None
    except RecursionError:
        raise SpecError(f"{source} is nested too deeply", source) from None
    return data


def read_document(path: str | Path) -> Any:
    """Read a YAML or JSON file into plain data, refusing files that are too big, binary or not UTF-8."""
    path = Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise SpecError(f"{source} is not a file", source)
        if size > MAX_FILE_BYTES:
            raise SpecError(f"{source} is {size} bytes; spec files are limited to {MAX_FILE_BYTES} bytes", source)
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{source} does not exist", source) from None
    except PermissionError:
        raise SpecError(f"{source} cannot be read (permission denied)", source) from None
    except IsADirectoryError:
        raise SpecError(f"{source} is a directory, not a spec file", source) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SpecError(f"not UTF-8 text (byte {error.start}): save the file as UTF-8", source) from None
    if "\x00" in text:
        raise SpecError("contains NUL bytes: this is not a text file", source)
    return parse_text(text, source)


def _known_fields(model: type[BaseModel] | None) -> list[str]:
    return sorted(model.model_fields) if model else []


def _model_at(model: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """Best effort: the nested model class a path leads to, to list its known keys in messages."""
    from typing import get_args

    current: Any = model
    for part in path:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        candidates = [field.annotation, *get_args(field.annotation)]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def problems_from_validation_error(error: ValidationError, model: type[BaseModel] | None = None) -> list[Problem]:
    """One `Problem` per pydantic error, with a dotted path and a message that says what to do."""
    problems = []
    for item in error.errors(include_url=False):
        location = clean_location(item["loc"])
        path = ".".join(location)
        kind = item["type"]
        message = item["msg"]
        if kind == "extra_forbidden":
            parent = _model_at(model, location[:-1]) if model else None
            known = _known_fields(parent)
            close = difflib.get_close_matches(location[-1], known, n=1) if known else []
            message = "unknown key" + (f": did you mean {close[0]!r}?" if close else "")
            if known and not close:
                message += f" (known keys: {', '.join(known)})"
        elif kind == "missing":
            message = "is required"
        elif kind == "union_tag_invalid":
            message = f"type {item['ctx'].get('tag')!r} is unknown: use one of {item['ctx'].get('expected_tags')}"
        elif kind == "trainops_rule":
            message = item["ctx"]["message"]
        elif message.startswith("Value error, "):
            message = message[len("Value error, "):]
        problems.append(Problem(path, message))
    return _unique(problems)


def clean_location(loc: tuple) -> list[str]:
    """Drop the union tags pydantic adds to error locations (`distribution.typed.smddp`, `inputs.x.s3`).

    Position-aware, because a user may well name a channel `s3`: only the segment where the union sits is a tag.
    """
    parts = [str(part) for part in loc]
    if len(parts) >= 2 and parts[0] == "distribution" and parts[1] in ("typed", "sdk"):
        variant_tag = parts[1] == "typed" and len(parts) >= 3
        parts = parts[:1] + parts[3 if variant_tag else 2:]
    if len(parts) >= 3 and parts[0] == "inputs" and parts[2] in ("uri", "s3", "file_system"):
        parts = parts[:2] + parts[3:]
    return [part for part in parts if not part.startswith("function-")]


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    seen, result = set(), []
    for problem in problems:
        key = (problem.path, problem.message)
        if key not in seen:
            seen.add(key)
            result.append(problem)
    return result


def parse_job_spec(data: Any, source: str = "job spec"):
    """Validate plain data as a `JobSpec`; every problem comes back in one `SpecError`."""
    from trainops.spec.job import JobSpec

    if isinstance(data, JobSpec):
        return data
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "nothing"
        raise SpecError(f"a job spec is a mapping of fields (entry_point, instance_type, ...), got {kind}", source)
    try:
        return JobSpec.model_validate(data)
    except ValidationError as error:
        raise SpecError(problems_from_validation_error(error, JobSpec), source) from None
    except RecursionError:
        raise SpecError("the spec is nested too deeply", source) from None


def load_job_spec(path: str | Path):
    """Read and validate a job spec file; relative `source_dir` is resolved against the file's directory."""
    data = read_document(path)
    spec = parse_job_spec(data, str(path))
    return resolve_relative_paths(spec, Path(path).resolve().parent)


def resolve_relative_paths(spec, base: Path):
    """Make local paths in the spec (source_dir, local channels, local output_path) absolute against `base`."""
    from trainops.spec.inputs import is_local_uri, local_path

    updates: dict[str, Any] = {}
    if spec.source_dir and not spec.source_dir.startswith("s3://") and not Path(spec.source_dir).is_absolute():
        updates["source_dir"] = str((base / spec.source_dir).resolve())
    if spec.output_path and is_local_uri(spec.output_path):
        path = Path(local_path(spec.output_path))
        if not path.is_absolute():
            updates["output_path"] = str((base / path).resolve())
    inputs = {}
    for name, channel in spec.inputs.items():
        uri = channel if isinstance(channel, str) else getattr(channel, "s3_data", None)
        if uri is not None and is_local_uri(uri) and not Path(local_path(uri)).is_absolute():
            absolute = str((base / local_path(uri)).resolve())
            inputs[name] = absolute if isinstance(channel, str) else channel.model_copy(update={"s3_data": absolute})
    if inputs:
        updates["inputs"] = {**spec.inputs, **inputs}
    return spec.model_copy(update=updates) if updates else spec
