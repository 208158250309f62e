"""The built-in backends' other job kinds (`trainops.backends.job_kinds`), over the methods each has had.

`local`, `sagemaker` and `slurm` evaluate, stage and register with methods of their own (``_evaluate``,
``start_evaluation`` ... ``stage_result``, ``_register``, ``champion``, ``model_registry``), which their tests and a few
front ends still call. The objects here hand those out as the typed job-kind objects every front end now asks for,
and `JobKindMethods` keeps the two templates those callers use (``evaluate`` and ``register``, the settings checked
by name) over the objects. A backend of another package implements the job-kind classes directly instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from trainops.backends.api import Evaluation, JobHandle, JobResult, ModelRegistry, RegisteredVersion, StageReport
from trainops.backends.job_kinds import (
    EvaluationRequest,
    Evaluations,
    RegistrationRequest,
    Registry,
    RequestT,
    ResultT,
    Sink,
    StageRequest,
    Staging,
    Started,
    checked_settings,
    needed,
)


def _arguments(request: EvaluationRequest) -> dict[str, Any]:
    return {"entry_point": request.entry_point, "source_dir": request.source_dir,
            "model_artifact": request.model_artifact, "channels": request.channels, "output_dir": request.output_dir,
            "hyperparameters": request.hyperparameters, "environment": request.environment,
            "timeout": request.timeout}


class MethodEvaluations(Evaluations):
    """A built-in backend's evaluations: ``_evaluate``; started ones where it can start them (``starts``)."""

    def __init__(self, backend: Any, settings: frozenset[str], *, starts: bool = False):
        self.backend, self.SETTINGS, self.starts = backend, settings, starts

    def run(self, request: EvaluationRequest, *, sink: Sink | None = None) -> Evaluation:
        chosen = checked_settings(request.settings, self.SETTINGS, "an evaluation", self.backend.name, "evaluation")
        evaluation: Evaluation = self.backend._evaluate(**_arguments(request), sink=sink, **chosen)
        return evaluation

    def started(self) -> Started[EvaluationRequest, Evaluation] | None:
        return MethodStartedEvaluations(self.backend) if self.starts else None


class MethodStarted(Started[RequestT, ResultT]):
    """Started jobs of one kind whose look, stop and result are the built-in backend's own methods for that kind
    (``describe_evaluation``, ``stop_evaluation``, ``evaluation_result``...); a subclass writes ``start``."""

    def __init__(self, backend: Any, describe: Callable[[JobHandle], JobResult], stop: Callable[[JobHandle, str], str],
                 result: Callable[[JobHandle], ResultT]):
        self.backend = backend
        self._describe, self._stop, self._result = describe, stop, result

    def describe(self, handle: JobHandle) -> JobResult:
        return self._describe(handle)

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        return self._stop(handle, reason)

    def result(self, handle: JobHandle) -> ResultT:
        return self._result(handle)


class MethodStartedEvaluations(MethodStarted[EvaluationRequest, Evaluation]):
    def __init__(self, backend: Any):
        super().__init__(backend, backend.describe_evaluation, backend.stop_evaluation, backend.evaluation_result)

    def start(self, request: EvaluationRequest, job_name: str | None = None) -> JobHandle:
        named = {"job_name": job_name} if job_name is not None else {}
        handle: JobHandle = self.backend.start_evaluation(**_arguments(request), **dict(request.settings), **named)
        return handle


class MethodStaging(Staging):
    """A built-in backend's staging: ``stage``; started where it has ``start_stage`` (``starts``)."""

    def __init__(self, backend: Any, settings: frozenset[str], *, starts: bool = False):
        self.backend, self.SETTINGS, self.starts = backend, settings, starts

    def run(self, request: StageRequest) -> StageReport:
        report: StageReport = self.backend.stage(request.source, request.destination, **dict(request.settings))
        return report

    def started(self) -> Started[StageRequest, StageReport] | None:
        return MethodStartedStaging(self.backend) if self.starts else None


class MethodStartedStaging(MethodStarted[StageRequest, StageReport]):
    def __init__(self, backend: Any):
        super().__init__(backend, backend.describe_stage, backend.stop_stage, backend.stage_result)

    def start(self, request: StageRequest, job_name: str | None = None) -> JobHandle:
        handle: JobHandle = self.backend.start_stage(request.source, request.destination, **dict(request.settings))
        return handle


class MethodRegistry(Registry):
    """A built-in backend's registry: ``_register``, ``champion``; browsable where it has ``model_registry``."""

    def __init__(self, backend: Any, settings: frozenset[str], *, browsable: bool = False):
        self.backend, self.SETTINGS, self.browsable = backend, settings, browsable

    def register(self, request: RegistrationRequest) -> RegisteredVersion:
        chosen = checked_settings(request.settings, self.SETTINGS, "a registration", self.backend.name, "registry")
        version: RegisteredVersion = self.backend._register(
            model_artifact=request.model_artifact, metrics=request.metrics, group=request.group,
            approval=request.approval, spec_data=request.spec_data, description=request.description,
            job_name=request.job_name, **chosen)
        return version

    def champion(self, group: str) -> RegisteredVersion | None:
        found: RegisteredVersion | None = self.backend.champion(group)
        return found

    def browse(self) -> ModelRegistry | None:
        return self.backend.model_registry() if self.browsable else None


class JobKindMethods:
    """``evaluate`` and ``register`` of a built-in backend, over its job-kind objects (their settings checked by
    name): kept for the callers that still use them (the built-ins' own tests, the slurm backend's delegation)."""

    name: ClassVar[str]
    #: The backend-specific settings its evaluations / registrations take (any other is a `SpecError` naming it).
    EVALUATION_SETTINGS: ClassVar[frozenset[str]] = frozenset()
    REGISTRATION_SETTINGS: ClassVar[frozenset[str]] = frozenset()

    def evaluations(self) -> Evaluations | None:  # pragma: no cover - each built-in overrides it
        return None

    def registry(self) -> Registry | None:  # pragma: no cover - each built-in overrides it
        return None

    def evaluate(self, *, entry_point: str, source_dir: Any, model_artifact: Any, channels: Mapping[str, Any],
                 output_dir: Any, hyperparameters: Mapping[str, Any] | None = None,
                 environment: Mapping[str, str] | None = None, timeout: float | None = None,
                 sink: Sink | None = None, **settings: Any) -> Evaluation:
        """Run an evaluation script on a model and read its metrics (`Evaluations.run`)."""
        request = EvaluationRequest(entry_point=entry_point, source_dir=source_dir, model_artifact=model_artifact,
                                    channels=channels, output_dir=output_dir, hyperparameters=hyperparameters,
                                    environment=environment, timeout=timeout, settings=settings)
        return needed(self.evaluations(), self, "evaluations").run(request, sink=sink)

    def register(self, *, model_artifact: Any, metrics: Mapping[str, Any], group: str, approval: str,
                 spec_data: Mapping[str, Any] | None = None, description: str = "", job_name: str | None = None,
                 **settings: Any) -> RegisteredVersion:
        """Record a model version in the backend's registry, once per training job (`Registry.register`)."""
        request = RegistrationRequest(model_artifact=model_artifact, metrics=metrics, group=group, approval=approval,
                                      spec_data=spec_data, description=description, job_name=job_name,
                                      settings=settings)
        return needed(self.registry(), self, "registry").register(request)
