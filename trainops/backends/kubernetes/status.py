"""Where a TrainJob stands, from its conditions and its pods (`standing`), in trainops' words.

- ``Complete`` -> Completed; ``Failed`` -> Failed, with why: ``DeadlineExceeded`` is the job's ``max_run``
  (`timeout`), a pod evicted, preempted or whose node was lost is a lost host (`infrastructure`: retried from the
  checkpoints), a container ``OOMKilled`` is named, anything else is the script's (`user`);
- ``Suspended`` (Kueue holds the job until its quota admits it) is waiting, not failure: InProgress, said so;
- no condition yet: InProgress.

The failure classifier (`trainops.backends.failures.classify_result`) reads what this module writes: the failure
reason's text, and ``host_lost`` in the details for a host Kubernetes took away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainops.backends.kit import JobStatus

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: A pod's DisruptionTarget reasons that mean Kubernetes took the pod (or its node) away.
DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by the scheduler",
    "PreemptionByKubeScheduler": "preempted by the scheduler",
    "EvictionByEvictionAPI": "evicted",
    "DeletionByTaintManager": "its node was lost (tainted NoExecute)",
    "DeletionByPodGC": "its node was lost (the pod was garbage-collected)",
    "TerminationByKubelet": "evicted by the kubelet (node pressure or shutdown)",
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


def lost(pod: Mapping[str, Any]) -> str | None:
    """Why Kubernetes took the pod away (evicted, preempted, its node lost), or None."""
    status = pod.get("status") or {}
    if status.get("reason") == "Evicted":
        return f"evicted: {status.get('message') or 'no message'}"
    if status.get("reason") == "NodeLost":
        return "its node was lost"
    for condition in status.get("conditions") or []:
        if (isinstance(condition, Mapping) and condition.get("type") == "DisruptionTarget"
                and condition.get("status") == "True"):
            reason = str(condition.get("reason") or "")
            return DISRUPTIONS.get(reason, f"disrupted ({reason})")
    return None


def oom_killed(pod: Mapping[str, Any]) -> bool:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = ((container or {}).get("state") or {}).get("terminated") or {}
        last = ((container or {}).get("lastState") or {}).get("terminated") or {}
        if "OOMKilled" in (terminated.get("reason"), last.get("reason")):
            return True
    return False


def standing(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> Standing:
    """The TrainJob ``job`` (as the API returns it) and its pods, in trainops' words."""
    if _condition(job, "Complete") is not None:
        return Standing(JobStatus.COMPLETED, "Complete")
    failed = _condition(job, "Failed")
    if failed is not None:
        reason, message = str(failed.get("reason") or ""), str(failed.get("message") or "")
        if reason == "DeadlineExceeded":
            deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
            return Standing(JobStatus.FAILED, "DeadlineExceeded",
                            f"the job ran longer than its max_run ({deadline} s, activeDeadlineSeconds): "
                            "Kubernetes ended it (DeadlineExceeded)")
        for pod in pods:
            why = lost(pod)
            if why is not None:
                host = host_of(pod)
                name = (pod.get("metadata") or {}).get("name")
                return Standing(JobStatus.FAILED, "HostLost",
                                f"host {host} (pod {name}) was {why}; the job failed ({reason or 'Failed'}): "
                                "an infrastructure failure, a retry resumes from the checkpoints",
                                {"host_lost": f"{host}: {why}"})
        killed = [host_of(pod) for pod in pods if oom_killed(pod)]
        if killed:
            return Standing(JobStatus.FAILED, "OOMKilled",
                            f"host {', '.join(killed)} ran out of memory (OOMKilled): ask for larger nodes or use "
                            "less", {"oom_killed": killed})
        return Standing(JobStatus.FAILED, reason or "Failed", message or reason or "the TrainJob failed")
    suspended = _condition(job, "Suspended")
    if suspended is not None:
        return Standing(JobStatus.IN_PROGRESS, "Suspended",
                        details={"waiting": f"suspended ({suspended.get('reason') or 'Kueue'}): waiting for the "
                                            "queue to admit it"})
    return Standing(JobStatus.IN_PROGRESS, "Created" if pods else "Pending")
