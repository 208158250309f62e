"""SageMaker training jobs: submit (with re-attach), describe, stop.

`submit` sends the rendered request to ``CreateTrainingJob`` unchanged, so what ``trainops render`` shows is what
SageMaker receives. A job name is unique per account and region for ever, which is what makes re-attach safe: a
retried Airflow task that submits the same deterministic name finds the job its first attempt created.

`describe` reduces ``DescribeTrainingJob`` to a small JSON-able `JobSummary` (what XCom, KFP outputs and the CLI
show). The wait is the kit's (`trainops.backends.polled.PolledBackend.wait` over `SageMakerBackend.look`).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from trainops.aws.clients import ClientFactory, error_code, error_message, translate_client_error
from trainops.backends.api import MAX_SUFFIX
from trainops.backends.states import classify
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.names import valid_job_name, with_suffix

logger = logging.getLogger(__name__)

IfExists = Literal["reattach", "fail", "new"]
IF_EXISTS_CHOICES: tuple[str, ...] = ("reattach", "fail", "new")

#: How many suffixed names (``-2``, ``-3``, ...) ``if_exists="new"`` tries before giving up: the re-attach policy's
#: one bound (`trainops.backends.api.MAX_SUFFIX`), so every backend and front end looks as far for a job's copies.
MAX_NEW_NAME_ATTEMPTS = MAX_SUFFIX


class JobAlreadyExists(SpecError):
    """``if_exists="fail"`` and a training job of that name exists already (names are unique for ever)."""


@dataclass(frozen=True)
class SubmitResult:
    """What `submit` did: the job's name, whether this call created it, and its status at that moment."""

    job_name: str
    created: bool
    status: str
    arn: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom and KFP outputs)."""
        return asdict(self)


@dataclass(frozen=True)
class JobSummary:
    """What a user needs to know about a training job; every field is JSON-able (times are ISO 8601 strings)."""

    job_name: str
    status: str
    secondary_status: str | None = None
    secondary_status_history: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None
    billable_seconds: int | None = None
    training_seconds: int | None = None
    model_artifact_uri: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    instance_groups: list[dict[str, Any]] = field(default_factory=list)
    spot: bool = False
    max_runtime_seconds: int | None = None
    max_wait_seconds: int | None = None
    creation_time: str | None = None
    training_start_time: str | None = None
    training_end_time: str | None = None
    last_modified_time: str | None = None
    arn: str | None = None
    guard: dict[str, str] | None = None  # a trainops guard that stopped the job (trainops.backends.guards.Tripped)

    @property
    def outcome(self) -> str:
        """``"success"``, ``"failure"`` or ``"waiting"``, from the shared states table."""
        return classify("training_job", self.status)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom, KFP outputs and ``trainops status --json``)."""
        return asdict(self)


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def summarize(response: dict[str, Any]) -> JobSummary:
    """Reduce a ``DescribeTrainingJob`` response to a `JobSummary` (pure: no AWS call; the trigger uses it too)."""
    resources = response.get("ResourceConfig") or {}
    groups = [
        {
            "name": group.get("InstanceGroupName"),
            "instance_type": group.get("InstanceType"),
            "instance_count": _optional_int(group.get("InstanceCount")),
        }
        for group in resources.get("InstanceGroups") or []
    ]
    stopping = response.get("StoppingCondition") or {}
    history = [
        {
            "status": transition.get("Status"),
            "start_time": _iso(transition.get("StartTime")),
            "end_time": _iso(transition.get("EndTime")),
            "message": transition.get("StatusMessage"),
        }
        for transition in response.get("SecondaryStatusTransitions") or []
    ]
    guard = response.get(GUARD_KEY)  # a trainops guard stopped the job (its tags: `describe_response`)
    instance_count = resources.get("InstanceCount")
    if instance_count is None and groups:
        instance_count = sum(group["instance_count"] or 0 for group in groups)
    return JobSummary(
        job_name=response["TrainingJobName"],
        status=response.get("TrainingJobStatus", ""),
        secondary_status=response.get("SecondaryStatus"),
        secondary_status_history=history,
        failure_reason=response.get("FailureReason") or (guard or {}).get("message"),
        billable_seconds=_optional_int(response.get("BillableTimeInSeconds")),
        training_seconds=_optional_int(response.get("TrainingTimeInSeconds")),
        model_artifact_uri=(response.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        instance_type=resources.get("InstanceType"),
        instance_count=_optional_int(instance_count),
        instance_groups=groups,
        spot=bool(response.get("EnableManagedSpotTraining", False)),
        max_runtime_seconds=_optional_int(stopping.get("MaxRuntimeInSeconds")),
        max_wait_seconds=_optional_int(stopping.get("MaxWaitTimeInSeconds")),
        creation_time=_iso(response.get("CreationTime")),
        training_start_time=_iso(response.get("TrainingStartTime")),
        training_end_time=_iso(response.get("TrainingEndTime")),
        last_modified_time=_iso(response.get("LastModifiedTime")),
        arn=response.get("TrainingJobArn"),
        guard=guard,
    )


def is_not_found(error: BaseException) -> bool:
    """Whether a describe call failed because the resource does not exist (SageMaker says so with a validation
    error, not a dedicated code)."""
    if error_code(error) not in {"ValidationException", "ResourceNotFound", "ResourceNotFoundException"}:
        return False
    message = error_message(error).lower()
    return "not found" in message or "could not find" in message or "does not exist" in message


def _is_name_conflict(error: BaseException) -> bool:
    code = error_code(error)
    if code == "ResourceInUse":
        return True
    message = error_message(error).lower()
    return code == "ValidationException" and ("already exists" in message or "must be unique" in message)


def _describe_or_none(client: Any, name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        return client.describe_training_job(TrainingJobName=name)
    except ClientError as error:
        if is_not_found(error):
            return None
        raise translate_client_error(error, f"DescribeTrainingJob {name}", "TrainingJobName") from error


def _renamed(request: dict[str, Any], name: str) -> dict[str, Any]:
    # A new name must also reach the container: the script-mode hyperparameter carries it (contracts.md section 2).
    renamed = dict(request, TrainingJobName=name)
    hyperparameters = request.get("HyperParameters")
    if isinstance(hyperparameters, dict) and "sagemaker_job_name" in hyperparameters:
        renamed["HyperParameters"] = dict(hyperparameters, sagemaker_job_name=json.dumps(name))
    return renamed


def _check_submit_arguments(request: dict[str, Any], if_exists: str) -> str:
    if if_exists not in IF_EXISTS_CHOICES:
        raise SpecError(Problem("if_exists", f"{if_exists!r} is not one of {', '.join(IF_EXISTS_CHOICES)}"))
    name = request.get("TrainingJobName")
    if not valid_job_name(name):
        raise SpecError(
            Problem(
                "TrainingJobName",
                f"{name!r} is not a valid SageMaker job name: 1-63 letters, digits and hyphens, starting and ending "
                "with a letter or digit; use trainops.spec.names.deterministic_job_name()",
            )
        )
    return str(name)


def submit(factory: ClientFactory, request: dict[str, Any], if_exists: IfExists = "reattach") -> SubmitResult:
    """Create the training job described by ``request`` (the exact ``create_training_job`` keyword arguments).

    When a job of that name exists already (found by describing it first, or by the create call losing a race with
    another submitter):

    - ``"reattach"`` (default): create nothing and return the existing job (``created=False``), whatever its status;
      the caller's wait then reports its outcome;
    - ``"fail"``: raise `JobAlreadyExists`;
    - ``"new"``: create the job as ``<name>-2``, ``<name>-3``, ... (the first free one, cut to 63 characters), with
      the ``sagemaker_job_name`` hyperparameter updated to match.

    Raises `SpecError` for an invalid name or an ``if_exists`` that is not one of the three, and for a request SageMaker
    rejects as invalid; `JobFailed` for other AWS errors.
    """
    from botocore.exceptions import ClientError

    base_name = _check_submit_arguments(request, if_exists)
    client = factory("sagemaker")
    name = base_name
    for attempt in range(1, MAX_NEW_NAME_ATTEMPTS + 1):
        existing = _describe_or_none(client, name)
        if existing is None:
            to_send = request if name == base_name else _renamed(request, name)
            try:
                response = client.create_training_job(**to_send)
            except ClientError as error:
                if not _is_name_conflict(error):
                    raise translate_client_error(error, f"CreateTrainingJob {name}") from error
                # Someone created it between our describe and our create: treat it like a job found by describe.
                existing = _describe_or_none(client, name)
                if existing is None:
                    raise translate_client_error(error, f"CreateTrainingJob {name}") from error
            else:
                return SubmitResult(job_name=name, created=True, status="InProgress",
                                    arn=response.get("TrainingJobArn"))
        status = existing.get("TrainingJobStatus", "")
        if if_exists == "reattach":
            return SubmitResult(job_name=name, created=False, status=status, arn=existing.get("TrainingJobArn"))
        if if_exists == "fail":
            raise JobAlreadyExists(
                Problem(
                    "TrainingJobName",
                    f"a training job named {name!r} already exists (status {status}); job names are unique for ever "
                    "in an account and region: choose another name, or use if_exists='reattach' to follow it or "
                    "'new' to create a suffixed copy",
                )
            )
        name = with_suffix(base_name, str(attempt + 1))
    raise JobFailed(
        f"could not find a free name for a new copy of {base_name!r} after {MAX_NEW_NAME_ATTEMPTS} attempts; "
        "choose another base name"
    )


def describe_response(factory: ClientFactory, name: str) -> dict[str, Any]:
    """The DescribeTrainingJob response; for a job a trainops guard stopped, with the guard read from its tags under
    `GUARD_KEY`. Raises `SpecError` (naming the job) when there is no job of that name."""
    client = factory("sagemaker")
    response = _describe_or_none(client, name)
    if response is None:
        raise SpecError(
            Problem("job_name", f"no training job named {name!r} in this account and region; check the name and "
                                "the region")
        )
    if response.get("TrainingJobStatus") in ("Stopping", "Stopped") and response.get("TrainingJobArn"):
        guard = _guard_from_tags(client, response["TrainingJobArn"])
        if guard is not None:
            response = {**response, GUARD_KEY: guard}
    return response


def describe(factory: ClientFactory, name: str) -> JobSummary:
    """The `JobSummary` of a training job. Raises `SpecError` (naming the job) when there is no job of that name."""
    return summarize(describe_response(factory, name))


def final_metrics(response: dict[str, Any]) -> dict[str, float]:
    """The job's final metric values (``FinalMetricDataList``) as a small name -> number mapping."""
    metrics: dict[str, float] = {}
    for item in response.get("FinalMetricDataList") or []:
        metric, value = item.get("MetricName"), item.get("Value")
        if metric is not None and isinstance(value, (int, float)):
            metrics[str(metric)] = float(value)
    return metrics


#: Tags a trainops guard leaves on the job it stopped (SageMaker keeps no stop reason of its own), read back by
#: `describe_response` so a later `trainops status` says budget / stalled / timeout, not a bare Stopped.
GUARD_KIND_TAG = "trainops:stopped-by"
GUARD_MESSAGE_TAG = "trainops:stop-reason"
#: Where `describe_response` puts the guard it read from the tags (not a SageMaker field).
GUARD_KEY = "TrainopsGuard"
_TAG_VALUE_UNSAFE = re.compile(r"[^\w\s.:/=+\-@]")


def tag_value(text: str) -> str:
    """``text`` as a tag value SageMaker accepts (letters, digits, spaces and ``_ . : / = + - @``; 256 at most)."""
    return _TAG_VALUE_UNSAFE.sub(" ", text.replace("$", "USD ")).strip()[:256]


def guard_tags(guard: Any) -> list[dict[str, str]]:
    """The tags that record why a guard stopped a job (`trainops.backends.guards.Tripped`)."""
    return [{"Key": GUARD_KIND_TAG, "Value": tag_value(guard.kind)},
            {"Key": GUARD_MESSAGE_TAG, "Value": tag_value(guard.message)}]


def _guard_from_tags(client: Any, arn: str) -> dict[str, str] | None:
    try:
        tags = {tag.get("Key"): tag.get("Value") for tag in client.list_tags(ResourceArn=arn).get("Tags") or []}
    except Exception as error:  # noqa: BLE001 - e.g. no sagemaker:ListTags permission: the job reads plainly Stopped
        logger.debug("[trainops] could not read the tags of %s: %s", arn, error)
        return None
    kind = tags.get(GUARD_KIND_TAG)
    return {"kind": str(kind), "message": str(tags.get(GUARD_MESSAGE_TAG) or kind)} if kind else None


def stop(factory: ClientFactory, name: str, guard: Any = None) -> str:
    """Ask SageMaker to stop a training job; return its status afterwards (``"Stopping"``, or the terminal status it
    had already reached: stopping a finished job is not an error, so ``on_kill`` and retries can call it freely).
    ``guard``: the trainops guard that stops it (`trainops.backends.guards.Tripped`), tagged on the job first."""
    from botocore.exceptions import ClientError

    client = factory("sagemaker")
    summary = describe(factory, name)
    if summary.outcome != "waiting" or summary.status == "Stopping":
        return summary.status
    if guard is not None and summary.arn:
        try:
            client.add_tags(ResourceArn=summary.arn, Tags=guard_tags(guard))
        except ClientError as error:  # the stop matters more than its record
            logger.warning("[trainops] could not tag %s with why it is stopped (%s): %s", name, guard.kind,
                           error_message(error))
    try:
        client.stop_training_job(TrainingJobName=name)
    except ClientError as error:
        # The job may have finished between the describe and the stop: report what it is now.
        latest = _describe_or_none(client, name)
        if latest is not None and classify("training_job", latest.get("TrainingJobStatus")) != "waiting":
            return str(latest.get("TrainingJobStatus"))
        raise translate_client_error(error, f"StopTrainingJob {name}", "job_name") from error
    return "Stopping"
