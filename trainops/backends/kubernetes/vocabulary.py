"""The kubernetes engine's vocabulary: a TrainJob's states in trainops' words, its failure rules, no price.

The states are those `trainops.backends.kubernetes.status.standing` reads from a TrainJob's conditions and its pods:

- ``Pending`` (no pod yet), ``Created`` (its pods exist), ``Suspended`` (Kueue holds the job until its quota admits
  it: waiting, never a failure), ``Restarting`` (a HyperPodPyTorchJob HyperPod's operator restarts in place);
- ``Complete`` -> Completed;
- ``DeadlineExceeded``: Kubernetes ended the job at ``activeDeadlineSeconds`` (the spec's ``max_run``) -> `timeout`;
- ``Evicted``, ``Preempted``, ``NodeLost``: Kubernetes took a pod away, or its node went -> `infrastructure` (a fresh
  attempt resumes from the checkpoints on the shared volume);
- ``OOMKilled``: a container ran out of memory -> `user` (named: larger nodes or less memory);
- ``Failed``: a rank failed -> `user`; the runtime's failure file (its root cause) is the failure text, so the
  neutral rules read it first (a GPU fault or an NCCL error in it is still `infrastructure`);
- ``Deleted``: trainops deleted it (a stop, its reason recorded) -> Stopped.

No price: what a pod costs depends on the cluster's nodes, which trainops cannot see, so a kubernetes job's cost is
reported as unknown and a ``max_cost_usd`` on it is refused, never priced at SageMaker's list. No spec rules of its
own: the spec's ``instance_type`` only sizes the pods' resource requests (`render`).

Standard library only (and trainops' light modules): the Airflow trigger imports it through the registry.
"""

from __future__ import annotations

from trainops.backends.failures import INFRASTRUCTURE, STOPPED, TIMEOUT, USER, Rule
from trainops.backends.states import FAILURE, SUCCESS, WAITING, JobStatus, Outcome
from trainops.backends.vocabulary import Vocabulary, register

__all__ = ["ENDED_STATUSES", "KUBERNETES", "LOST", "RULES", "TABLE", "trainjob_status"]

#: The states of a TrainJob as `status.standing` names them -> success, failure or waiting.
TABLE: dict[str, Outcome] = {
    "Pending": WAITING,
    "Created": WAITING,
    "Suspended": WAITING,  # Kueue: waiting for the queue to admit it
    "Restarting": WAITING,  # HyperPod's operator restarts the job in place after a fault
    "Complete": SUCCESS,
    "DeadlineExceeded": FAILURE,
    "Evicted": FAILURE,
    "Preempted": FAILURE,
    "NodeLost": FAILURE,
    "OOMKilled": FAILURE,
    "Failed": FAILURE,
    "Deleted": FAILURE,
}

#: The states of a pod Kubernetes took away (`status.lost`).
LOST = ("Evicted", "Preempted", "NodeLost")

#: The ended states as the training-job status they mean (the other failures are Failed).
ENDED_STATUSES: dict[str, str] = {"Complete": "Completed", "Deleted": "Stopped"}

MEANINGS: dict[str, str] = {
    "Pending": "the TrainJob has no pod yet",
    "Created": "the TrainJob's pods exist",
    "Suspended": "Kueue holds the TrainJob until its queue admits it (waiting, not failed)",
    "Restarting": "HyperPod's operator restarts the HyperPodPyTorchJob in place after a fault (waiting)",
    "DeadlineExceeded": "Kubernetes ended the TrainJob at its activeDeadlineSeconds (max_run)",
    "Evicted": "Kubernetes evicted a pod of the TrainJob",
    "Preempted": "the scheduler preempted a pod of the TrainJob",
    "NodeLost": "a node of the TrainJob was lost",
    "OOMKilled": "a container of the TrainJob ran out of memory",
    "Failed": "a rank of the TrainJob failed",
    "Deleted": "trainops deleted the TrainJob (stopped)",
}

#: The engine's failure rules, matched against its states (the evidence's ``secondary_statuses``).
RULES: tuple[Rule, ...] = (
    Rule.on_states(TIMEOUT, "DeadlineExceeded", "Kubernetes ended the TrainJob at its activeDeadlineSeconds (from "
                   "max_run)", "limit"),
    Rule.on_states(STOPPED, "Deleted", "the TrainJob was deleted (stopped)", "limit"),
    Rule.on_states(INFRASTRUCTURE, ("Evicted", "Preempted", "NodeLost"), "Kubernetes took a pod of the TrainJob away "
                   "(evicted, preempted, or its node was lost): a retry resumes from the checkpoints", "hosts"),
    Rule.on_states(USER, "OOMKilled", "a container of the TrainJob ran out of memory (OOMKilled): ask for larger "
                   "nodes or use less", "hosts"),
    Rule.on_states(USER, "Failed", "a rank of the TrainJob failed (the runtime's failure file says why)", "script"),
)

KUBERNETES = register(Vocabulary(
    engine="kubernetes", tables={"kubernetes_trainjob": TABLE}, training_kind="kubernetes_trainjob",
    ended_as=ENDED_STATUSES, state_meanings=MEANINGS, rules=RULES, price=None, price_basis="",
    front_end_options=frozenset({"processes_per_host", "channel_overrides", "checkpoint_key"})))


def trainjob_status(state: str) -> JobStatus:
    """The training-job status of a TrainJob state (`TABLE`): waiting -> InProgress, else Completed, Stopped or
    Failed."""
    return KUBERNETES.job_status(state)
