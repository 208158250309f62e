"""The train step: one job spec, run on any backend (`trainops.backends.api.get_backend`), re-attaching instead of
duplicating.

Used by `trainops run`, the pipeline runner, the Airflow operator and the KFP component. It returns a small JSON-able
dict (`JobResult.to_dict`, never a whole describe response): backend, job name, status, model artifact, failure
reason, durations. The re-attach policy (`if_exists`) is `trainops.backends.api.place_job`: a running or finished job
of the same name is followed; one that failed or was stopped is retried under a suffixed name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.api import BACKENDS, IF_EXISTS, JobHandle, check_choice, get_backend  # noqa: F401 - re-exported
from trainops.backends.vocabulary import vocabulary_of
from trainops.errors import JobFailed  # noqa: F401 - re-exported for callers of this module
from trainops.spec.loader import load_job_spec, parse_job_spec, resolve_relative_paths
from trainops.spec.names import check_job_name, timestamped_job_name
from trainops.steps.attempts import guards_for, train_in_attempts
from trainops.steps.forecast import check_budget

if TYPE_CHECKING:
    from trainops.backends.api import Backend
    from trainops.spec.job import JobSpec

Log = Callable[[str], None]
#: The options that bind a backend (`get_backend`'s context); every other option goes to `Backend.submit`.
CONTEXT_OPTIONS = ("workdir", "registry_dir", "region", "client_factory", "poll_seconds")


def default_job_name(spec: JobSpec) -> str:
    """<name>-<timestamp>, as the SDK names jobs when none is given."""
    return timestamped_job_name(spec.name or "trainops")


def load_spec(spec: Any, base_dir: str | os.PathLike[str] | None = None, *, backend: Any = None) -> JobSpec:
    """A JobSpec from a JobSpec, a mapping or a YAML/JSON path; relative paths resolve against the file's directory
    (or `base_dir`, else the working directory, for mappings). Checked by the spec rules ``backend`` binds (its
    vocabulary's `spec_rules`: a name, an opened backend or its class; None: the default backend's)."""
    rule_sets = None if backend is None else vocabulary_of(backend).spec_rules
    if isinstance(spec, (str, os.PathLike)) and not isinstance(spec, dict):
        return load_job_spec(os.fspath(spec), rule_sets=rule_sets)
    parsed = parse_job_spec(spec, rule_sets=rule_sets)
    return resolve_relative_paths(parsed, Path(base_dir or os.getcwd()).resolve())


def train(
    spec: Any,
    *,
    backend: str | Backend | None = None,
    backend_options: Mapping[str, Any] | None = None,
    job_name: str | None = None,
    if_exists: str = "reattach",
    wait: bool = True,
    log: Log | None = None,
    on_handle: Callable[[Any, JobHandle], None] | None = None,
    retries: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """Run (or re-attach to) a training job and return its outcome as a dict; raises `JobFailed` (carrying
    ``result``) when it failed or was stopped.

    ``backend``: a backend's name (None: the registry's default; a named backend: its backend and settings) or a
    backend already opened (`trainops.backends.get_backend`: settings given beside an opened one are refused, naming
    them, never dropped). ``backend_options``: the one mapping of the backend's settings a front end was given
    (``-o``, a pipeline file's or an operator's ``backend_options``), which the backend splits into how it is
    reached and its jobs' options and checks (`Backend.split_settings`).
    ``options``: the deployment's context a front end knows (workdir; region, client_factory, poll_seconds), then
    job options `Backend.submit` takes (an option the backend does not take is refused, naming it).

    ``on_handle(backend, handle)`` is called once the job is placed and before the wait, so a signal handler or an
    ``on_kill`` can call ``backend.stop(handle)``. ``wait=False`` returns at once (a job of this machine runs under
    a detached supervisor).

    ``retries`` are the retry budgets per failure class (`trainops.backends.failures.RetryBudgets`: a mapping such as
    ``{"infrastructure": 3, "user": 0}`` or the text ``infrastructure=3,user=0``; None: one attempt). Each ended
    attempt is classified; only a class with budget left starts another attempt (``<name>-2``, ...), which resumes
    from the shared checkpoint location. The result always carries ``failure_class``, ``attempts`` and ``cost`` (the
    sum over attempts).
    """
    check_choice(if_exists, IF_EXISTS, "if_exists")
    context = {key: options.pop(key) for key in CONTEXT_OPTIONS if key in options}
    chosen = get_backend(backend, options=backend_options, source="backend options", **context)
    spec = load_spec(spec, options.pop("base_dir", None), backend=chosen)
    job_name = check_job_name(job_name) if job_name else default_job_name(spec)
    if "checkpoint_key" not in options and getattr(chosen.options(), "checkpoint_key", None) is None:
        # Checkpoints follow the job's identity, this step's name: its attempts <name>-N and a re-run of the name
        # resume them, a new name starts afresh (where the backend takes a key; never over one given).
        options.update(vocabulary_of(chosen).takes({"checkpoint_key": job_name}))
    log = log or (lambda line: print(line, flush=True))
    if wait and if_exists == "reattach":
        return train_in_attempts(chosen, spec, job_name, retries=retries, log=log, on_handle=on_handle, **options)

    check_budget(spec, backend=chosen)  # budget: refuse refuses before anything is created
    handle = chosen.submit(spec, job_name, if_exists=if_exists, log=log, detached=not wait, **options)
    if on_handle is not None:
        on_handle(chosen, handle)
    result = chosen.wait(handle, log=log, guards=guards_for(spec, backend=chosen)) if wait else chosen.describe(handle)
    return result.raise_for_status().to_dict()
