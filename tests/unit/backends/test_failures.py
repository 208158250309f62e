"""The failure classifier against real failure texts: SageMaker FailureReasons and secondary statuses, NCCL / EFA /
CUDA errors, Python tracebacks, OOM kills, and the runtime's own failure files."""

from __future__ import annotations

import pytest

from trainops.backends.failures import (
    CLASSES,
    INFRASTRUCTURE,
    RULES,
    STOPPED,
    TIMEOUT,
    UNKNOWN,
    USER,
    FailureEvidence,
    RetryBudgets,
    Rule,
    Verdict,
    classify,
    evidence_from_failure_file,
)
from trainops.backends.sagemaker.vocabulary import SAGEMAKER, evidence_from_description
from trainops.backends.slurm.vocabulary import SLURM
from trainops.backends.vocabulary import classify_result

SAGEMAKER_REASONS = [
    ("CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML instance "
     "type.", INFRASTRUCTURE),
    ("InternalServerError: We encountered an internal error.  Please try again.", INFRASTRUCTURE),
    ("ThrottlingException: Rate exceeded", INFRASTRUCTURE),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"torch.distributed.DistBackendError: NCCL "
     "error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with "
     "NCCL_DEBUG=INFO for details), NCCL version 2.19.3\"\nCommand \"torchrun --nnodes 2 train.py\", exit code: 1",
     INFRASTRUCTURE),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"NCCL WARN NET/OFI Request error: "
     "fi_cq_readerr failed\"", INFRASTRUCTURE),
    ("AlgorithmError: RuntimeError: CUDA error: uncorrectable ECC error encountered", INFRASTRUCTURE),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"ValueError: learning_rate must be "
     "positive\"\nCommand \"/opt/conda/bin/python3.10 train.py --epochs 3\", exit code: 1", USER),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"torch.cuda.OutOfMemoryError: CUDA out of "
     "memory. Tried to allocate 2.00 GiB\"", USER),
    ("ClientError: Data download failed:Could not download s3://bucket/train/part-0: insufficient disk space. "
     "Please increase the volume size", USER),
    ("ResourceLimitExceeded: The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 "
     "Instances", USER),
]


@pytest.mark.parametrize("text, expected", SAGEMAKER_REASONS)
def test_sagemaker_failure_reasons(text, expected):
    verdict = SAGEMAKER.classify_failure(evidence_from_description({"TrainingJobStatus": "Failed",
                                                                    "FailureReason": text}))
    assert verdict.failure_class == expected, verdict
    assert verdict.evidence and verdict.evidence in text  # the deciding line is quoted from the text itself


def test_secondary_statuses_decide_limits_and_spot():
    timeout = evidence_from_description({
        "TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded",
        "SecondaryStatusTransitions": [{"Status": "Starting"}, {"Status": "Training"},
                                       {"Status": "MaxRuntimeExceeded"}]})
    assert SAGEMAKER.classify_failure(timeout).failure_class == TIMEOUT
    spot = evidence_from_description({
        "TrainingJobStatus": "Failed", "FailureReason": "",
        "SecondaryStatusTransitions": [{"Status": "Training"}, {"Status": "Interrupted"}, {"Status": "Failed"}]})
    verdict = SAGEMAKER.classify_failure(spot)
    assert verdict.failure_class == INFRASTRUCTURE and verdict.source == "secondary_status"
    assert verdict.evidence == "Interrupted"
    plain_stop = evidence_from_description({"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"})
    assert SAGEMAKER.classify_failure(plain_stop).failure_class == STOPPED


def test_a_requested_stop_wins_over_what_the_ranks_printed():
    text = "rank 0 on host algo-1 exited with code 1: RuntimeError: NCCL error: remote process exited\nreason: error"
    assert classify(evidence_from_failure_file(text, stop_requested=True)).failure_class == STOPPED
    assert classify(evidence_from_failure_file(text)).failure_class == INFRASTRUCTURE


RUNTIME_FAILURE_FILES = [
    ("rank 1 on host algo-2 exited with code 1: ValueError: boom\nhost: algo-2\nrank: 1\nexit_code: 1\nsignal:\n"
     "reason: error\n--- last lines of stderr ---\nTraceback (most recent call last):\nValueError: boom", USER),
    ("rank 0 on host algo-1 was killed by SIGKILL (exit code 137), likely out of memory\nhost: algo-1\nrank: 0\n"
     "exit_code: 137\nsignal: SIGKILL\nreason: oom", USER),
    ("rank 0 on host algo-1 was killed by SIGSEGV (exit code 139)\nexit_code: 139\nsignal: SIGSEGV\nreason: killed",
     USER),
    ("rank 3 on host algo-2 was killed by SIGHUP (exit code 129)\nexit_code: 129\nsignal: SIGHUP\nreason: killed",
     INFRASTRUCTURE),
    ("the job ran longer than its limit of 8 s and was stopped on host algo-1\nreason: timeout", TIMEOUT),
    ("the job was stopped by SIGTERM on host algo-1\nrank:\nreason: stopped", STOPPED),
    ("health check failed on host algo-2: GPU 3 (NVIDIA H100 80GB HBM3) bf16 matmul 97.1 TFLOP/s is 0.10 of the "
     "989 TFLOP/s expected (threshold 0.5)\nhost: algo-2\nexit_code: 1\nreason: error", INFRASTRUCTURE),
    ("the launcher of host algo-2 killed by signal 9 without writing a failure file", INFRASTRUCTURE),
    ("the launcher of host algo-1 killed by signal 9 without writing a failure file; the job's disk is full "
     "(12 KiB free)", USER),
    ("rank 0 on host algo-1 exited with code 1: OSError: [Errno 28] No space left on device\nreason: error", USER),
    ("invalid job input on host algo-1: resourceconfig.json: hosts is empty\nexit_code: 2\nreason: error", USER),
    ("rank 0 on host algo-1 exited with code 1: RuntimeError: [c10d] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=9, OpType=ALLREDUCE)\nreason: error", INFRASTRUCTURE),
]


@pytest.mark.parametrize("text, expected", RUNTIME_FAILURE_FILES)
def test_runtime_failure_files(text, expected):
    assert classify(evidence_from_failure_file(text)).failure_class == expected


def test_health_check_and_lost_host_are_infrastructure_before_any_script_text():
    verdict = classify(FailureEvidence(status="Failed", healthcheck="algo-2 GPU 3: matmul 12 TFLOP/s < 400",
                                       failure_text="rank 0 exited with code 1"))
    assert verdict.failure_class == INFRASTRUCTURE and "algo-2 GPU 3" in verdict.evidence
    lost = classify(FailureEvidence(status="Failed", host_lost="algo-2", exit_code=1))
    assert lost.failure_class == INFRASTRUCTURE and "algo-2" in lost.evidence


def test_completed_has_no_verdict_and_nothing_known_is_unknown():
    assert classify(FailureEvidence(status="Completed", failure_text="ValueError")) is None
    verdict = classify(FailureEvidence(status="Failed", failure_text="something odd happened"))
    assert verdict.failure_class == UNKNOWN and verdict.evidence == "something odd happened"


def test_classify_result_reads_a_step_result():
    result = {"backend": "sagemaker", "status": "Failed", "failure_reason": "CapacityError: Unable to provision",
              "secondary_status": "Starting"}
    assert classify_result(result).failure_class == INFRASTRUCTURE
    assert classify_result({"status": "Completed"}) is None


def test_every_rule_names_a_known_class_and_source():
    sources = set(FailureEvidence().sources())
    for rule in (*RULES, *SAGEMAKER.failure_rules, *SLURM.failure_rules):
        assert rule.failure_class in CLASSES and rule.source in sources, rule


def test_a_rule_on_an_engines_states_matches_each_state_whole_and_only_those():
    lost = Rule.on_states(INFRASTRUCTURE, ("NODE_FAIL", "BOOT.FAIL"), "a node was lost", "hosts")
    assert (lost.failure_class, lost.source, lost.stage) == (INFRASTRUCTURE, "secondary_status", "hosts")
    assert lost.pattern == r"^(NODE_FAIL|BOOT\.FAIL)$"  # a state's own characters are literal
    assert Rule.on_states(TIMEOUT, "TIMEOUT", "the limit", "limit").pattern == "^TIMEOUT$"

    def verdict(*states: str) -> Verdict | None:
        return classify(FailureEvidence(status="Failed", secondary_statuses=states), (lost,))

    assert verdict("RUNNING", "BOOT.FAIL").failure_class == INFRASTRUCTURE
    assert verdict("NODE_FAIL").failure_class == INFRASTRUCTURE
    assert verdict("BOOTXFAIL").failure_class == UNKNOWN  # the dot is not a wildcard
    assert verdict("NODE_FAILED").failure_class == UNKNOWN  # matched whole, not as a prefix
    with pytest.raises(ValueError, match="not one of"):
        Rule.on_states("lost", "NODE_FAIL", "a typo in the class", "hosts")


def test_retry_budgets_parse_spend_and_refuse():
    budgets = RetryBudgets.parse("infrastructure=2,user=0,backoff_seconds=1")
    infra = Verdict(INFRASTRUCTURE, "failure_text", "CapacityError", "")
    user = Verdict(USER, "failure_text", "ValueError", "")
    assert budgets.allows(infra) and not budgets.allows(user)
    assert budgets.spend(infra) == 1.0 and budgets.spend(infra) == 2.0
    assert not budgets.allows(infra)
    assert not budgets.allows(Verdict(STOPPED))
    with pytest.raises(ValueError, match="retries: unknown key"):
        RetryBudgets.parse({"infra": 3})
    with pytest.raises(ValueError, match=r"retries\.user: expected a number"):
        RetryBudgets.parse({"user": "many"})
    with pytest.raises(ValueError, match="between 0 and 20"):
        RetryBudgets.parse({"infrastructure": -1})


def test_docs_failures_md_is_generated_from_the_rules():
    from pathlib import Path

    from trainops.backends.failure_docs import rules_markdown

    path = Path(__file__).resolve().parents[3] / "docs" / "failures.md"
    assert path.read_text(encoding="utf-8") == rules_markdown(), "docs/failures.md is stale: regenerate it (see " \
        "rules_markdown's docstring)"


def test_the_toolkits_error_head_alone_is_not_the_evidence_its_message_line_is():
    # AWS's toolkit writes the error class alone on the first line; `status` showed only "ExecuteUserScriptError:"
    # (issue 47). The evidence is the message line, quoted from the text as every evidence is.
    text = ("ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"ModuleNotFoundError: No module named 'trainops'\n"
            " Traceback (most recent call last)\n\"\nCommand \"torchrun --nnodes 2 train.py\", exit code: 1")
    verdict = classify(evidence_from_failure_file(text))
    assert verdict.failure_class == USER
    assert verdict.evidence == "ErrorMessage \"ModuleNotFoundError: No module named 'trainops'"
    assert verdict.evidence in text
