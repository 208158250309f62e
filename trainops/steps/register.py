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
from pathlib import Path
from typing import Any, Callable, Mapping

from trainops.errors import Problem, SpecError

BACKENDS = ("local", "sagemaker")
APPROVAL_STATUSES: tuple[str, ...] = ("Approved", "Rejected", "PendingManualApproval")
#: Where the SageMaker backend writes the metrics JSON it links from the model package, beside the model artifact.
SAGEMAKER_METRICS_NAME = "model-metrics.json"


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
        from trainops.spec import read_document

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
    """The spec with the values of secret-looking environment variables masked: a registry entry is read by many."""
    from trainops.runtime.output_relay import MASK
    from trainops.spec.base import looks_secret

    environment = data.get("environment")
    if isinstance(environment, dict):
        data["environment"] = {name: MASK if looks_secret(str(name)) else value for name, value in environment.items()}
    return data


def _check(backend: str, approval: str) -> None:
    problems = []
    if backend not in BACKENDS:
        problems.append(Problem("backend", f"{backend!r} is not a backend; use one of {', '.join(BACKENDS)}"))
    if approval not in APPROVAL_STATUSES:
        problems.append(Problem("approval", f"{approval!r} is not an approval status; use one of "
                                            f"{', '.join(APPROVAL_STATUSES)}"))
    if problems:
        raise SpecError(problems, source="registry")


def _factory(client_factory: Callable[[str], Any] | None, region: str | None) -> Callable[[str], Any]:
    if client_factory is not None:
        return client_factory
    from trainops.backends.sagemaker.clients import default_client_factory

    return default_client_factory(region=region)


def register(
    *,
    model_artifact: str | os.PathLike[str],
    metrics: Mapping[str, Any],
    group: str,
    spec: Any = None,
    approval: str = "Approved",
    backend: str = "local",
    registry_dir: str | os.PathLike[str] | None = None,
    job_name: str | None = None,
    description: str = "",
    image_uri: str | None = None,
    metrics_uri: str | None = None,
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
) -> dict[str, Any]:
    """Register a model version (once per training job: a job already registered in the group returns its
    version, with ``already_registered`` true); return ``{"backend", "group", "version", "approval_status", "model_artifact",
    "metrics", "champion", "created", "job_name", "location"}`` (``location``: the version's directory locally,
    the model package ARN on SageMaker; ``champion``: whether this version is now the group's champion).

    Args:
        model_artifact: ``model.tar.gz`` (local path / ``file://`` locally, copied into the registry; ``s3://`` on
            SageMaker).
        metrics: the evaluation's metrics (name -> number).
        group: the model group (1-63 letters, digits, hyphens).
        spec: the job spec that produced the model (`JobSpec`, mapping or spec file); stored locally; on SageMaker
            its hash is stored in the package's metadata.
        approval: Approved (default), Rejected or PendingManualApproval; see `approval_for_gate`.
        registry_dir: the local registry (default ``$TRAINOPS_HOME/registry``).
        job_name: the training job that produced the model.
        image_uri: SageMaker only: the inference image of the model package.
        metrics_uri: SageMaker only: where the metrics JSON is written (default: ``model-metrics.json`` beside the
            artifact).
    """
    _check(backend, approval)
    spec_data = spec_as_json(spec)
    if backend == "local":
        from trainops.backends.local.registry import LocalRegistry

        registry = LocalRegistry(registry_dir)
        # A retried task or a re-run pipeline registers the same training job once, not once per run.
        earlier = [entry for entry in registry.list(group) if job_name and entry.job_name == job_name] \
            if group in registry.groups() else []
        if earlier:
            entry = earlier[-1]
        else:
            entry = registry.register(group=group, model_artifact=model_artifact, metrics=metrics, approval=approval,
                                      spec=spec_data, description=description, job_name=job_name)
        champion = registry.champion(group)
        return {
            "backend": "local", "group": entry.group, "version": entry.version,
            "approval_status": entry.approval_status, "model_artifact": entry.model_artifact,
            "metrics": entry.metrics, "champion": champion is not None and champion.version == entry.version,
            "created": entry.created, "job_name": entry.job_name, "location": entry.path,
            "already_registered": bool(earlier),
        }
    return _register_on_sagemaker(model_artifact=os.fspath(model_artifact), metrics=metrics, group=group,
                                  spec_data=spec_data, approval=approval, job_name=job_name, description=description,
                                  image_uri=image_uri, metrics_uri=metrics_uri,
                                  factory=_factory(client_factory, region))


def _register_on_sagemaker(*, model_artifact: str, metrics: Mapping[str, Any], group: str,
                           spec_data: dict[str, Any] | None, approval: str, job_name: str | None, description: str,
                           image_uri: str | None, metrics_uri: str | None,
                           factory: Callable[[str], Any]) -> dict[str, Any]:
    import hashlib

    from trainops.backends.local.registry import check_group, check_metrics
    from trainops.backends.sagemaker import registry as sagemaker_registry
    from trainops.backends.sagemaker.s3 import parse_s3_uri

    problems = []
    if not image_uri:
        problems.append(Problem("image_uri", "a SageMaker model package needs the inference image URI"))
    if not str(model_artifact).startswith("s3://"):
        problems.append(Problem("model_artifact", f"{model_artifact!r} is not an s3:// URI; the SageMaker registry "
                                                  f"refers to the training job's model.tar.gz in S3"))
    if problems:
        raise SpecError(problems, source="registry")
    check_group(group)
    checked = check_metrics(metrics)
    bucket, key = parse_s3_uri(model_artifact, "model_artifact")
    directory = key.rsplit("/", 1)[0] if "/" in key else ""
    metrics_location = metrics_uri or f"s3://{bucket}/{directory + '/' if directory else ''}{SAGEMAKER_METRICS_NAME}"
    # Package metadata values are short strings (256 characters): the spec goes in as its hash, not whole.
    metadata = {}
    if job_name:
        metadata["trainops:job_name"] = job_name
    if spec_data is not None:
        canonical = json.dumps(spec_data, sort_keys=True, separators=(",", ":")).encode("utf-8")
        metadata["trainops:spec_sha256"] = hashlib.sha256(canonical).hexdigest()
    package = sagemaker_registry.register(
        factory, group=group, image_uri=image_uri, model_artifact_uri=model_artifact, metrics=checked,
        metrics_uri=metrics_location, approval=approval, description=description, metadata=metadata,
    )
    return {
        "backend": "sagemaker", "group": package.group, "version": package.version,
        "approval_status": package.approval_status, "model_artifact": package.model_artifact_uri or model_artifact,
        "metrics": package.metrics or checked, "champion": package.approval_status == "Approved",
        "created": None, "job_name": job_name, "location": package.arn, "already_registered": False,
    }


def find_champion(
    group: str,
    *,
    backend: str = "local",
    registry_dir: str | os.PathLike[str] | None = None,
    client_factory: Callable[[str], Any] | None = None,
    region: str | None = None,
) -> dict[str, Any] | None:
    """The group's champion (latest Approved version) as ``{"group", "version", "metrics", "model_artifact",
    "location"}``, or None when the group does not exist or has nothing approved."""
    _check(backend, "Approved")
    if backend == "local":
        from trainops.backends.local.registry import LocalRegistry, check_group

        entry = LocalRegistry(registry_dir).champion(check_group(group))
        if entry is None:
            return None
        return {"group": entry.group, "version": entry.version, "metrics": entry.metrics,
                "model_artifact": entry.model_artifact, "location": entry.path}
    from trainops.backends.sagemaker import registry as sagemaker_registry

    package = sagemaker_registry.champion(_factory(client_factory, region), group)
    if package is None:
        return None
    return {"group": package.group, "version": package.version, "metrics": package.metrics,
            "model_artifact": package.model_artifact_uri, "location": package.arn}
