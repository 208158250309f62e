"""Where a TrainJob (or a HyperPodPyTorchJob) stands, from its conditions and its pods (`standing`), in the engine's
words (its states: `trainops.backends.kubernetes.vocabulary`), and trainops' status of each.

- ``Complete`` (a HyperPodPyTorchJob's ``Completed``) -> Completed; ``Failed`` -> Failed, with why:
  ``DeadlineExceeded`` is the job's ``max_run`` (`timeout`), a pod evicted, preempted or whose node was lost is
  ``Evicted`` / ``Preempted`` / ``NodeLost`` (`infrastructure`: retried from the checkpoints), a container
  ``OOMKilled`` is named, anything else is ``Failed`` (a rank failed: the script's, `user`);
- ``Suspended`` (Kueue holds the job until its quota admits it) is waiting, not failure: InProgress, said so;
- a HyperPodPyTorchJob whose latest condition is ``Restarting`` (HyperPod's operator restarts it in place after a
  fault, within its ``jobMaxRetryCount``) is waiting too: InProgress, said so;
- no condition yet: ``Pending`` or ``Created``, InProgress.

The engine's failure rules (its vocabulary) read the state this module names (the result's ``secondary_status``);
the failure text says the same for a person, and ``lost_host`` in the details names the host Kubernetes took away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainops.backends.kit import JobStatus
from trainops.backends.kubernetes.vocabulary import trainjob_status

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: A pod's DisruptionTarget reasons that mean Kubernetes took the pod (or its node) away: the engine's state, and why.
DISRUPTIONS = {
    "PreemptionByScheduler": ("Preempted", "preempted by the scheduler"),
    "PreemptionByKubeScheduler": ("Preempted", "preempted by the scheduler"),
    "EvictionByEvictionAPI": ("Evicted", "evicted"),
    "DeletionByTaintManager": ("NodeLost", "lost with its node (tainted NoExecute)"),
    "DeletionByPodGC": ("NodeLost", "lost with its node (the pod was garbage-collected)"),
    "TerminationByKubelet": ("Evicted", "evicted by the kubelet (node pressure or shutdown)"),
}


@dataclass(frozen=True)
class Standing:
    """A TrainJob's status in trainops' words."""

    status: JobStatus
    secondary_status: str
    failure_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def host_of(pod: Mapping[str, Any]) -> str:
    """The trainops host a pod of the job is: ``algo-<completion index + 1>`` (its name when it has no index)."""
    metadata = pod.get("metadata") or {}
    index = (metadata.get("annotations") or {}).get(COMPLETION_INDEX) or (metadata.get("labels") or {}).get(
        COMPLETION_INDEX)
    text = str(index or "")
    return f"algo-{int(text) + 1}" if text.isdigit() else str(metadata.get("name") or "?")


def lost(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """How Kubernetes took the pod away: the engine's state (``Evicted``, ``Preempted``, ``NodeLost``) and why; None
    when it did not. A disruption of a reason not listed here is a lost node (Kubernetes took it, the script did
    not fail)."""
    status = pod.get("status") or {}
    if status.get("reason") == "Evicted":
        return "Evicted", f"evicted: {status.get('message') or 'no message'}"
    if status.get("reason") == "NodeLost":
        return "NodeLost", "lost with its node"
    for condition in status.get("conditions") or []:
        if (isinstance(condition, Mapping) and condition.get("type") == "DisruptionTarget"
                and condition.get("status") == "True"):
            reason = str(condition.get("reason") or "")
            return DISRUPTIONS.get(reason, ("NodeLost", f"disrupted ({reason})"))
    return None


def oom_killed(pod: Mapping[str, Any]) -> bool:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = ((container or {}).get("state") or {}).get("terminated") or {}
        last = ((container or {}).get("lastState") or {}).get("terminated") or {}
        if "OOMKilled" in (terminated.get("reason"), last.get("reason")):
            return True
    return False


def _standing(state: str, failure_reason: str | None = None, details: dict[str, Any] | None = None) -> Standing:
    return Standing(trainjob_status(state), state, failure_reason, details or {})


def standing(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> Standing:
    """The TrainJob ``job`` (as the API returns it) and its pods, in the engine's words and trainops' status."""
    if _condition(job, "Complete") is not None or _condition(job, "Completed") is not None:
        return _standing("Complete")
    failed = _condition(job, "Failed")
    if failed is not None:
        reason, message = str(failed.get("reason") or ""), str(failed.get("message") or "")
        if reason == "DeadlineExceeded":
            deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
            return _standing("DeadlineExceeded", f"Kubernetes ended the job at its deadline ({deadline} s, "
                                                 "activeDeadlineSeconds from max_run): DeadlineExceeded")
        for pod in pods:
            taken = lost(pod)
            if taken is not None:
                state, why = taken
                host = host_of(pod)
                name = (pod.get("metadata") or {}).get("name")
                return _standing(state, f"host {host} (pod {name}) was {why}; the job failed ({reason or 'Failed'}):"
                                        " an infrastructure failure, a retry resumes from the checkpoints",
                                 {"lost_host": f"{host}: {why}"})
        killed = [host_of(pod) for pod in pods if oom_killed(pod)]
        if killed:
            return _standing("OOMKilled", f"host {', '.join(killed)} ran out of memory (OOMKilled): ask for larger "
                                          "nodes or use less", {"oom_killed": killed})
        return _standing("Failed", message or reason or "the TrainJob failed")
    suspended = _condition(job, "Suspended")
    if suspended is not None:
        return _standing("Suspended", details={"waiting": f"suspended ({suspended.get('reason') or 'Kueue'}): "
                                                          "waiting for the queue to admit it"})
    if _latest(job) == "Restarting":
        return _standing("Restarting", details={"waiting": "HyperPod's operator is restarting the job in place "
                                                           "after a fault (it resumes from the checkpoints)"})
    return _standing("Created" if pods else "Pending")


def _latest(job: Mapping[str, Any]) -> str | None:
    """The type of the job's last condition that holds (how HyperPod's CLI names a job's state)."""
    held = [condition for condition in (job.get("status") or {}).get("conditions") or []
            if isinstance(condition, Mapping) and condition.get("status") == "True"]
    return str(held[-1].get("type")) if held else None
