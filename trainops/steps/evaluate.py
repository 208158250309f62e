"""The evaluate step: score a trained model with the user's evaluation script, then apply the quality gate.

One call for every caller (Airflow's EvaluateModelOperator, the KFP evaluate component, pipelines, the CLI):
`evaluate` runs the script under the evaluation contract (docs/contracts.md section 6) on the chosen backend, reads
the ``metrics.json`` it wrote, checks the gates (against the current champion when a gate says so) and returns an
`EvaluationResult` whose `to_dict` is small JSON, fit for an XCom value or a KFP output.

A failed gate is a result, not an exception: callers decide whether it fails the task, short-circuits what follows,
or registers the model as Rejected. `EvaluationResult.raise_for_gate` raises `GateFailed` for those that want one.

Heavy modules (boto3, the backends) are imported inside functions, so a DAG file may import this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainops.backends.api import get_backend
from trainops.backends.job_kinds import EvaluationRequest, needed
from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.backends.api import Backend
from trainops.steps.gate import (
    GateFailed,
    GateResult,
    all_passed,
    check_gates,
    deciding_result,
    needs_champion,
    parse_gates,
    summary,
)

#: At most this many file names go into `EvaluationResult.to_dict` (XCom values must stay small).
MAX_LISTED_FILES = 50


class _NotGiven:
    """The default of ``champion``: tells "not given" (look it up) from an explicit None (there is no champion)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation produced and whether the model passed its gates.

    Attributes:
        backend: ``local`` or ``sagemaker``.
        metrics: the contents of ``metrics.json``.
        passed: whether every gate passed (True when there is no gate).
        gates: one result per gate, in the order given.
        output_dir: the evaluation directory (local path, or the S3 prefix on SageMaker).
        metrics_path: the ``metrics.json`` file (path or S3 URI).
        files: other files the script wrote (relative to ``output_dir``; local backend only).
        report: the report the script wrote (first ``.html`` / ``.md`` file), if any.
        plots: images the script wrote (loss curve, confusion matrix...).
        champion_version: the registry version the champion gates compared with, if any.
        job_name: the processing job (SageMaker backend).
        duration_seconds: how long the script ran (local backend).
    """

    backend: str
    metrics: dict[str, float]
    passed: bool
    gates: list[GateResult] = field(default_factory=list)
    output_dir: str = ""
    metrics_path: str = ""
    files: list[str] = field(default_factory=list)
    report: str | None = None
    plots: list[str] = field(default_factory=list)
    champion_version: int | str | None = None
    job_name: str | None = None
    duration_seconds: float | None = None

    @property
    def gate(self) -> GateResult | None:
        """The result that decides: the first failed gate, else the last gate, else None (no gate)."""
        return deciding_result(self.gates)

    @property
    def message(self) -> str:
        """The gates' messages, failures first, one per line ("no gate" when there is none)."""
        return summary(self.gates)

    def raise_for_gate(self) -> None:
        """Raise `GateFailed` (exit code 1) with every failed gate's message when the model did not pass."""
        if not self.passed:
            raise GateFailed(self.message)

    def to_dict(self) -> dict[str, Any]:
        """Small JSON for an XCom value or a KFP output (the file list is cut to `MAX_LISTED_FILES`)."""
        deciding = self.gate
        return {
            "backend": self.backend,
            "passed": self.passed,
            "metrics": dict(self.metrics),
            "gate": deciding.to_dict() if deciding else None,
            "gates": [result.to_dict() for result in self.gates],
            "message": self.message,
            "output_dir": self.output_dir,
            "metrics_path": self.metrics_path,
            "files": self.files[:MAX_LISTED_FILES],
            "report": self.report,
            "plots": self.plots[:MAX_LISTED_FILES],
            "champion_version": self.champion_version,
            "job_name": self.job_name,
            "duration_seconds": self.duration_seconds,
        }


def _champion_metrics(
    gates_need_champion: bool,
    champion: Any,
    champion_group: str | None,
    backend: Any,
) -> tuple[Mapping[str, Any] | None, int | str | None]:
    """The champion's metrics and version for champion gates: given directly (None: there is none yet), or looked up
    in the group's registry."""
    if not gates_need_champion:
        return None, None
    if champion is not NOT_GIVEN:
        return champion, None
    if champion_group is None:
        raise SpecError(Problem("champion_group", "a gate compares with the champion: name the registry group to look "
                                                  "it up in, or pass the champion's metrics as champion (None when "
                                                  "there is no champion yet)"),
                        source="evaluation")

    found = needed(backend.registry(), backend, "registry").champion(champion_group)
    if found is None:
        return None, None
    return found.metrics, found.version


def evaluate(
    *,
    entry_point: str,
    source_dir: str | os.PathLike[str] | None,
    model_artifact: str | os.PathLike[str],
    channels: Mapping[str, str | os.PathLike[str]],
    output_dir: str | os.PathLike[str],
    gate: Any = None,
    backend: str | Backend | None = None,
    backend_options: Mapping[str, Any] | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    timeout: float | None = None,
    champion: Mapping[str, Any] | None = NOT_GIVEN,
    champion_group: str | None = None,
    registry_dir: str | os.PathLike[str] | None = None,
    sink: Callable[[str, bool], None] | None = None,
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
    **settings: Any,
) -> EvaluationResult:
    """Evaluate a model and check its gates.

    Args:
        entry_point: the evaluation script, relative to ``source_dir``.
        source_dir: the directory holding the script (uploaded on SageMaker).
        model_artifact: the training job's ``model.tar.gz``: a local path or ``file://`` URI (local; a model
            directory works too), an ``s3://`` URI (SageMaker).
        channels: data by channel name, e.g. ``{"test": "data/test"}``; the script reads ``SM_CHANNEL_TEST``. On
            SageMaker: exactly one channel, an S3 prefix.
        output_dir: where ``metrics.json`` and the script's other files go (an S3 prefix on SageMaker).
        gate: None, a gate (``"accuracy >= 0.95"``, a mapping) or a list of gates; see `trainops.steps.gate`.
        backend: a backend (None: the default) or a named one, or a backend already opened; ``backend_options``:
            the one mapping of its settings (`trainops.backends.get_backend`; refused beside an opened backend,
            as are ``registry_dir``, ``client_factory`` and ``region`` where it reads them: it keeps its own).
        hyperparameters: passed to the script as ``--key value``.
        environment: extra environment variables for the script.
        timeout: seconds the script may run (local: then its process group is stopped; SageMaker: the job's
            MaxRuntimeInSeconds, default one hour).
        champion: the champion's metrics, for gates such as ``accuracy > champion``; None says there is no champion
            yet (champion gates then pass, saying so).
        champion_group: the registry group to look the champion up in, when ``champion`` is not given.
        registry_dir: the local registry (default ``$TRAINOPS_HOME/registry``).
        sink: receives each output line of a local run (default: printed).
        client_factory, region: the backend's context (AWS clients; the region).
        settings: the backend's evaluation settings (`Evaluations.SETTINGS`; SageMaker: the processing job's
            ``role``, ``image_uri`` (normally the training job's), ``instance_type``, ``job_name`` and ``code_uri``,
            where the code is uploaded, default ``<output_dir>/code``); a setting the backend does not take is a
            `SpecError` naming it (None values: not given).

    Raises:
        SpecError: bad input (exit code 2), naming the field.
        JobFailed: the script failed, timed out, or wrote no usable metrics (exit code 1).
    """
    chosen = get_backend(backend, options=backend_options, source="evaluation", registry_dir=registry_dir,
                         client_factory=client_factory, region=region)
    gates = parse_gates(gate)
    # Resolve the champion before the (possibly long) evaluation, so a missing group fails fast.
    champion_metrics, champion_version = _champion_metrics(needs_champion(gates), champion, champion_group, chosen)

    request = EvaluationRequest(entry_point=entry_point, source_dir=source_dir, model_artifact=model_artifact,
                                channels=channels, output_dir=output_dir, hyperparameters=hyperparameters,
                                environment=environment, timeout=timeout, settings=settings)
    result = needed(chosen.evaluations(), chosen, "evaluations").run(request, sink=sink)
    return _gated(result, gates, champion_metrics, champion_version)


def judge(result: Any, *, gate: Any = None, champion: Mapping[str, Any] | None = NOT_GIVEN,
          champion_group: str | None = None, backend: Any) -> EvaluationResult:
    """The gates of an evaluation that ran without this step waiting for it (a deferred Airflow task resumes here
    with the backend's `Evaluation`): the champion is looked up now, as `evaluate` would have."""
    gates = parse_gates(gate)
    champion_metrics, champion_version = _champion_metrics(needs_champion(gates), champion, champion_group, backend)
    return _gated(result, gates, champion_metrics, champion_version)


def check_gate_inputs(gate: Any, champion_group: str | None = None) -> None:
    """Refuse bad gates, and a champion gate with nowhere to find the champion, before an evaluation starts."""
    if needs_champion(parse_gates(gate)) and champion_group is None:
        _champion_metrics(True, NOT_GIVEN, None, None)  # raises the SpecError naming champion_group


def _gated(result: Any, gates: list[Any], champion_metrics: Mapping[str, Any] | None,
           champion_version: int | str | None) -> EvaluationResult:
    label = f"champion version {champion_version}" if champion_version is not None else "the champion"
    results = check_gates(gates, result.metrics, champion_metrics, label)
    return EvaluationResult(
        backend=result.backend, metrics=result.metrics, passed=all_passed(results), gates=results,
        output_dir=result.output_dir, metrics_path=result.metrics_path, files=result.files, report=result.report,
        plots=result.plots, champion_version=champion_version, job_name=result.job_name,
        duration_seconds=result.duration_seconds,
    )
