"""The backend registry: a backend's name -> the dotted path of its class, imported only when it is asked for.

The registry is not the interface (that is `trainops.backends.api`): it holds names and paths, so that a local run
never imports the SageMaker modules and a SageMaker run never imports the local ones. A third party adds a backend
without editing trainops, through the ``trainops.backends`` entry-point group (``name = "package.module:Class"``),
as torchx's schedulers do. A built-in name cannot be taken over by an entry point.

`get_backend` is the only place a backend's name becomes an object. Light on purpose: DAG files import it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.backends.api import Backend

#: Built-in backends: name -> "module:Class", in the order messages list them.
BUILTIN: dict[str, str] = {
    "local": "trainops.backends.local.backend:LocalBackend",
    "sagemaker": "trainops.backends.sagemaker.backend:SageMakerBackend",
}
#: The entry-point group a third-party backend registers in.
ENTRY_POINT_GROUP = "trainops.backends"
#: Settings a front end may hand any backend (the deployment's environment, not the job's options): a backend reads
#: the ones in its ``CONTEXT`` and leaves the others; a key outside this set and the backend's own is an error.
COMMON_CONTEXT = frozenset({"workdir", "registry_dir", "region", "client_factory", "poll_seconds"})


def builtin_names() -> tuple[str, ...]:
    return tuple(BUILTIN)


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


def _unknown(name: str, source: str | None = None) -> SpecError:
    return SpecError(Problem("backend", f"{name!r} is not a backend; use one of {', '.join(registered())}"), source)


def check_backend_name(name: str, source: str | None = None) -> str:
    """Refuse a name no backend is registered under (entry points are read only for a name not built in)."""
    if not isinstance(name, str) or (name not in BUILTIN and name not in _entry_points()):
        raise _unknown(str(name), source)
    return name


def backend_class(name: str, source: str | None = None) -> type[Backend]:
    """The class of backend ``name``, its module imported now (and only now)."""
    from trainops.backends.api import Backend

    path = BUILTIN.get(name) if isinstance(name, str) else None
    if path is None and isinstance(name, str):
        path = _entry_points().get(name)
    if path is None:
        raise _unknown(str(name), source)
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


def get_backend(name: str, *, source: str | None = None, **context: Any) -> Backend:
    """The backend called ``name``, bound to its context.

    Context keys: those of `COMMON_CONTEXT` (``workdir`` and ``registry_dir``: local; ``region``,
    ``client_factory``, ``poll_seconds``: SageMaker) plus the backend's own ``CONTEXT``. A common key the backend
    does not read is left out, so a front end may pass all it knows; any other key, or an unknown name, is a
    `SpecError` naming the field and the valid values (``source``: what the error says was wrong, e.g.
    ``"evaluation"``).
    """
    cls = backend_class(name, source)
    unknown = sorted(set(context) - COMMON_CONTEXT - cls.CONTEXT)
    if unknown:
        known = ", ".join(sorted(COMMON_CONTEXT | cls.CONTEXT))
        raise SpecError([Problem(key, f"is not a backend setting; use one of {known}") for key in unknown], source)
    return cls(**{key: value for key, value in context.items() if key in cls.CONTEXT})
