"""Each backend's options for a training job, typed and checked by the backend that owns them.

A front end knows options only by name (a CLI flag, an operator argument, a KFP input); it hands them to
`Backend.submit`, whose backend parses them into its own type here. An option the backend does not know is a
`SpecError` naming the option and the backend's options, never ignored: a ``processes_per_host`` given to a SageMaker
job was silently dropped before, and so was a ``launcher`` typo. A value of None means "not given", so a front end may
pass every argument it has without deciding which backend reads which (an empty mapping or list counts as not given).

The types live beside the seam, not inside each backend, so that a front end can build them without importing a
concrete backend (kubeflow/sdk's options objects are the model); a third-party backend declares its own subclass.

Values given as text (the command line's ``-o KEY=VALUE``, a templated Airflow field, a named backend's file) are
coerced by the field's declared type (`coerce`): ``false`` to a bool, ``2`` to an int, ``train=/data`` (or a JSON
object) to a mapping, ``a,b`` (or a JSON array) to a list; what cannot be is a `SpecError` naming the option and the
backend.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from trainops.backends.hostfs.paths import checkpoint_key_problem
from trainops.errors import Problem, SpecError

#: Settings that take a Python object whatever their declared type (the local backend's ``client_factory`` is
#: typed Any): code gives them, ``-o`` never does.
PYTHON_OBJECT_SETTINGS = frozenset({"client_factory", "on_job"})

#: The metadata keys of a described options field.
HELP, DEFAULT = "trainops_help", "trainops_default"


def described(help: str, default: str | None = None) -> dict[str, str]:
    """The metadata of an options field that says what it means and what applies when it is not given."""
    return {HELP: help, **({DEFAULT: default} if default is not None else {})}


def internal(name: str, hint: Any) -> bool:
    """Whether a setting takes a Python object (never text, never listed)."""
    return name in PYTHON_OBJECT_SETTINGS or kind_of(hint) == "callable"


def offered(known: Mapping[str, Any]) -> list[str]:
    """The settings of ``known`` (name -> declared type) a user may give as text, sorted."""
    return sorted(name for name, hint in known.items() if not internal(name, hint))


def unknown_settings(unknown: Iterable[str], known: Mapping[str, Any], owner: str,
                     fix: str = "leave it out or choose the backend it belongs to") -> list[Problem]:
    """One problem per setting ``owner`` (``the local backend``) does not take: the closest it does take ("did you
    mean"), and the list of those a user may give (`offered`), never the internal ones."""
    import difflib

    names = offered(known)
    listed = ", ".join(names) or "none"
    problems = []
    for key in sorted(unknown):
        lowered = {name.lower(): name for name in names}
        close = ([lowered[key.lower()]] if key.lower() in lowered
                 else difflib.get_close_matches(key.lower(), names, n=1, cutoff=0.6))
        guess = f"did you mean {close[0]!r}? " if close else ""
        problems.append(Problem(key, f"is not a setting of {owner} (its settings: {listed}); {guess}{fix}"))
    return problems


#: The two launchers a SageMaker request can carry: trainops' runtime, or the image's own toolkit.
LAUNCHERS = ("trainops", "toolkit")

OptionsT = TypeVar("OptionsT", bound="BackendOptions")
DocumentT = TypeVar("DocumentT")


@dataclass(frozen=True)
class BackendOptions:
    """The options one backend takes for a training job; subclasses declare their fields."""

    backend: ClassVar[str] = ""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(item.name for item in fields(cls))

    @classmethod
    def parse(cls: type[OptionsT], values: BackendOptions | Mapping[str, Any] | None = None,
              source: str | None = None) -> OptionsT:
        """These options from a mapping (None values left out), an instance of this type, or nothing.

        Raises `SpecError` naming every option this backend does not know, and an options object of another
        backend's type."""
        if values is None:
            return cls()
        if isinstance(values, cls):
            return values
        if isinstance(values, BackendOptions):
            raise SpecError(Problem("options", f"{type(values).__name__} holds options of the {values.backend} "
                                               f"backend, not of the {cls.backend} backend"), source)
        given = {key: value for key, value in values.items() if _given(value)}
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise SpecError(unknown_settings(unknown, cls.types(), f"the {cls.backend} backend"), source)
        return cls(**coerce_all(given, cls.types(), f"the {cls.backend} backend", source))

    @classmethod
    def types(cls) -> dict[str, Any]:
        """Each option's declared type (what a value given as text is coerced to)."""
        return declared_types(cls, cls.names())

    def merged(self: OptionsT, values: Mapping[str, Any]) -> OptionsT:
        """A copy with ``values`` (None values left out) laid over these options, checked the same way."""
        current = {name: getattr(self, name) for name in self.names()}
        return type(self).parse({**current, **{key: value for key, value in values.items() if _given(value)}})

    def to_dict(self) -> dict[str, Any]:
        """The options given (not None), for a record or an XCom; callables are left out."""
        return {name: value for name in self.names()
                if (value := getattr(self, name)) is not None and not callable(value)}


def declared_types(owner: Any, names: typing.Iterable[str]) -> dict[str, Any]:
    """The declared types of ``names`` among ``owner``'s annotations (a dataclass's fields, a function's
    parameters); Any where an annotation cannot be resolved (a name imported only for type checking)."""
    try:
        hints = typing.get_type_hints(owner)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: that value is taken as given
        hints = {}
    return {name: hints.get(name, Any) for name in names}


#: What each declared type is coerced to from text, in the order a union is tried (``str | PathLike``: text).
_KINDS = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def kind_of(hint: Any) -> str:
    """"bool", "int", "float", "str", "mapping", "list", "callable" or "any" for a declared type."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or (hasattr(types, "UnionType") and isinstance(hint, types.UnionType)):
        kinds = [kind_of(arg) for arg in typing.get_args(hint) if arg is not type(None)]
        for wanted in ("str", "mapping", "list", "bool", "int", "float", "callable"):
            if wanted in kinds:
                return wanted
        return "any"
    target = origin or hint
    if target is Any or not isinstance(target, type):
        return "callable" if target is Callable or origin is Callable else "any"
    if issubclass(target, Mapping):
        return "mapping"
    if issubclass(target, (list, tuple)) or target in (typing.Sequence, typing.AbstractSet):
        return "list"
    if target.__module__ == "collections.abc" and target.__name__ in ("Sequence", "Iterable", "Set"):
        return "list"
    if target.__module__ == "collections.abc" and target.__name__ == "Callable":
        return "callable"
    for python, name in _KINDS:
        if issubclass(target, python):
            return name
    return "any"


def _json_document(text: str, kind: type[DocumentT], what: str,
                   refuse: Callable[[str], SpecError]) -> DocumentT:
    """``text`` read as a JSON ``what`` (an object, an array: a setting given as JSON), else ``refuse``'s error."""
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, kind):
        raise refuse(f"is not a JSON {what}")
    return document


def coerce(name: str, value: Any, hint: Any, owner: str) -> Any:
    """``value`` for a setting of declared type ``hint``: text (or a list of texts, one per ``-o``) coerced to it,
    anything else as given (its type is the setting's own check). Raises `SpecError` naming the setting and
    ``owner`` (``the local backend``) when the text cannot be that type."""
    kind = kind_of(hint)
    texts = value if isinstance(value, list) and value and all(isinstance(item, str) for item in value) else None
    if not isinstance(value, str) and texts is None:
        return value

    def refuse(why: str) -> SpecError:
        return SpecError(Problem(name, f"{value!r} {why} (a setting of {owner})"))

    if kind == "mapping":
        merged: dict[str, Any] = {}
        for text in texts or [value]:
            if text.lstrip().startswith("{"):
                merged.update(_json_document(text, dict, "object", refuse))
                continue
            for pair in (part for part in text.split(",") if part.strip()):
                key, separator, item = pair.partition("=")
                if not separator or not key.strip():
                    raise refuse("is not KEY=VALUE[,KEY=VALUE...] or a JSON object")
                merged[key.strip()] = item
        return merged
    if kind == "list":
        items: list[Any] = []
        for text in texts or [value]:
            if text.lstrip().startswith("["):
                items.extend(_json_document(text, list, "array", refuse))
            else:
                items.extend(part.strip() for part in text.split(",") if part.strip())
        return items
    if texts is not None:
        if len(set(texts)) > 1:
            raise refuse("gives one setting several values: give it once")
        value = texts[0]
    text = value.strip()
    if kind == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise refuse("is not true or false")
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise refuse("is not a whole number") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise refuse("is not a number") from None
    if kind == "callable" or name in PYTHON_OBJECT_SETTINGS:  # a client factory typed Any is an object too
        raise refuse("cannot be given as text: this setting takes a Python object")
    return value


def coerce_all(values: Mapping[str, Any], hints: Mapping[str, Any], owner: str,
               source: str | None = None) -> dict[str, Any]:
    """Every value coerced (`coerce`), every problem reported at once."""
    problems: list[Problem] = []
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        try:
            coerced[key] = coerce(key, value, hints.get(key, Any), owner)
        except SpecError as error:
            problems.extend(error.problems)
    if problems:
        raise SpecError(problems, source)
    return coerced


def _given(value: Any) -> bool:
    """None and an empty mapping or list mean "not given" (a CLI's ``--channel`` flags, none used, make ``{}``)."""
    return value is not None and not (isinstance(value, (Mapping, list, tuple)) and not value)


def _interpreter(path: Any) -> str | None:
    """An absolute path to the executable file ``path`` names (a bare name is looked up on PATH), else None."""
    import os
    import shutil

    if not isinstance(path, str) or not path:
        return None
    found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
    if not found or not os.path.isfile(found):
        return None
    return os.path.abspath(found)


def _launcher_problem(launcher: str | None) -> Problem | None:
    if launcher is not None and launcher not in LAUNCHERS:
        return Problem("launcher", f"{launcher!r} is not a launcher; use one of {', '.join(LAUNCHERS)}")
    return None


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """Options of a job on the local backend (emulated hosts on this machine). Each field says what it means and what
    applies when it is not given (`trainops.backends.setting_help`: `trainops backends` lists them)."""

    backend: ClassVar[str] = "local"

    processes_per_host: int | None = field(default=None, metadata=described(
        "ranks per emulated host", "the spec's, else the GPUs, else one"))
    channel_overrides: Mapping[str, str] | None = field(default=None, metadata=described(
        "channel name -> a local directory, where the spec's channel is in S3 or FSx (NAME=DIR,...)",
        "the spec's channels"))
    checkpoint_key: str | None = field(default=None, metadata=described(
        "the checkpoint directory's key under the state root, so that the attempts of one task resume from the "
        "same checkpoints", "the job's name"))
    launcher: str | None = field(default=None, metadata=described(
        "trainops (the runtime launches the ranks) or toolkit (the image's own SageMaker training toolkit)",
        "the spec's launcher"))
    image_python: str | None = field(default=None, metadata=described(
        "the interpreter standing for the training image (a venv without trainops)", "this interpreter"))
    #: Called with the prepared job before it runs in this process (code only; prefer ``Backend.stop(handle)``).
    on_job: Callable[[Any], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        problems = []
        count = self.processes_per_host
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            problems.append(Problem("processes_per_host", f"{count!r} is not a whole number of at least 1"))
        problems += front_end_option_problems(self.channel_overrides, self.checkpoint_key,
                                              directory="local directory (both strings)")
        if self.image_python is not None:
            found = _interpreter(self.image_python)
            if found is None:
                problems.append(Problem("image_python", f"{self.image_python!r} is not an executable Python "
                                                        "interpreter: give the python of the venv standing for the "
                                                        "image (e.g. $(python tests/support/image_venv.py))"))
            else:
                object.__setattr__(self, "image_python", found)
        if self.on_job is not None and not callable(self.on_job):
            problems.append(Problem("on_job", "is not callable"))
        launcher = _launcher_problem(self.launcher)
        problems += [launcher] if launcher else []
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True)
class SageMakerOptions(BackendOptions):
    """Options of a job on the SageMaker backend, each with what it means and its default."""

    backend: ClassVar[str] = "sagemaker"

    launcher: str | None = field(default=None, metadata=described(
        "trainops (the runtime as the entrypoint) or toolkit (the DLC's own toolkit; the SDK's hyperparameter "
        "encoding)", "the spec's launcher"))
    preflight: bool = field(default=True, metadata=described(
        "check FSx, VPC and capacity settings with AWS calls before the job is created", "true"))

    def __post_init__(self) -> None:
        problems = []
        launcher = _launcher_problem(self.launcher)
        problems += [launcher] if launcher else []
        if not isinstance(self.preflight, bool):
            problems.append(Problem("preflight", f"{self.preflight!r} is not true or false"))
        if problems:
            raise SpecError(problems)


def front_end_option_problems(channel_overrides: Any, checkpoint_key: Any, *, directory: str,
                              is_directory: Callable[[str], bool] = lambda value: True) -> list[Problem]:
    """The problems of the options a pipeline's train step passes a training backend: ``channel_overrides`` a
    mapping of channel name -> ``directory`` (a value each ``is_directory`` takes), ``checkpoint_key`` a safe name
    (`checkpoint_key_problem`). Every backend that runs from a pipeline declares both fields and checks them here."""
    problems: list[Problem] = []
    if channel_overrides is not None and (not isinstance(channel_overrides, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) and is_directory(value)
            for key, value in channel_overrides.items())):
        problems.append(Problem("channel_overrides", f"give a mapping of channel name -> {directory}"))
    if checkpoint_key is not None:
        problem = checkpoint_key_problem(checkpoint_key)
        if problem:
            problems.append(Problem("checkpoint_key", problem))
    return problems


def path_problems(value: Any, name: str, problems: list[Problem], absolute: bool = False) -> None:
    """A path setting's problems appended to ``problems`` (None: not set): a non-empty single-line string, absolute
    where every node of a cluster must find it."""
    if value is None:
        return
    if not isinstance(value, str) or not value or "\n" in value or "\0" in value:
        problems.append(Problem(name, f"{value!r} is not a path"))
    elif absolute and not os.path.isabs(os.path.expanduser(value)):
        problems.append(Problem(name, f"{value!r} is not an absolute path: every node must find it"))
