"""A TrainJob's conditions and pods in trainops' words, and how the failure classifier reads them (issue 44 item
3's status rules)."""

from __future__ import annotations

from typing import Any

from trainops.backends.failures import Verdict
from trainops.backends.kubernetes.status import standing
from trainops.backends.kubernetes.vocabulary import KUBERNETES
from trainops.backends.states import JobStatus
from trainops.backends.vocabulary import classify_result, vocabulary_of


def _job(*conditions: dict[str, str], deadline: int = 600) -> dict[str, Any]:
    return {"spec": {"activeDeadlineSeconds": deadline},
            "status": {"conditions": [{"status": "True", **condition} for condition in conditions]}}


def _pod(index: int, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"j-node-0-{index}-abcde",
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
            "status": {"phase": "Failed", **status}}


def _classified(job: dict[str, Any], pods: list[dict[str, Any]]) -> Verdict | None:
    """The verdict by the kubernetes engine's own rules (its vocabulary), as every front end takes them: the result
    names its backend."""
    found = standing(job, pods)
    return classify_result({"backend": "kubernetes", "status": found.status.value,
                            "secondary_status": found.secondary_status, "failure_reason": found.failure_reason,
                            **found.details})


def _verdict(job: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    verdict = _classified(job, pods)
    return verdict.failure_class if verdict else None


def _decided_by_the_engine(verdict: Verdict | None) -> bool:
    """Whether one of the engine's own rules (not a neutral one) decided the verdict."""
    return verdict is not None and any(rule.why == verdict.why for rule in KUBERNETES.rules)


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
    assert _decided_by_the_engine(_classified(job, []))


def test_an_evicted_preempted_or_lost_pod_is_infrastructure() -> None:
    failed = _job({"type": "Failed", "reason": "JobSetFailed"})
    evicted = _pod(1, reason="Evicted", message="The node was low on resource: memory.")
    preempted = _pod(1, conditions=[{"type": "DisruptionTarget", "status": "True",
                                     "reason": "PreemptionByScheduler"}])
    node_lost = _pod(0, conditions=[{"type": "DisruptionTarget", "status": "True",
                                     "reason": "DeletionByTaintManager"}])
    for pod, host in ((evicted, "algo-2"), (preempted, "algo-2"), (node_lost, "algo-1")):
        found = standing(failed, [_pod(0, phase="Running") if host == "algo-2" else _pod(1), pod])
        assert found.details["lost_host"].startswith(host)
        assert _verdict(failed, [pod]) == "infrastructure"
        assert _decided_by_the_engine(_classified(failed, [pod]))
    assert [standing(failed, [pod]).secondary_status for pod in (evicted, preempted, node_lost)] == [
        "Evicted", "Preempted", "NodeLost"]


def test_oom_killed_is_named_and_a_failed_rank_is_the_users() -> None:
    failed = _job({"type": "Failed", "reason": "JobSetFailed", "message": "rank 3 exited with code 1"})
    oom = _pod(1, containerStatuses=[{"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}])
    found = standing(failed, [_pod(0), oom])
    assert found.secondary_status == "OOMKilled" and "algo-2" in str(found.failure_reason)
    oom_verdict = _classified(failed, [_pod(0), oom])
    assert oom_verdict is not None and oom_verdict.failure_class == "user" and "OOMKilled" in oom_verdict.why
    plain = standing(failed, [_pod(0, containerStatuses=[{"state": {"terminated": {"reason": "Error"}}}])])
    assert plain.status is JobStatus.FAILED and plain.failure_reason == "rank 3 exited with code 1"
    assert _verdict(failed, [_pod(0)]) == "user"


def test_a_failed_rank_with_no_text_any_rule_reads_is_still_the_users_by_the_engines_rule() -> None:
    failed = _job({"type": "Failed", "reason": "JobSetFailed", "message": "the job set failed"})
    verdict = _classified(failed, [_pod(0)])
    assert verdict is not None and verdict.failure_class == "user" and _decided_by_the_engine(verdict)


def test_the_engine_declares_its_vocabulary_with_no_price() -> None:
    from trainops.backends.kubernetes.backend import KubernetesBackend

    words = vocabulary_of("kubernetes")
    assert words is KUBERNETES and vocabulary_of(KubernetesBackend) is KUBERNETES
    assert words.job_status("Suspended") is JobStatus.IN_PROGRESS and words.job_status("Complete") is \
        JobStatus.COMPLETED and words.job_status("Deleted") is JobStatus.STOPPED
    assert not words.priced and words.hourly_price("ml.p4d.24xlarge", "us-east-1") is None
    assert "kubernetes backend has no price list" in words.unpriced_reason()
