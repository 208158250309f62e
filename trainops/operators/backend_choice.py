"""`BackendChoice`: how an operator (and the trigger that waits for its job) reaches its backend, whichever it is.

A task names its backend (``backend=``: a registered one, a named one of the platform's file, or None for the
registry's default) and gives the backend's one mapping of settings (``backend_options=``, templated; the older
job arguments ``launcher``, ``preflight``, ``processes_per_host``, ``channel_overrides`` are shorthands laid into it,
which a backend that does not take them refuses). ``workdir`` and ``region_name`` are the deployment's context
(`trainops.backends.COMMON_CONTEXT`): handed to any backend, read by those that use them, as a DAG wires them
whatever its backend. ``backend_conn_id`` names an Airflow
connection a platform team set once (its secrets backend included) whose extra is ``{"backend": NAME, "options":
{...}}``: the backend when the task names none, and settings under the task's own. Nothing here names a backend:

- what the backend needs to be reached it declares (`Backend.NEEDS`): a region from ``aws`` is the task's AWS
  connection's (``aws_conn_id``) when neither the spec, the settings nor the job's handle give one;
- every backend gets a client factory built lazily from the AWS connection: one that never calls AWS never reads it;
- a job's handle carries where it lives (`JobHandle.location`), which wins over the task's settings when the job is
  found again (the trigger, ``execute_complete``, ``on_kill``).

The choice is small JSON (`to_dict`), so the trigger, rebuilt by any triggerer, reaches the backend the same way;
a connection's settings are read again there, never copied into the trigger's arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainops.backends import backend_class, default_backend
from trainops.backends.api import get_backend
from trainops.errors import Problem, SpecError
from trainops.operators import common
from trainops.operators.common import lazy_aws_client_factory, with_shorthands
from trainops.operators.compat import AIRFLOW_2


class BackendChoice:
    """A task's backend: its name, its settings and the Airflow connections they may come from."""

    def __init__(self, backend: str | None = None, options: Mapping[str, Any] | None = None, *,
                 aws_conn_id: str | None = "aws_default", backend_conn_id: str | None = None,
                 context: Mapping[str, Any] | None = None):
        self.backend = backend or None
        self.options = dict(options or {})
        self.aws_conn_id = aws_conn_id
        self.backend_conn_id = backend_conn_id or None
        #: The deployment's context the task gives (workdir, region): lenient, and not carried to the trigger,
        #: which finds the job where its handle says.
        self.context = {key: value for key, value in (context or {}).items() if value not in (None, "")}
        #: The connection's (backend, options), read on first use: once per choice, so once per task execution.
        self._connection: tuple[str | None, dict[str, Any]] | None = None

    @classmethod
    def of_task(cls, task: Any, **shorthands: Any) -> BackendChoice:
        """The choice of an operator from the arguments every trainops operator takes (``backend``,
        ``backend_options`` with the operator's ``shorthands`` laid in, ``aws_conn_id``, ``backend_conn_id``; its
        ``workdir``, where it has one, and ``region_name`` as the deployment's context)."""
        return cls(task.backend, with_shorthands(task.backend_options, **shorthands), aws_conn_id=task.aws_conn_id,
                   backend_conn_id=task.backend_conn_id,
                   context={"workdir": getattr(task, "workdir", None), "region": task.region_name})

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "options": dict(self.options), "aws_conn_id": self.aws_conn_id,
                "backend_conn_id": self.backend_conn_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, aws_conn_id: str | None = "aws_default") -> BackendChoice:
        data = data or {}
        return cls(data.get("backend"), data.get("options"), aws_conn_id=data.get("aws_conn_id", aws_conn_id),
                   backend_conn_id=data.get("backend_conn_id"))

    def settings(self) -> tuple[str | None, dict[str, Any]]:
        """(the backend's name, its settings): the connection's under the task's own. The connection is read
        once per choice (a secrets backend may be a network call), and its settings copied out each time."""
        if not self.backend_conn_id:
            return self.backend, dict(self.options)
        if self._connection is None:
            self._connection = connection_settings(self.backend_conn_id)
        name, options = self._connection
        return self.backend or name, {**options, **self.options}

    def name(self) -> str:
        """The backend's name as the task gives it (the registry's default when none)."""
        return self.settings()[0] or default_backend()

    def open(self, *, handle: Any = None, region: str | None = None,
             client_factory: Callable[[str], Any] | None = None, **context: Any) -> Any:
        """The backend, bound to the task's settings (and, for a job found again, to where ``handle`` says it
        lives). ``region``: the spec's, which wins over the settings' (the job is created there); ``context``: what
        else the front end knows (a work directory, a registry), which the user's settings win over."""
        name, options = self.settings()
        context = {**self.context, **{key: value for key, value in context.items() if value is not None}}
        if handle is not None and backend_class(name, "backend").name != handle.backend:
            name, options = handle.backend, {}  # settings of another backend: not this job's
        cls = backend_class(name, "backend")
        takes = cls.settings()
        if handle is not None:  # where the job is (its settings among the handle's location) wins over the task's
            options.update({key: value for key, value in handle.location.items() if key in takes})
        found = region or options.get("region") or context.pop("region", None)
        if not found and cls.NEEDS.get("region") == "aws":
            found = common.aws_client_factory(self.aws_conn_id, None)[1]  # the connection's region (or boto3's chain)
        if found and "region" in takes:
            options["region"] = found
        factory = client_factory or lazy_aws_client_factory(self.aws_conn_id, found)
        return get_backend(name, options=options, source="backend_options", client_factory=factory, **context)


def connection_settings(conn_id: str) -> tuple[str | None, dict[str, Any]]:
    """(backend, options) of an Airflow connection's extra ``{"backend": NAME, "options": {...}}``; `SpecError`
    naming ``backend_conn_id`` when the extra is not that."""
    if AIRFLOW_2:
        from airflow.hooks.base import BaseHook  # type: ignore[attr-defined]
    else:
        from airflow.sdk import BaseHook  # type: ignore[no-redef]
    extra = BaseHook.get_connection(conn_id).extra_dejson or {}
    backend, options = extra.get("backend"), extra.get("options") or {}
    if (backend is not None and not isinstance(backend, str)) or not isinstance(options, dict):
        raise SpecError(Problem("backend_conn_id", f"connection {conn_id!r}: its extra must be "
                                                   '{"backend": NAME, "options": {...}}'))
    return backend, dict(options)
