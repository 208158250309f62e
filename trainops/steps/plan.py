"""A pipeline file resolved once: every value each step takes, for the runner, the Airflow DAG and the KFP pipeline.

`resolve_plan(pipeline, backend, workdir)` reads the file (or takes a validated `PipelineSpec` and its directory),
picks the backend (the argument, else the file's), loads the training spec, resolves every path against the file's
directory, and asks the backend for what its evaluate and register steps take from the training spec (on SageMaker:
the training job's role and image, the region; `Backend.pipeline_settings`). The three front ends read their
arguments from the `PipelinePlan`, so a default set here is the same everywhere (a test compares them).

Pydantic is imported (through the pipeline model): DAG files call this inside a task, never at parse time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends import check_backend_name, default_backend, get_backend
from trainops.errors import SpecError
from trainops.spec.pipeline import load_pipeline, resolve
from trainops.steps.train import load_spec

if TYPE_CHECKING:
    from trainops.backends.api import Backend
    from trainops.spec.job import JobSpec


@dataclass(frozen=True)
class PreparePlan:
    script: str
    args: list[str]
    timeout: int


@dataclass(frozen=True)
class StagePlan:
    source: str
    destination: str
    s3_prefix: str | None
    workers: int | None


@dataclass(frozen=True)
class TrainPlan:
    spec: Any  # the JobSpec, relative paths resolved
    job_name: str | None  # as the file gives it; None: each front end names the job (fingerprint, task instance)
    channels: dict[str, str]
    processes_per_host: int | None
    retries: dict[str, float] = field(default_factory=dict)  # budgets per failure class (steps.train.retries)


@dataclass(frozen=True)
class EvaluatePlan:
    entry_point: str
    source_dir: str
    channels: dict[str, str]
    hyperparameters: dict[str, Any]
    gate: Any
    on_gate_failure: str
    timeout: int
    settings: dict[str, Any] = field(default_factory=dict)  # the backend's: role, image_uri, region on SageMaker


@dataclass(frozen=True)
class RegisterPlan:
    group: str
    approval: str
    registry_dir: str
    description: str
    settings: dict[str, Any] = field(default_factory=dict)  # the backend's: image_uri, region on SageMaker


@dataclass(frozen=True)
class PipelinePlan:
    """Everything a run of the pipeline needs, resolved. `to_dict` is flat JSON (the DAG's XCom)."""

    name: str
    backend: str  # as the file (or the run) names it: a registered backend or a named one
    workdir: str
    region: str | None
    pipeline_dir: str
    train: TrainPlan
    prepare: PreparePlan | None = None
    stage: StagePlan | None = None
    evaluate: EvaluatePlan | None = None
    register: RegisterPlan | None = None
    #: The one mapping of the backend's settings (the file's ``backend_options``, the run's laid over), which every
    #: step hands the backend (`trainops.backends.get_backend`'s ``options``).
    backend_options: dict[str, Any] = field(default_factory=dict)

    def backend_context(self) -> dict[str, Any]:
        """`get_backend`'s context for this pipeline."""
        context: dict[str, Any] = {"workdir": self.workdir, "region": self.region}
        if self.register:
            context["registry_dir"] = self.register.registry_dir
        return context

    def get_backend(self, **context: Any) -> Backend:
        """The pipeline's backend, bound to its context (``context`` adds to it, e.g. a client factory)."""
        return get_backend(self.backend, options=self.backend_options, source="backend_options",
                           **{**self.backend_context(), **context})

    def evaluation_output(self, key: str) -> str:
        """Where the evaluation writes for a run keyed ``key`` (the training job's name): local
        ``<workdir>/evaluations/<key>``; SageMaker "" (beside the model in S3)."""
        return self.get_backend().evaluation_output(self.workdir, key)

    def evaluate_arguments(self, model_artifact: str, key: str) -> dict[str, Any]:
        """The keyword arguments of `trainops.steps.evaluate.evaluate` for this pipeline's evaluate step."""
        step = self.evaluate
        assert step is not None, "the pipeline has no evaluate step"
        champion = ({"champion_group": self.register.group, "registry_dir": self.register.registry_dir}
                    if self.register else {"champion": None})
        return {"entry_point": step.entry_point, "source_dir": step.source_dir, "model_artifact": model_artifact,
                "channels": dict(step.channels), "output_dir": self.evaluation_output(key), "gate": step.gate,
                "backend": self.backend, "backend_options": dict(self.backend_options),
                "hyperparameters": dict(step.hyperparameters), "timeout": step.timeout,
                **champion, **step.settings}

    def register_arguments(self) -> dict[str, Any]:
        """The keyword arguments of `trainops.steps.register.register` this pipeline fixes (the model, metrics, spec
        and job name come from the run)."""
        step = self.register
        assert step is not None, "the pipeline has no register step"
        return {"group": step.group, "approval": step.approval, "backend": self.backend,
                "backend_options": dict(self.backend_options),
                "registry_dir": step.registry_dir, "description": step.description, **step.settings}

    def to_dict(self) -> dict[str, Any]:
        """The plan as one flat JSON mapping (the keys the retraining DAG's tasks take)."""
        evaluate, register, train = self.evaluate, self.register, self.train
        return {
            "pipeline_name": self.name,
            "backend": self.backend,
            "backend_options": dict(self.backend_options),
            "workdir": self.workdir,
            "region": self.region,
            "pipeline_dir": self.pipeline_dir,
            "prepare_script": self.prepare.script if self.prepare else None,
            "prepare_args": list(self.prepare.args) if self.prepare else [],
            "prepare_timeout": self.prepare.timeout if self.prepare else None,
            "stage_source": self.stage.source if self.stage else None,
            "stage_destination": self.stage.destination if self.stage else None,
            "stage_s3_prefix": self.stage.s3_prefix if self.stage else None,
            "stage_workers": self.stage.workers if self.stage else None,
            "train_spec": train.spec.to_json_dict(),
            "train_job_name": train.job_name or train.spec.name or self.name,
            "train_channels": dict(train.channels),
            "train_processes_per_host": train.processes_per_host,
            "train_retries": dict(train.retries),
            "evaluate_entry_point": evaluate.entry_point if evaluate else None,
            "evaluate_source_dir": evaluate.source_dir if evaluate else None,
            "evaluate_channels": dict(evaluate.channels) if evaluate else {},
            "evaluate_hyperparameters": dict(evaluate.hyperparameters) if evaluate else {},
            "evaluate_gate": evaluate.gate if evaluate else None,
            "evaluate_on_gate_failure": evaluate.on_gate_failure if evaluate else None,
            "evaluate_timeout": evaluate.timeout if evaluate else None,
            "evaluate_settings": _without_region(evaluate.settings) if evaluate else {},
            "register_group": register.group if register else None,
            "register_approval": register.approval if register else None,
            "register_registry_dir": register.registry_dir if register else None,
            "register_description": register.description if register else "",
            "register_settings": _without_region(register.settings) if register else {},
        }


def step_settings(backend: Any, spec: Any, region: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(evaluate settings, register settings) a backend derives from the training spec (`Backend.pipeline_settings`:
    on SageMaker the training job's role and image and the region; nothing locally), each step's the ones the
    backend's evaluations and registry declare they take (their ``SETTINGS``), with the region. The runner,
    the DAG and the KFP components all call this, so their defaults are one. ``spec``: the JobSpec, or a function
    returning it (read only when needed)."""
    settings = backend.pipeline_settings(spec, region)

    def taken(names: frozenset[str]) -> dict[str, Any]:
        return {key: value for key, value in settings.items() if key in names or key == "region"}

    evaluations, registry = backend.evaluations(), backend.registry()
    return (taken(evaluations.SETTINGS if evaluations is not None else frozenset()),
            taken(registry.SETTINGS if registry is not None else frozenset()))


def _without_region(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A step's settings as an operator takes them (the region is the plan's own key)."""
    return {key: value for key, value in settings.items() if key != "region"}


def options_of(pipeline: Any, backend: str, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The backend settings of a run of ``pipeline`` on ``backend``: the file's ``backend_options`` when it is the
    file's own backend (a run moved to another one leaves them out), with ``given`` (the run's) laid over."""
    own = dict(pipeline.backend_options or {}) if backend == (pipeline.backend or default_backend()) else {}
    return {**own, **dict(given or {})}


def train_spec(pipeline: Any, pipeline_dir: Path, backend: Any = None) -> JobSpec:
    """The pipeline's training job spec (a file relative to the pipeline's directory, or inline), validated by the
    spec rules ``backend`` binds (None: the default backend's)."""
    given = pipeline.steps.train.spec
    if isinstance(given, str):
        return load_spec(resolve(given, pipeline_dir), backend=backend)
    return load_spec(given, base_dir=pipeline_dir, backend=backend)


def resolve_plan(pipeline: Any, backend: str | None = None, workdir: str | os.PathLike[str] | None = None, *,
                 pipeline_dir: str | os.PathLike[str] | None = None, spec: Any = None,
                 backend_options: Mapping[str, Any] | None = None) -> PipelinePlan:
    """Resolve a pipeline once.

    Args:
        pipeline: a pipeline file's path, or a validated `PipelineSpec` (then ``pipeline_dir`` is its directory).
        backend: overrides the file's backend (a registered or named one; anything else is a `SpecError` naming
            ``backend``); none in either: the registry's default.
        backend_options: laid over the file's ``backend_options`` (which apply only to the file's own backend).
        workdir: overrides the file's work directory (only with a path: a `PipelineSpec` has substituted it).
        spec: the training spec when the caller has it already (e.g. with hyperparameters merged).
    """
    if isinstance(pipeline, (str, os.PathLike)):
        path = Path(pipeline)
        pipeline_dir = path.resolve().parent
        pipeline = load_pipeline(path, workdir_override=os.fspath(workdir) if workdir else None)
    elif pipeline_dir is None:
        raise SpecError("resolve_plan: give the pipeline file's directory (pipeline_dir) with a PipelineSpec")
    here = Path(pipeline_dir).resolve()
    backend = check_backend_name(backend or pipeline.backend or default_backend())
    options = options_of(pipeline, backend, backend_options)
    steps = pipeline.steps
    spec = spec if spec is not None else train_spec(pipeline, here, backend)
    work = str(Path(pipeline.workdir))
    region = spec.region or pipeline.region
    chosen = get_backend(backend, options=options, source="backend_options", workdir=work)
    evaluate_settings, register_settings = step_settings(chosen, spec, region)
    register = steps.register_step
    evaluate = steps.evaluate
    return PipelinePlan(
        name=pipeline.name,
        backend=backend,
        backend_options=options,
        workdir=work,
        region=evaluate_settings.get("region", region),
        pipeline_dir=str(here),
        prepare=PreparePlan(resolve(steps.prepare.script, here), list(steps.prepare.args), steps.prepare.timeout)
        if steps.prepare else None,
        stage=StagePlan(resolve(steps.stage.source, here), resolve(steps.stage.destination, here),
                        steps.stage.s3_prefix, steps.stage.workers) if steps.stage else None,
        train=TrainPlan(spec, steps.train.job_name,
                        {name: resolve(value, here) for name, value in steps.train.channels.items()},
                        steps.train.processes_per_host, dict(steps.train.retries)),
        evaluate=EvaluatePlan(
            entry_point=evaluate.entry_point, source_dir=resolve(evaluate.source_dir or ".", here),
            channels={name: resolve(value, here) for name, value in evaluate.channels.items()},
            hyperparameters=dict(evaluate.hyperparameters), gate=evaluate.gate,
            on_gate_failure=evaluate.on_gate_failure, timeout=evaluate.timeout,
            settings=evaluate_settings,
        ) if evaluate else None,
        register=RegisterPlan(
            group=register.group, approval=register.approval,
            registry_dir=resolve(register.registry_dir, here) if register.registry_dir
            else str(Path(work) / "registry"),
            description=register.description or "",
            settings=register_settings,
        ) if register else None,
    )
