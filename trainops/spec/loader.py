"""Reading spec files and turning pydantic's errors into the project's own.

Spec files are YAML or JSON, small, written by people. Hostile ones (YAML alias bombs, deeply nested documents,
huge files, non-UTF-8 bytes, numbers of thousands of digits, thousands of unknown keys) are refused quickly with a
message instead of eating memory or time or raising a traceback. YAML is scanned by libyaml when PyYAML has it (the
pure-Python scanner needs seconds for a long scalar); the composing, where the limits are enforced, stays in Python.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from trainops.errors import Problem, SpecError
from trainops.spec.inputs import is_local_uri, local_path
from trainops.spec.job import RULE_SETS, RULES_RAN, SKIP_RULES_READING, JobSpec
from trainops.spec.rule_registry import all_problems
from trainops.spec.v3 import from_model_trainer, is_v3, v3_problems

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_ALIASES = 64
# The values a document may stand for (aliases expanded). The largest spec SageMaker accepts (100 hyperparameters of
# 2,500 characters, 100 variables, 50 tags) is a few thousand; composing a value costs ~10 µs in Python.
MAX_NODES = 20_000
# Python refuses to turn more digits than this into an int (CVE-2020-10735); such a number is never a valid value.
MAX_INT_DIGITS = 4300
# Problems reported (and keys given a "did you mean" suggestion) per document: a file of 30,000 stray keys gets a
# bounded answer in well under a second instead of 30,000 lines after half a minute.
MAX_PROBLEMS = 100
MAX_SUGGESTIONS = 50

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec


class OversizedNumber:
    """Stands in for an integer literal too long to convert, so validation reports it at its own field path."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def _integer(text: str) -> int | OversizedNumber:
    digits = len(text.lstrip("+-"))
    return OversizedNumber(digits) if digits > MAX_INT_DIGITS else int(text)


if TYPE_CHECKING:  # the mixins below extend a PyYAML loader; at run time their base is object (the MRO adds it)
    from yaml import SafeLoader as _LoaderBase
else:
    _LoaderBase = object


class _Limits(_LoaderBase):
    """The checks made while composing, before anything is built: depth, alias count, and the number of values
    the document stands for once its aliases are expanded (an alias bomb stays under any alias count: 9 aliases
    per level, 7 levels, expand to 4.8 million values)."""

    def _reset_limits(self) -> None:
        self._depth = 0
        self._aliases = 0
        self._nodes = 0  # values composed so far, an alias counting for every value it stands for
        self._anchored_sizes: dict[int, int] = {}

    def compose_node(self, parent, index):  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise SpecError(f"the document uses more than {MAX_ALIASES} YAML aliases: write the values out")
            node = super().compose_node(parent, index)
            if id(node) not in self._anchored_sizes:
                # Its anchor is still open: the value would contain itself (`a: &a [*a]`).
                raise SpecError("a YAML alias refers to a value that contains it: the document would be endless")
            self._count(self._anchored_sizes[id(node)])
            return node
        anchor = self.peek_event().anchor
        self._count(1)
        before = self._nodes
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise SpecError(f"the document is nested more than {MAX_DEPTH} levels deep")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if anchor is not None:
            self._anchored_sizes[id(node)] = self._nodes - before + 1
        return node

    def _count(self, values: int) -> None:
        self._nodes += values
        if self._nodes > MAX_NODES:
            raise SpecError(f"the document stands for more than {MAX_NODES} values (YAML aliases expanded): a spec "
                            "is far smaller than that")

    def construct_yaml_int(self, node):  # noqa: D401 - PyYAML hook
        # YAML 1.2 core schema: decimal (a leading 0 is still decimal), 0o octal, 0x hexadecimal; nothing else
        # resolves to int (see CORE_SCHEMA_RESOLVERS).
        text = str(node.value)
        sign = -1 if text.startswith("-") else 1
        body = text.lstrip("+-")
        if body.startswith("0o"):
            return sign * int(body[2:], 8)
        if body.startswith("0x"):
            return sign * int(body[2:], 16)
        if len(body) > MAX_INT_DIGITS:
            return OversizedNumber(len(body))
        return sign * int(body, 10)


class _DuplicateKeys(_LoaderBase):
    """Duplicate mapping keys are errors."""

    def construct_mapping(self, node, deep=False):  # noqa: D401 - PyYAML hook
        # PyYAML keeps the last of two equal keys; in a spec that hides a mistake, so it is one.
        seen: dict[Any, int] = {}
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise SpecError(f"key {key!r} appears twice (lines {seen[key]} and {line}): keep one")
            seen[key] = line
        return super().construct_mapping(node, deep)


class _BoundedLoader(_Limits, _DuplicateKeys, yaml.SafeLoader):
    """The pure-Python SafeLoader with the limits (when PyYAML was built without libyaml)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._reset_limits()


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _Limits.construct_yaml_int)


try:
    from yaml.cyaml import CParser as _CParser
except ImportError:  # PyYAML without libyaml
    _CParser = None

if _CParser is not None:
    class _FastBoundedLoader(_Limits, _DuplicateKeys, Composer, _CParser, SafeConstructor, Resolver):
        """libyaml scans and parses (fast); Python's composer, with the limits above, builds the node graph."""

        def __init__(self, stream: str):
            _CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._reset_limits()

    _FastBoundedLoader.add_constructor("tag:yaml.org,2002:int", _Limits.construct_yaml_int)


# YAML 1.2's core schema, which every current YAML tool follows, instead of PyYAML's YAML 1.1 rules: `1e-5` is a
# number (1.1 needs a dot), `0123` is 123 (not octal 83), `1:30` stays text (not 90), and only true/false (any of
# three capitalisations) are booleans (`yes`, `no`, `on`, `off` stay text). Dates stay text too. `<<` merge keys are
# kept for the documents that use them.
CORE_SCHEMA_RESOLVERS = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     list("-+.0123456789")),
    ("tag:yaml.org,2002:merge", r"^(?:<<)$", ["<"]),
]


def _use_core_schema(loader_class: Any) -> None:
    loader_class.yaml_implicit_resolvers = {}
    for tag, pattern, first in CORE_SCHEMA_RESOLVERS:
        loader_class.add_implicit_resolver(tag, re.compile(pattern), first)


_use_core_schema(_BoundedLoader)
if _CParser is not None:
    _use_core_schema(_FastBoundedLoader)


def _loader(text: str):
    return _FastBoundedLoader(text) if _CParser is not None else _BoundedLoader(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise SpecError(f"key {key!r} appears twice in one object: keep one")
        result[key] = value
    return result


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
        raise SpecError(f"{source} is empty: write the spec as YAML or JSON (see trainops schema)", source)
    try:
        if stripped[0] in "{[":
            try:
                data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_integer)
                _check_depth(data)
                return data
            except RecursionError:
                raise SpecError(f"{source} is nested too deeply") from None
            except json.JSONDecodeError:
                pass  # flow-style YAML also starts with { or [
        loader = _loader(text)
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
    except OSError as error:  # a symbolic-link loop, a name too long, an I/O error: a message, not a traceback
        raise SpecError(f"{source} cannot be read: {error.strerror or error}", source) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SpecError(f"not UTF-8 text (byte {error.start}): save the file as UTF-8", source) from None
    if "\x00" in text:
        raise SpecError("contains NUL bytes: this is not a text file", source)
    return parse_text(text, source)


def _field_key(name: str, field: Any) -> str:
    return field.alias or name


def _known_fields(model: type[BaseModel] | None) -> list[str]:
    """The keys a spec file may use for `model` (aliases where a field has one, as the schema shows them)."""
    return sorted(_field_key(name, field) for name, field in model.model_fields.items()) if model else []


def _field(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _members(annotation: Any) -> list[Any]:
    """The alternatives of a (possibly annotated, possibly nested) union; a lone type is its own alternative."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _choose(candidates: list[Any], node: Any) -> Any:
    """Which alternative of a union the user's data meant: the typed variant its `type` names, else the model
    knowing most of its keys (the SDK form of `distribution`, TrainingInput or FileSystemInput)."""
    candidates = [candidate for candidate in candidates if candidate is not type(None)]
    models = [candidate for candidate in candidates if _is_model(candidate)]
    if len(candidates) == 1 or not models:
        return candidates[0] if candidates else None
    if not isinstance(node, dict):
        return None
    if "type" in node:
        tagged = [m for m in models if "type" in m.model_fields and m.model_fields["type"].default == node["type"]]
        return tagged[0] if tagged else None
    untagged = [m for m in models if "type" not in m.model_fields]
    return max(untagged, key=lambda m: sum(_field(m, str(key)) is not None for key in node), default=None)


def _model_at(model: type[BaseModel], path: list[str], data: Any = None) -> type[BaseModel] | None:
    """Best effort: the model class a path leads to in the user's data, to list its known keys in messages."""
    current: Any = model
    node = data
    for part in path:
        current = _choose(_members(current), node)
        if _is_model(current):
            field = _field(current, part)
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is list and part.isdigit():
            current = get_args(current)[0]
            part = int(part)  # type: ignore[assignment]
        else:
            return None
        node = _child(node, part)
    current = _choose(_members(current), node)
    return current if _is_model(current) else None


def _child(node: Any, part: Any) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def problems_from_validation_error(error: ValidationError, model: type[BaseModel] | None = None,
                                   data: Any = None) -> list[Problem]:
    """One `Problem` per pydantic error, with a dotted path and a message that says what to do.

    `data` (the input that failed) lets unknown-key messages suggest the key meant, inside unions too.
    """
    problems = []
    suggestions = 0
    union_paths: set[str] = set()
    for item in error.errors(include_url=False):
        location = clean_location(item["loc"])
        path = ".".join(location)
        kind = item["type"]
        message = item["msg"]
        if isinstance(item.get("input"), OversizedNumber):
            message = f"{item['input']!r} is far beyond any valid value"
        elif kind == "extra_forbidden":
            suggestions += 1
            if suggestions > MAX_SUGGESTIONS:  # difflib per key is what makes 30,000 stray keys slow
                problems.append(Problem(path, "unknown key"))
                continue
            parent = _model_at(model, location[:-1], data) if model else None
            known = _known_fields(parent)
            close = difflib.get_close_matches(location[-1], known, n=1) if known else []
            message = "unknown key" + (f": did you mean {close[0]!r}?" if close else "")
            if known and not close:
                message += f" (known keys: {', '.join(known)})"
        elif kind == "missing":
            message = "is required"
        elif location and (location[-1] == "[key]" or kind == "invalid_key"):
            location = location[:-1] if location[-1] == "[key]" else location
            path = ".".join(location)
            message = f"names must be text: write {location[-1]!r} in quotes"
        elif kind == "string_type" and isinstance(item.get("input"), (bool, int, float, date)):
            value = item["input"]
            kind_read = "date" if isinstance(value, date) else "boolean" if isinstance(value, bool) else "number"
            message = f"must be text: write it in quotes (YAML reads {value!s} as a {kind_read})"
        elif kind == "union_tag_invalid":
            message = f"type {item['ctx'].get('tag')!r} is unknown: use one of {item['ctx'].get('expected_tags')}"
        elif kind == "trainops_rule":
            message = item["ctx"]["message"]
        elif message.startswith("Value error, "):
            message = message[len("Value error, "):]
        problems.append(Problem(path, message))
        if any(_is_tag(part) and not str(part).startswith("function-") for part in item["loc"]):
            union_paths.add(path)
    return _unique(_merge_union_alternatives(problems, union_paths))


# The member tags pydantic puts in the location of an error inside an undiscriminated union (a pipeline's
# `spec: str | dict[str, Any]` gives `steps.train.spec.str` and `steps.train.spec.dict[str,any]`).
_UNION_TAG = re.compile(r"^(str|int|float|bool|bytes|none|dict|list|tuple|set|frozenset|literal|union|nullable|"
                        r"lax-or-strict|json-or-python|is-instance|function-[a-z]+)(\[.*\])?\Z")


def _is_tag(part: Any) -> bool:
    return isinstance(part, str) and (part.startswith("function-") or bool(_UNION_TAG.match(part)))


def clean_location(loc: tuple) -> list[str]:
    """A pydantic location as the dotted path parts of the user's document.

    The job spec already reports `distribution` and `inputs` errors without pydantic's union tags; what is left to
    drop are the names of function validators and the member tags of undiscriminated unions.
    """
    # A tag is never the first part: a top-level key named like one ("none", "str") is the user's own key.
    return [str(part) for index, part in enumerate(loc) if index == 0 or not _is_tag(part)]


def _merge_union_alternatives(problems: list[Problem], union_paths: set[str]) -> list[Problem]:
    """One problem per path where every alternative of a union failed, saying what each one wanted."""
    merged: list[Problem] = []
    for problem in problems:
        if problem.path in union_paths:
            alternatives = [other.message for other in problems if other.path == problem.path]
            if any(kept.path == problem.path for kept in merged):
                continue
            problem = Problem(problem.path, "fits none of its accepted forms: " + "; or ".join(alternatives))
        merged.append(problem)
    return merged


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    seen, result = set(), []
    for problem in problems:
        key = (problem.path, problem.message)
        if key not in seen:
            seen.add(key)
            result.append(problem)
    return result


# Values for required fields in the second pass of parse_job_spec (never reported, never used by a rule that runs).
PLACEHOLDERS = {"entry_point": "placeholder.py"}


def parse_job_spec(data: Any, source: str = "job spec", *, rule_sets: frozenset[str] | None = None) -> JobSpec:
    """Validate plain data as a `JobSpec`; every problem comes back in one `SpecError`. ``rule_sets``: those the
    engine the spec is for binds (`trainops.spec.rule_registry`; None: the default backend's); a `JobSpec` given is
    checked by the rules of those sets (`check_rule_sets`).

    pydantic checks the fields first and runs the cross-field rules only when every field is valid. So that one run
    reports everything, a spec with invalid fields is checked a second time without them, running the rules that
    do not read any of them (`trainops.spec.rules`), and their problems are added to the report.
    """
    if isinstance(data, JobSpec):
        return check_rule_sets(data, rule_sets, source)
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "nothing"
        raise SpecError(f"a job spec is a mapping of fields (entry_point, instance_type, ...), got {kind}", source)

    if is_v3(data):  # written in ModelTrainer's names: the same spec in v2's (trainops.spec.v3)
        converted = from_model_trainer(data)  # its own problems are at the keys the user wrote
        try:
            return parse_job_spec(converted, source, rule_sets=rule_sets)
        except SpecError as error:  # the converted spec's, told in the v3 names
            raise v3_problems(error) from None
    context: dict[str, Any] = {} if rule_sets is None else {RULE_SETS: frozenset(rule_sets)}
    try:
        return JobSpec.model_validate(data, context=context)
    except ValidationError as error:
        problems = problems_from_validation_error(error, JobSpec, data)
        if not context.get(RULES_RAN) and len(problems) <= MAX_PROBLEMS:
            problems += _rule_problems_without(problems, data, rule_sets)
        raise SpecError(capped(_unique(problems)), source) from None
    except RecursionError:
        raise SpecError("the spec is nested too deeply", source) from None


def capped(problems: list[Problem]) -> list[Problem]:
    """At most MAX_PROBLEMS problems, the last one saying how many more there were."""
    if len(problems) <= MAX_PROBLEMS:
        return problems
    hidden = len(problems) - MAX_PROBLEMS
    return problems[:MAX_PROBLEMS] + [Problem("", f"... and {hidden} more problems (fix the ones above first)")]


def check_rule_sets(spec: JobSpec, rule_sets: frozenset[str] | None, source: str = "job spec") -> JobSpec:
    """``spec``, checked by the rules of the sets an engine binds (None: the default backend's, which a parsed spec
    passed already): a spec parsed for one engine and handed to another meets the other's rules too."""
    if rule_sets is None:
        return spec
    problems = all_problems(spec, rule_sets=frozenset(rule_sets), bound_only=True)
    if problems:
        raise SpecError(capped(_unique(problems)), source)
    return spec


def _rule_problems_without(problems: list[Problem], data: dict,
                           rule_sets: frozenset[str] | None = None) -> list[Problem]:
    """The cross-field problems of `data` without its invalid fields, from the rules that don't read them."""
    invalid = {problem.path.split(".")[0] for problem in problems}
    fields = _known_fields(JobSpec) + list(JobSpec.model_fields)
    # A misspelt key stands for the field it meant: rules reading that field would see its default, not the value.
    meant = {close for key in invalid for close in difflib.get_close_matches(key, fields, n=1)}
    skip = {name for name, field in JobSpec.model_fields.items() if {name, field.alias} & (invalid | meant)}
    rest = {key: value for key, value in data.items() if str(key) not in invalid}
    # Required fields stand in with a placeholder (rules reading them are skipped: they are in `skip`).
    rest.update({name: PLACEHOLDERS[name] for name, field in JobSpec.model_fields.items()
                 if field.is_required() and name not in rest})
    try:
        context: dict[str, Any] = {SKIP_RULES_READING: skip | invalid}
        if rule_sets is not None:
            context[RULE_SETS] = frozenset(rule_sets)
        JobSpec.model_validate(rest, context=context)
    except ValidationError as error:
        return [problem for problem in problems_from_validation_error(error, JobSpec, rest)
                if problem.path.split(".")[0] not in invalid | skip]
    except RecursionError:
        return []
    return []


def load_job_spec(path: str | Path, *, rule_sets: frozenset[str] | None = None) -> JobSpec:
    """Read and validate a job spec file (``rule_sets``: see `parse_job_spec`); relative `source_dir` is resolved
    against the file's directory."""
    data = read_document(path)
    spec = parse_job_spec(data, str(path), rule_sets=rule_sets)
    return resolve_relative_paths(spec, Path(path).resolve().parent)


def resolve_relative_paths(spec: JobSpec, base: Path) -> JobSpec:
    """Make local paths in the spec (source_dir, dependencies, local channels, model_uri and output_path) absolute
    against `base`."""
    updates: dict[str, Any] = {}
    if spec.source_dir and not spec.source_dir.startswith("s3://") and not Path(spec.source_dir).is_absolute():
        updates["source_dir"] = str((base / spec.source_dir).resolve())
    elif not spec.source_dir and spec.entry_point:
        # As the SDK does without source_dir, the entry point's own directory holds the code.
        entry = (base / spec.entry_point).resolve()
        updates["source_dir"], updates["entry_point"] = str(entry.parent), entry.name
    if spec.output_path and is_local_uri(spec.output_path):
        path = Path(local_path(spec.output_path))
        if not path.is_absolute():
            updates["output_path"] = str((base / path).resolve())
    if spec.dependencies:  # SDK estimator options (issue 25): local directories and a local model
        updates["dependencies"] = [item if Path(item).is_absolute() else str((base / item).resolve())
                                   for item in spec.dependencies]
    if spec.model_uri and is_local_uri(spec.model_uri) and not Path(local_path(spec.model_uri)).is_absolute():
        updates["model_uri"] = str((base / local_path(spec.model_uri)).resolve())
    tensorboard = spec.tensorboard_output_config
    if tensorboard and is_local_uri(tensorboard.s3_output_path) and not Path(
            local_path(tensorboard.s3_output_path)).is_absolute():
        updates["tensorboard_output_config"] = tensorboard.model_copy(
            update={"s3_output_path": str((base / local_path(tensorboard.s3_output_path)).resolve())})
    inputs = {}
    for name, channel in spec.inputs.items():
        uri = channel if isinstance(channel, str) else getattr(channel, "s3_data", None)
        if uri is not None and is_local_uri(uri) and not Path(local_path(uri)).is_absolute():
            absolute = str((base / local_path(uri)).resolve())
            inputs[name] = absolute if isinstance(channel, str) else channel.model_copy(update={"s3_data": absolute})
    if inputs:
        updates["inputs"] = {**spec.inputs, **inputs}
    return spec.model_copy(update=updates) if updates else spec
