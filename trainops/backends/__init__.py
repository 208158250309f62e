"""The backend registry: a backend's name -> the dotted path of its class, imported only when it is asked for.

The registry is not the interface (that is `trainops.backends.api`): it holds names and paths, so that a local run
never imports the SageMaker modules and a SageMaker run never imports the local ones. A third party adds a backend
without editing trainops, through the ``trainops.backends`` entry-point group (``name = "package.module:Class"``),
as torchx's schedulers do. A built-in name cannot be taken over by an entry point. A platform team names settings
once (`trainops.backends.named_file`: ``hpc: {backend: slurm, options: {...}}``), and every front end says ``hpc``.

`get_backend` is the only place a backend's name becomes an object, and `DEFAULT_BACKEND` the only place the default
is named. Light on purpose: DAG files import it.

Function-local imports (DAG-parse path, cycle): the operators import this registry, and a DAG file the operators;
each backend, the seam (`api`, which imports this package) and the file of named backends load when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.backends.api import Backend

#: Built-in backends: name -> "module:Class", in the order messages list them.
BUILTIN: dict[str, str] = {
    "local": "trainops.backends.local.backend:LocalBackend",
    "sagemaker": "trainops.backends.sagemaker.backend:SageMakerBackend",
    "slurm": "trainops.backends.slurm.backend:SlurmBackend",
    "kubernetes": "trainops.backends.kubernetes.backend:KubernetesBackend",
    "ray": "trainops.backends.ray.backend:RayBackend",
}
#: The backend a front end uses when none is named (a command without --backend, a pipeline file without backend:,
#: an operator without backend=): the one place it is spelled.
DEFAULT_BACKEND = "local"
#: The entry-point group a third-party backend registers in.
ENTRY_POINT_GROUP = "trainops.backends"
#: Settings a front end may hand any backend (the deployment's environment, not the job's options): a backend reads
#: the ones in its ``CONTEXT`` and leaves the others; a key outside this set and the backend's own is an error.
COMMON_CONTEXT = frozenset({"workdir", "registry_dir", "region", "client_factory", "poll_seconds"})


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTIN)


def default_backend() -> str:
    """The backend used when none is named."""
    return DEFAULT_BACKEND


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    found = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name not in BUILTIN:
            found[point.name] = point.value
    return found


def registered() -> dict[str, str]:
    """Every backend: the built-in ones, then those of installed packages' entry points."""
    return {**BUILTIN, **_entry_points()}


def named() -> dict[str, Any]:
    """The named backends of the platform's file (`trainops.backends.named_file`): name -> `NamedBackend`."""
    from trainops.backends.named_file import named_backends

    return named_backends(registered())


def choices() -> list[str]:
    """Every name a front end may give: the backends, then the named ones."""
    return [*registered(), *named()]


def _unknown(name: str, source: str | None = None) -> SpecError:
    from trainops.backends.named_file import ENVIRONMENT, config_path

    names = named()
    also = f"; named backends: {', '.join(names)}" if names else ""
    return SpecError(Problem("backend", f"{name!r} is not a backend; use one of {', '.join(registered())}{also} "
                                        f"(named backends are read from {config_path()}, ${ENVIRONMENT})"), source)


def resolve(name: str | None, source: str | None = None) -> tuple[str, dict[str, Any]]:
    """(the backend, the settings its name binds) of a name a front end was given: a registered backend binds
    none, a named one (`named`) its entry's options; None is `DEFAULT_BACKEND`."""
    name = DEFAULT_BACKEND if name is None else name
    if isinstance(name, str) and (name in BUILTIN or name in _entry_points()):
        return name, {}
    entry = named().get(name) if isinstance(name, str) else None
    if entry is None:
        raise _unknown(str(name), source)
    return entry.backend, dict(entry.options)


def check_backend_name(name: str | None, source: str | None = None) -> str:
    """Refuse a name no backend is registered or named under (entry points and the named backends' file are read
    only for a name not built in); None is `DEFAULT_BACKEND`."""
    resolve(name, source)
    return DEFAULT_BACKEND if name is None else name


def backend_class(name: str | None, source: str | None = None) -> type[Backend]:
    """The class of backend ``name`` (a named backend's: its backend's), its module imported now (and only now)."""
    from trainops.backends.api import Backend

    name, _ = resolve(name, source)
    path = BUILTIN.get(name) or _entry_points()[name]
    module_name, _, attribute = path.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise SpecError(Problem("backend", f"backend {name!r} is registered as {path!r}, which cannot be imported "
                                           f"({error}); install the package that provides it"), source) from error
    if not (isinstance(found, type) and issubclass(found, Backend)):
        raise SpecError(Problem("backend", f"backend {name!r} ({path}) is not a trainops.backends.api.Backend"),
                        source)
    return found


def get_backend(name: str | Backend | None = None, *, options: Mapping[str, Any] | None = None,
                source: str | None = None, **context: Any) -> Backend:
    """The backend called ``name`` (None: `DEFAULT_BACKEND`; a named backend: its backend), bound to its settings;
    or ``name`` itself when it is a backend already opened (`opened_backend`), which refuses settings it cannot take.

    ``options`` is the one mapping of settings a user gave (a command's ``-o``, a pipeline file's or an operator's
    ``backend_options``, a KFP input), laid over a named backend's: the backend's `Backend.split_settings` takes
    those that reach it (its ``CONTEXT``) and those of its jobs (its ``Options`` type), coerces text to their
    declared types and refuses any other, naming it. ``context`` is what the front end itself knows of the
    deployment: the keys of `COMMON_CONTEXT` (``workdir`` and ``registry_dir``: local; ``region``,
    ``client_factory``, ``poll_seconds``: SageMaker) plus the backend's own ``CONTEXT``; a common key the backend does
    not read is left out, so a front end may pass all it knows, and a setting the user gave wins over it. Any
    other key, or an unknown name, is a `SpecError` naming the field and the valid values (``source``: what the
    error says was wrong, e.g. ``"evaluation"``).
    """
    from trainops.backends.api import Backend

    if isinstance(name, Backend):
        return opened_backend(name, options, source, **context)
    real, settings = resolve(name, source)
    cls = backend_class(real, source)
    _check_context(cls, context, source)
    reach, job_options = cls.split_settings({**settings, **dict(options or {})}, source)
    given = {key: value for key, value in context.items() if key in cls.CONTEXT}
    backend = cls(**{**given, **{key: value for key, value in reach.items() if value is not None}})
    backend.bound_options = cls.Options.parse(job_options, source)
    backend.named_as = name if name is not None and name != real else None
    return backend


def opened_backend(backend: Backend, options: Mapping[str, Any] | None = None, source: str | None = None,
                   **context: Any) -> Backend:
    """``backend``, already opened by the caller (an operator's connection, a command's flags), as `get_backend`
    takes it: its settings were bound when it was opened, so settings given beside it cannot reach it. Rather than
    drop them, a `SpecError` names them: non-empty ``options`` (``backend_options``), and each context value the
    backend reads (its ``CONTEXT``; None is not given, a common key it does not read is left out as for a name)."""
    cls = type(backend)
    _check_context(cls, context, source)
    problems = []
    if options:
        problems.append(Problem("backend_options", f"{', '.join(sorted(options))} cannot reach the {cls.name} "
                                                   "backend given already opened (it keeps the settings it was "
                                                   "opened with): give the backend's name with backend_options, or "
                                                   "open it with them (get_backend(name, options=...))"))
    problems.extend(Problem(key, f"cannot reach the {cls.name} backend given already opened: give the backend's "
                                 f"name with {key}, or open it with {key}")
                    for key, value in sorted(context.items()) if value is not None and key in cls.CONTEXT)
    if problems:
        raise SpecError(problems, source)
    return backend


def _check_context(cls: type[Backend], context: Mapping[str, Any], source: str | None) -> None:
    """Refuse a context key that is neither common (`COMMON_CONTEXT`) nor the backend's own, naming the valid ones."""
    unknown = sorted(set(context) - COMMON_CONTEXT - cls.CONTEXT)
    if unknown:
        known = ", ".join(sorted(COMMON_CONTEXT | cls.CONTEXT))
        raise SpecError([Problem(key, f"is not a backend setting; use one of {known}") for key in unknown], source)
