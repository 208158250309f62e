"""The SageMaker engine's vocabulary: its states, its failure rules, its price and the spec rules it binds.

The failure rules, the price and the spec rules are the SageMaker request's (`trainops.backends.request.vocabulary`),
which the local backend runs too; the states are SageMaker's APIs' own.

Standard library only: the Airflow trigger imports it through the registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from trainops.backends.failures import FailureEvidence
from trainops.backends.request.vocabulary import PRICE_BASIS, RULES, list_price
from trainops.backends.states import FAILURE, SUCCESS, WAITING, Outcome, classify, is_terminal, terminal_statuses
from trainops.backends.vocabulary import Vocabulary, register
from trainops.spec.rule_registry import SAGEMAKER_REQUEST

__all__ = ["RULES", "SAGEMAKER", "TABLES", "TRAINING_SECONDARY_MEANINGS", "classify", "evidence_from_description",
           "explain_secondary_status", "is_terminal", "list_price", "terminal_statuses"]

#: Resource kind -> status -> outcome. Status names are exactly as the AWS APIs spell them.
TABLES: dict[str, dict[str, Outcome]] = {
    # sagemaker.describe_training_job()["TrainingJobStatus"]
    "training_job": {
        "InProgress": WAITING,
        "Stopping": WAITING,  # transient: it ends as Stopped (or Completed, if the job finished first)
        "Completed": SUCCESS,
        "Failed": FAILURE,
        "Stopped": FAILURE,  # stopped by a user or by the service (MaxRuntimeExceeded): the model may be partial
        "Deleting": FAILURE,  # the job is being deleted: nothing to wait for
    },
    # sagemaker.describe_processing_job()["ProcessingJobStatus"]
    "processing_job": {
        "InProgress": WAITING,
        "Stopping": WAITING,
        "Completed": SUCCESS,
        "Failed": FAILURE,
        "Stopped": FAILURE,
    },
    # fsx.describe_data_repository_tasks()["DataRepositoryTasks"][i]["Lifecycle"]
    "fsx_task": {
        "PENDING": WAITING,
        "EXECUTING": WAITING,
        "CANCELING": WAITING,
        "SUCCEEDED": SUCCESS,  # may still carry failed files: check Status.FailedCount
        "FAILED": FAILURE,
        "CANCELED": FAILURE,
    },
    # fsx.describe_file_systems()["FileSystems"][i]["Lifecycle"]
    "fsx_file_system": {
        "CREATING": WAITING,
        "UPDATING": SUCCESS,  # an update (e.g. storage scaling) keeps the file system mountable
        "AVAILABLE": SUCCESS,
        "FAILED": FAILURE,
        "DELETING": FAILURE,
        "MISCONFIGURED": FAILURE,
        "MISCONFIGURED_UNAVAILABLE": FAILURE,
    },
    # fsx.describe_data_repository_associations()["Associations"][i]["Lifecycle"]
    "fsx_association": {
        "CREATING": WAITING,
        "UPDATING": WAITING,
        "AVAILABLE": SUCCESS,
        "MISCONFIGURED": FAILURE,
        "DELETING": FAILURE,
        "FAILED": FAILURE,
    },
}

#: What a training job's secondary status tells a user, for the statuses that need explaining.
TRAINING_SECONDARY_MEANINGS: dict[str, str] = {
    "Starting": "starting the training job",
    "Pending": "waiting for capacity or for a warm pool",
    "LaunchingMLInstances": "launching the ML instances",
    "PreparingTrainingStack": "preparing the training stack",
    "Downloading": "downloading the input data",
    "DownloadingTrainingImage": "downloading the training image",
    "Training": "the training script is running",
    "Uploading": "uploading the model and output data to S3",
    "Restarting": "restarting after a recoverable failure (RetryStrategy)",
    "Updating": "applying an update to the job",
    "Interrupted": (
        "spot capacity was reclaimed (spot interruption); SageMaker resumes the job, from its last checkpoint if "
        "checkpointing is configured, when capacity returns, within MaxWaitTimeInSeconds"
    ),
    "MaxRuntimeExceeded": (
        "the job ran longer than MaxRuntimeInSeconds and was stopped; raise max_run or make training shorter"
    ),
    "MaxWaitTimeExceeded": (
        "the spot job waited and ran longer than MaxWaitTimeInSeconds and was stopped; raise max_wait or use "
        "on-demand capacity"
    ),
    "Stopping": "stopping the job",
    "Stopped": "the job was stopped",
    "Completed": "the job finished successfully",
    "Failed": "the job failed; see the failure reason",
}

#: Secondary statuses that mean the job is held back by spot capacity (it is not running user code).
SPOT_INTERRUPTION_STATUSES: frozenset[str] = frozenset({"Interrupted"})


def explain_secondary_status(status: str | None) -> str:
    """A one-line explanation of a training job's secondary status for users (empty when there is none)."""
    return SAGEMAKER.explain_state(status)


def evidence_from_description(response: Mapping[str, Any], *, stop_requested: bool = False) -> FailureEvidence:
    """Evidence from a DescribeTrainingJob response: status, FailureReason, SecondaryStatusTransitions."""
    transitions: Iterable[Mapping[str, Any]] = response.get("SecondaryStatusTransitions") or []
    seen = tuple(str(item.get("Status", "")) for item in transitions if item.get("Status"))
    secondary = str(response.get("SecondaryStatus") or "")
    if secondary and (not seen or seen[-1] != secondary):
        seen = seen + (secondary,)
    return FailureEvidence(status=str(response.get("TrainingJobStatus") or ""),
                           failure_text=str(response.get("FailureReason") or ""),
                           secondary_statuses=seen, stop_requested=stop_requested)


SAGEMAKER = register(Vocabulary(
    engine="sagemaker", tables=TABLES, training_kind="training_job",
    ended_as={"Stopped": "Stopped", "Deleting": "Deleting"}, state_meanings=TRAINING_SECONDARY_MEANINGS,
    rules=RULES, price=list_price, price_basis=PRICE_BASIS,
    spec_rules=frozenset({SAGEMAKER_REQUEST}), front_end_options=frozenset()))
