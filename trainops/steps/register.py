"""The register step: record a trained, evaluated model as a new version of a model group.

Backends: ``local`` keeps a registry in a directory (`trainops.backends.local.registry`, default
``$TRAINOPS_HOME/registry``); ``sagemaker`` creates a model package in the SageMaker Model Registry
(`trainops.backends.sagemaker.registry`). Both number versions within a group, store the metrics with the model,
take an approval status (Approved, Rejected, PendingManualApproval; usually from the evaluation gate, see
`approval_for_gate`) and treat the latest Approved version as the champion.

`register` returns small JSON (an XCom value, a KFP output) with the same keys on both backends. Heavy modules are
imported inside functions, so a DAG file may import this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.api import get_backend
from trainops.backends.job_kinds import RegistrationRequest, needed
from trainops.spec import read_document
from trainops.spec.secrets import masked_spec_document

if TYPE_CHECKING:
    from trainops.backends.api import Backend

from trainops.errors import Problem, SpecError

APPROVAL_STATUSES: tuple[str, ...] = ("Approved", "Rejected", "PendingManualApproval")


def approval_for_gate(passed: bool, manual_approval: bool = False) -> str:
    """The approval status a gate result gives: Rejected when it failed; Approved when it passed, or
    PendingManualApproval when a person must sign off."""
    if not passed:
        return "Rejected"
    return "PendingManualApproval" if manual_approval else "Approved"


def spec_as_json(spec: Any) -> dict[str, Any] | None:
    """The job spec as JSON data, from a `JobSpec`, a mapping, or a YAML / JSON spec file path (read, not
    validated: the registry records what was run), secret environment values masked. None stays None."""
    if spec is None:
        return None
    if hasattr(spec, "to_json_dict"):
        return _masked(spec.to_json_dict())
    if isinstance(spec, (str, os.PathLike)):
        data = read_document(Path(spec))
    elif isinstance(spec, Mapping):
        data = dict(spec)
    else:
        raise SpecError(Problem("spec", f"give the job spec as a JobSpec, a mapping or a spec file path, not a "
                                        f"{type(spec).__name__}"), source="registry")
    if not isinstance(data, dict):
        raise SpecError(Problem("spec", "the spec file does not hold a mapping"), source="registry")
    try:
        return _masked(json.loads(json.dumps(data)))
    except (TypeError, ValueError) as error:
        raise SpecError(Problem("spec", f"cannot be stored as JSON ({error})"), source="registry") from error


def _masked(data: dict[str, Any]) -> dict[str, Any]:
    """The spec with the values of secret-looking environment variables masked, wherever they appear: a registry
    entry is read by many."""
    return dict(masked_spec_document(data))


def _backend(backend: str | Backend | None, approval: str, options: Mapping[str, Any] | None = None,
             **context: Any) -> Backend:
    """The backend (one already opened, or opened now), after checking it and the approval status together (one
    error lists both problems)."""
    problems = []
    chosen = None
    try:
        chosen = get_backend(backend, options=options, **context)
    except SpecError as error:
        problems.extend(error.problems)
    if approval not in APPROVAL_STATUSES:
        problems.append(Problem("approval", f"{approval!r} is not an approval status; use one of "
                                            f"{', '.join(APPROVAL_STATUSES)}"))
    if problems or chosen is None:
        raise SpecError(problems, source="registry")
    return chosen


def register(
    *,
    model_artifact: str | os.PathLike[str],
    metrics: Mapping[str, Any],
    group: str,
    spec: Any = None,
    approval: str = "Approved",
    backend: str | Backend | None = None,
    backend_options: Mapping[str, Any] | None = None,
    registry_dir: str | os.PathLike[str] | None = None,
    job_name: str | None = None,
    description: str = "",
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Register a model version (once per training job: a job already registered in the group returns its
    version, with ``already_registered`` true); return ``{"backend", "group", "version", "approval_status",
    "model_artifact", "metrics", "champion", "created", "job_name", "location"}`` (``location``: the version's
    directory locally, the model package ARN on SageMaker; ``champion``: whether this version is now the group's
    champion).

    Args:
        model_artifact: ``model.tar.gz`` (local path / ``file://`` locally, copied into the registry; ``s3://`` on
            SageMaker).
        metrics: the evaluation's metrics (name -> number).
        group: the model group (1-63 letters, digits, hyphens).
        spec: the job spec that produced the model (`JobSpec`, mapping or spec file); stored locally; on SageMaker
            its hash is stored in the package's metadata.
        approval: Approved (default), Rejected or PendingManualApproval; see `approval_for_gate`.
        backend, backend_options: the backend (None: the default; or one already opened, which refuses settings
            given beside it, naming them) and the one mapping of its settings (`trainops.backends.get_backend`).
        registry_dir: the local registry (default ``$TRAINOPS_HOME/registry``).
        job_name: the training job that produced the model.
        settings: the backend's registration settings (`Registry.SETTINGS`; SageMaker: ``image_uri``,
            the inference image of the model package, and ``metrics_uri``, where the metrics JSON is written,
            default ``model-metrics.json`` beside the artifact); one the backend does not take is a `SpecError`
            naming it (None values: not given).
    """
    chosen = _backend(backend, approval, backend_options, registry_dir=registry_dir, client_factory=client_factory,
                      region=region)

    request = RegistrationRequest(model_artifact=model_artifact, metrics=metrics, group=group, approval=approval,
                                  spec_data=spec_as_json(spec), description=description, job_name=job_name,
                                  settings=settings)
    version = needed(chosen.registry(), chosen, "registry").register(request)
    registered: dict[str, Any] = version.to_dict()
    return registered
