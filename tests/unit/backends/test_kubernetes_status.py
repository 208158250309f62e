"""A TrainJob's conditions and pods in trainops' words, and how the failure classifier reads them (issue 44 item
3's status rules)."""

from __future__ import annotations

from typing import Any

from trainops.backends.failures import classify_result
from trainops.backends.kubernetes.status import standing
from trainops.backends.states import JobStatus


def _job(*conditions: dict[str, str], deadline: int = 600) -> dict[str, Any]:
    return {"spec": {"activeDeadlineSeconds": deadline},
            "status": {"conditions": [{"status": "True", **condition} for condition in conditions]}}


def _pod(index: int, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"j-node-0-{index}-abcde",
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": "Failed", **status}}


def _verdict(job: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    found = standing(job, pods)
    verdict = classify_result({"status": found.status.value, "secondary_status": found.secondary_status,
                               "failure_reason": found.failure_reason, **found.details})
    return verdict.failure_class if verdict else None


def test_complete_is_completed() -> None:
    assert standing(_job({"type": "Complete"})).status is JobStatus.COMPLETED


def test_no_condition_yet_is_in_progress() -> None:
    assert standing({"status": {}}).status is JobStatus.IN_PROGRESS


def test_kueues_suspension_is_waiting_not_failure() -> None:
    found = standing(_job({"type": "Suspended", "reason": "Suspended"}))
    assert found.status is JobStatus.IN_PROGRESS and found.secondary_status == "Suspended"
    assert "waiting" in found.details["waiting"]


def test_the_deadline_is_a_timeout() -> None:
    job = _job({"type": "Failed", "reason": "DeadlineExceeded"}, deadline=600)
    assert standing(job).status is JobStatus.FAILED
    assert "600 s" in str(standing(job).failure_reason)
    assert _verdict(job, []) == "timeout"


def test_an_evicted_preempted_or_lost_pod_is_infrastructure() -> None:
    failed = _job({"type": "Failed", "reason": "JobSetFailed"})
    evicted = _pod(1, reason="Evicted", message="The node was low on resource: memory.")
    preempted = _pod(1, conditions=[{"type": "DisruptionTarget", "status": "True",
                                     "reason": "PreemptionByScheduler"}])
    node_lost = _pod(0, conditions=[{"type": "DisruptionTarget", "status": "True",
                                     "reason": "DeletionByTaintManager"}])
    for pod, host in ((evicted, "algo-2"), (preempted, "algo-2"), (node_lost, "algo-1")):
        found = standing(failed, [_pod(0, phase="Running") if host == "algo-2" else _pod(1), pod])
        assert found.details["host_lost"].startswith(host)
        assert _verdict(failed, [pod]) == "infrastructure"


def test_oom_killed_is_named_and_a_failed_rank_is_the_users() -> None:
    failed = _job({"type": "Failed", "reason": "JobSetFailed", "message": "rank 3 exited with code 1"})
    oom = _pod(1, containerStatuses=[{"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}])
    found = standing(failed, [_pod(0), oom])
    assert found.secondary_status == "OOMKilled" and "algo-2" in str(found.failure_reason)
    plain = standing(failed, [_pod(0, containerStatuses=[{"state": {"terminated": {"reason": "Error"}}}])])
    assert plain.status is JobStatus.FAILED and plain.failure_reason == "rank 3 exited with code 1"
    assert _verdict(failed, [_pod(0)]) == "user"
