"""What the train component does inside its container: name the job, run (or re-attach to) it, describe the model.

Re-runs re-attach. The job is named deterministically: ``<spec name>-<hash>`` where the hash covers the spec hash,
the data behind local channels and an optional ``run_key``, exactly as `trainops run pipeline.yaml` names it (so a
KFP run and a command-line run of the same pipeline share the job), or the name the pipeline file gives. The step is
called with ``if_exists="reattach"``: a retried or re-run component whose job exists follows it instead of starting a
duplicate; a job of that name that failed is retried under a suffixed name (`trainops.steps.train`).

Cancellation stops the job. When the pod is deleted or the run cancelled, the component gets SIGTERM; the handler
installed here stops what the step started through the seam (``backend.stop(handle)``: a local job's hosts stop in
order, a SageMaker training job gets ``StopTrainingJob``), then the component exits non-zero.
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.backends import backend_class, check_backend_name
from trainops.backends.api import get_backend
from trainops.backends.looks import JobOutOfSight
from trainops.backends.vocabulary import vocabulary_of
from trainops.components.paths import Places, parse_json, places
from trainops.components.paths import backend_options as parse_options
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.secrets import restore_masked
from trainops.steps.attempts import budget_line, cost_figures, cost_line, registry_note
from trainops.steps.identity import local_path, training_job_name
from trainops.steps.train import load_spec, train

logger = logging.getLogger(__name__)

STOP_REASON = "Stopped: the KFP task received SIGTERM (pod deleted or run cancelled)"


class TaskCancelled(JobFailed):
    """The component got SIGTERM; the message says what was stopped."""


def train_job_name(spec, channels: dict[str, str], *, base: str, run_key: str = "", job_name: str = "") -> str:
    """The job's name: the one given, else the pipeline runner's (`trainops.steps.identity.training_job_name`)."""
    return job_name or training_job_name(spec, channels, base=base, run_key=run_key)


def load_component_spec(spec_json: str, spec_dir: str, where: Places, restore_secrets: bool = False,
                        backend: str | None = None):
    """The job spec of a component input: JSON, variables substituted, relative paths against its directory, checked
    by the spec rules ``backend`` binds (None: the default backend's); with ``restore_secrets`` (the train component)
    masked environment values are taken from this process's environment."""
    document = parse_json(spec_json, "spec_json", dict)
    if document is None:
        raise SpecError(Problem("spec_json", "is empty: give the job spec as a JSON object"), source="component input")
    if restore_secrets:
        import os


        # The compiled pipeline carries secrets masked: the pod's environment holds them.
        document = restore_masked(document, os.environ, "spec_json")
    document = where.expand(document, "spec")
    return load_spec(document, base_dir=where.path(spec_dir or ".", "spec_dir"), backend=backend)


def local_channels(channels_json: str, where: Places) -> dict[str, str]:
    """Channel -> absolute local path, or a URI as it is given (``s3://``, ``pvc://ns/claim/path``: opaque here,
    the backend reads it or refuses it, naming the channel); every local path must exist (the data is staged before
    training)."""
    channels = parse_json(channels_json, "channels_json", dict) or {}
    resolved = {}
    for name, value in channels.items():
        path = where.path(str(value), f"channels.{name}")
        if local_path(path) is None:
            resolved[name] = path
            continue
        if not Path(path).exists():
            raise SpecError(Problem(f"channels.{name}", f"{path} does not exist: stage the data first"),
                            source="component input")
        resolved[name] = path
    return resolved


class StopOnSigterm:
    """While the step runs, SIGTERM stops the job it runs instead of leaving it behind: ``backend.stop(handle)``
    with the handle the step placed (`hold` is the step's ``on_handle``).

    A job this process runs (local) only gets a flag: the step then stops every host and returns Stopped. Any other
    job (SageMaker, or a local job another process runs) is asked to stop and `TaskCancelled` is raised to leave the
    wait. A SIGTERM before the step placed its job stops the job of that name and its suffixed copies.
    """

    def __init__(self, backend: str | None, job_name: str, *, workdir: str | None = None,
                 client_factory: Callable[[str], Any] | None = None, options: dict[str, Any] | None = None):
        self.backend = backend
        self.job_name = job_name
        self.workdir = workdir
        self.client_factory = client_factory
        self.options = options
        self.held: list[tuple[Any, Any]] = []  # (backend, JobHandle)
        self.received = False
        self._previous: Any = None

    def hold(self, backend: Any, handle: Any) -> None:
        """Remember the job the step placed (the step's ``on_handle``)."""
        self.held.append((backend, handle))

    def __enter__(self) -> StopOnSigterm:
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.received:  # a second SIGTERM while stopping: the first one is being handled
            return
        self.received = True
        logger.info("[trainops] received %s: stopping training job %s", signal.Signals(signum).name, self.job_name)
        if self.held:
            outcomes = [backend.stop(handle, STOP_REASON) for backend, handle in self.held]
            if all(backend.runs_here(handle) for backend, handle in self.held):
                return  # the step sees the flag, stops every host and returns Stopped
            raise TaskCancelled("cancelled by SIGTERM; " + ", ".join(outcomes))
        backend = get_backend(self.backend, options=self.options, workdir=self.workdir,
                              client_factory=self.client_factory)
        stopped = backend.stop_copies(self.job_name, STOP_REASON)
        raise TaskCancelled("cancelled by SIGTERM; " + (", ".join(f"{name}: {state}" for name, state in stopped)
                                                        or f"no training job named {self.job_name} was running"))


def run_train(*, spec_json: str, spec_dir: str, backend: str, workdir: str, pipeline_dir: str, channels_json: str,
              job_name: str, name_base: str, run_key: str, processes_per_host: int, region: str, model: Any,
              retries_json: str = "", training: Any = None, client_factory: Callable[[str], Any] | None = None,
              poll_seconds: float | None = None, backend_options: str = "") -> tuple[str, str, bool, str]:
    """Run the train step for the component and fill in its Model artifact; return (job_name, status, reattached,
    model_artifact). ``backend_options``: the backend's one mapping of settings (JSON). ``client_factory`` and
    ``poll_seconds`` exist for tests (a component takes only JSON values)."""
    check_backend_name(backend or None)
    where = places(pipeline_dir, workdir)
    spec = load_component_spec(spec_json, spec_dir, where, restore_secrets=True, backend=backend or None)
    channels = local_channels(channels_json, where)  # the pipeline file's channels: local paths, staged data
    name = train_job_name(spec, channels, base=name_base or "trainops", run_key=run_key, job_name=job_name)
    # The backend's settings go to it whole, with the pipeline file's ranks and channels (a backend that does not
    # take them refuses them, naming them); the checkpoint key (a re-run resumes its own checkpoints) only where the
    # backend's options type keeps checkpoints by key. The context (work directory, region, clients) is the pod's.
    settings = parse_options(backend_options)
    settings.update({key: value for key, value in (("processes_per_host", processes_per_host or None),
                                                   ("channel_overrides", channels or None)) if value is not None})
    options: dict[str, Any] = dict(workdir=str(where.workdir), region=spec.region or region or None,
                                   client_factory=client_factory, **vocabulary_of(backend or None).takes(
                                       {"checkpoint_key": name}))
    if poll_seconds is not None:
        options["poll_seconds"] = poll_seconds
    print(f"[trainops] training job {name} ({backend or backend_class(None).name}); re-attaches when it exists",
          flush=True)
    retries = json.loads(retries_json) if retries_json else None  # the pipeline file's budgets (checked there)

    with StopOnSigterm(backend or None, name, workdir=str(where.workdir), client_factory=client_factory,
                       options=settings) as guard:
        try:
            result = train(spec, backend=backend or None, backend_options=settings, job_name=name,
                           if_exists="reattach", on_handle=guard.hold, retries=retries, **options)
        except JobOutOfSight as error:  # its looks kept failing: the job may run on, and a re-run follows it
            raise error.reattach_with(f"Re-run the pipeline run (or let KFP retry this task): the train task names "
                                      f"the job {name} again and re-attaches to it.") from error
    describe_model(model, result, spec)
    if training is not None:
        log_training(training, result)
    return result["job_name"], result["status"], bool(result.get("reattached")), result.get("model_artifact") or ""


def log_training(training: Any, result: dict[str, Any]) -> None:
    """The attempts and their cost as KFP metrics (shown next to the run), the cost's own line in the metadata."""
    cost = result.get("cost") or {}
    training.log_metric("attempts", len(result.get("attempts") or []) or 1)
    if cost.get("total") is not None:
        training.log_metric("training_cost_usd", float(cost["total"]))
    if cost.get("spot_saving") is not None:
        training.log_metric("spot_saving", float(cost["spot_saving"]))
    for name, value in cost_figures(cost).items():  # the forecast, what was spent, the budget and what is left
        training.log_metric(name, value)
    training.metadata["cost"] = cost_line(cost)
    plan = budget_line(cost)
    if plan:
        training.metadata["budget"] = plan
    print(f"[trainops] training {cost_line(cost)}{f' ({plan})' if plan else ''}", flush=True)


def describe_model(model: Any, result: dict[str, Any], spec) -> None:
    """Point the KFP Model artifact at the trained model.

    Metadata always names it (``model_artifact``), with the job, backend and framework. The URI is the model itself
    for the local backend (a path on this machine, read as it is by the next components). On SageMaker the URI stays
    the one KFP assigned: the KFP launcher uploads whatever lies at an output's path to its URI, so pointing the URI
    at the job's ``s3://.../model.tar.gz`` would overwrite it; a small JSON pointer is written there instead.
    """
    artifact = result.get("model_artifact") or ""
    model.metadata.update({
        # the registry entry's note (the register component adds it to the description), and its figures
        "cost": cost_figures(result.get("cost")),
        "cost_note": registry_note(result["job_name"], result.get("cost")),
        "model_artifact": artifact,
        "job_name": result["job_name"],
        "backend": result["backend"],
        "status": result["status"],
        "reattached": bool(result.get("reattached")),
        "framework": spec.framework,
        "framework_version": spec.framework_version or "",
        "spec_hash": spec.spec_hash(),
    })
    if artifact and "://" not in artifact:  # a path on this machine (local backend): read as it is
        model.uri = artifact
        return
    Path(model.path).parent.mkdir(parents=True, exist_ok=True)
    Path(model.path).write_text(json.dumps({"model_artifact": artifact, "job_name": result["job_name"]}) + "\n",
                                encoding="utf-8")


def model_location(model: Any) -> str:
    """Where a Model artifact from the train component really is: its metadata, else its URI."""
    return str((model.metadata or {}).get("model_artifact") or model.uri)
