"""The SageMaker Model Registry: a model package group per model, one versioned package per registered model.

Each package carries its evaluation metrics twice: as ``ModelMetrics`` (a metrics JSON in S3, what SageMaker Studio
shows) and as ``CustomerMetadataProperties`` (``metric:<name>`` -> value as text), which can be read back with one
describe call to compare a candidate with the champion. The approval status comes from the evaluation gate:
``Approved`` when it passed (or ``PendingManualApproval`` when a person must sign off), ``Rejected`` when it failed.
The champion is the most recently created Approved package of the group.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from trainops.aws.clients import ClientFactory, translate_client_error
from trainops.aws.s3 import put_bytes
from trainops.backends.sagemaker.training import is_not_found
from trainops.errors import Problem, SpecError

APPROVAL_STATUSES: tuple[str, ...] = ("Approved", "Rejected", "PendingManualApproval")
METRIC_PREFIX = "metric:"


@dataclass(frozen=True)
class RegisteredModel:
    """A model package: its ARN, version in the group, approval status and metrics."""

    arn: str
    group: str
    version: int | None
    approval_status: str
    metrics: dict[str, float]
    model_artifact_uri: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom and KFP outputs)."""
        return asdict(self)


def approval_status(gate_passed: bool, manual_approval: bool = False) -> str:
    """The ModelApprovalStatus for a gate result: Rejected when it failed; Approved when it passed, or
    PendingManualApproval when a person must approve."""
    if not gate_passed:
        return "Rejected"
    return "PendingManualApproval" if manual_approval else "Approved"


def ensure_group(factory: ClientFactory, group: str, description: str = "") -> str:
    """Create the model package group if it does not exist; return its ARN."""
    from botocore.exceptions import ClientError

    client = factory("sagemaker")
    try:
        return str(client.describe_model_package_group(ModelPackageGroupName=group)["ModelPackageGroupArn"])
    except ClientError as error:
        if not is_not_found(error):
            raise translate_client_error(error, f"DescribeModelPackageGroup {group}", "group") from error
    arguments: dict[str, Any] = {"ModelPackageGroupName": group}
    if description:
        arguments["ModelPackageGroupDescription"] = description
    try:
        return str(client.create_model_package_group(**arguments)["ModelPackageGroupArn"])
    except ClientError as error:
        raise translate_client_error(error, f"CreateModelPackageGroup {group}", "group") from error


def metadata_from_metrics(metrics: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, str]:
    """``CustomerMetadataProperties`` for the metrics: ``{"metric:accuracy": "0.93", ...}`` plus ``extra``.

    Only numbers are kept (the registry compares them); values are written with ``repr`` so they read back exactly.
    """
    properties = {f"{METRIC_PREFIX}{name}": repr(float(value)) for name, value in sorted(metrics.items())
                  if isinstance(value, (int, float)) and not isinstance(value, bool)}
    properties.update(extra or {})
    return properties


def metrics_from_metadata(properties: dict[str, str] | None) -> dict[str, float]:
    """The metrics stored by `metadata_from_metrics` (other properties, and values that are not numbers, ignored)."""
    metrics = {}
    for key, value in (properties or {}).items():
        if key.startswith(METRIC_PREFIX):
            try:
                metrics[key[len(METRIC_PREFIX):]] = float(value)
            except ValueError:
                continue
    return metrics


def model_data(model_artifact_uri: str) -> dict[str, Any]:
    """The container's model: a model.tar.gz as ``ModelDataUrl``; a prefix (a job run with
    disable_output_compression: its files under ``.../output/model/``) as an uncompressed ``ModelDataSource``."""
    if model_artifact_uri.endswith("/"):
        return {"ModelDataSource": {"S3DataSource": {"S3Uri": model_artifact_uri, "S3DataType": "S3Prefix",
                                                     "CompressionType": "None"}}}
    return {"ModelDataUrl": model_artifact_uri}


def build_model_package_request(
    *,
    group: str,
    image_uri: str,
    model_artifact_uri: str,
    metrics: dict[str, Any],
    metrics_uri: str,
    approval: str,
    description: str = "",
    content_types: list[str] | None = None,
    response_types: list[str] | None = None,
    metadata: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``create_model_package`` keyword arguments (pure: no AWS call)."""
    if approval not in APPROVAL_STATUSES:
        raise SpecError(Problem("approval", f"{approval!r} is not one of {', '.join(APPROVAL_STATUSES)}"))
    request: dict[str, Any] = {
        "ModelPackageGroupName": group,
        "ModelApprovalStatus": approval,
        "InferenceSpecification": {
            "Containers": [{"Image": image_uri, **model_data(model_artifact_uri)}],
            "SupportedContentTypes": list(content_types or ["application/json"]),
            "SupportedResponseMIMETypes": list(response_types or ["application/json"]),
        },
        "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": metrics_uri}}},
        "CustomerMetadataProperties": metadata_from_metrics(metrics, metadata),
    }
    if description:
        request["ModelPackageDescription"] = description
    return request


def register(
    factory: ClientFactory,
    *,
    group: str,
    image_uri: str,
    model_artifact_uri: str,
    metrics: dict[str, Any],
    metrics_uri: str,
    approval: str,
    description: str = "",
    metadata: dict[str, str] | None = None,
) -> RegisteredModel:
    """Register a model: ensure the group, upload the metrics JSON to ``metrics_uri``, create the package.

    Returns the package with its version in the group.
    """
    from botocore.exceptions import ClientError

    request = build_model_package_request(
        group=group, image_uri=image_uri, model_artifact_uri=model_artifact_uri, metrics=metrics,
        metrics_uri=metrics_uri, approval=approval, description=description, metadata=metadata,
    )
    ensure_group(factory, group)
    put_bytes(factory, metrics_uri, json.dumps(metrics, sort_keys=True).encode("utf-8"), "application/json")
    client = factory("sagemaker")
    try:
        arn = client.create_model_package(**request)["ModelPackageArn"]
        described = client.describe_model_package(ModelPackageName=arn)
    except ClientError as error:
        raise translate_client_error(error, f"CreateModelPackage in {group}", "group") from error
    return _registered(described, group)


def _registered(described: dict[str, Any], group: str) -> RegisteredModel:
    containers = (described.get("InferenceSpecification") or {}).get("Containers") or [{}]
    version = described.get("ModelPackageVersion")
    return RegisteredModel(
        arn=described["ModelPackageArn"],
        group=described.get("ModelPackageGroupName") or group,
        version=None if version is None else int(version),
        approval_status=described.get("ModelApprovalStatus", ""),
        metrics=metrics_from_metadata(described.get("CustomerMetadataProperties")),
        model_artifact_uri=containers[0].get("ModelDataUrl")
        or ((containers[0].get("ModelDataSource") or {}).get("S3DataSource") or {}).get("S3Uri"),
    )


def champion(factory: ClientFactory, group: str) -> RegisteredModel | None:
    """The latest Approved package of the group (None when there is no group or no approved package)."""
    from botocore.exceptions import ClientError

    client = factory("sagemaker")
    try:
        listed = client.list_model_packages(
            ModelPackageGroupName=group,
            ModelApprovalStatus="Approved",
            SortBy="CreationTime",
            SortOrder="Descending",
            MaxResults=1,
        ).get("ModelPackageSummaryList") or []
        if not listed:
            return None
        described = client.describe_model_package(ModelPackageName=listed[0]["ModelPackageArn"])
    except ClientError as error:
        if is_not_found(error):
            return None
        raise translate_client_error(error, f"ListModelPackages {group}", "group") from error
    return _registered(described, group)
