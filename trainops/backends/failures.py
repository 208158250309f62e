"""Why a training attempt ended: one classifier for every backend, as a table of rules (data, not code paths).

A failed attempt is `user` (the script or its input: retrying reproduces it), `setup` (it failed before its script
started: a missing package, a channel it cannot read, a limit of the machine), `infrastructure` (capacity, a lost or
faulty instance, a failed GPU health check, EFA/NCCL transport errors, spot interruption, throttling, or a job
trainops' stall watchdog stopped: reason `stalled`; a fresh attempt from the last checkpoint is the cure), `timeout`
(max_run / max_wait, or the wait bound trainops stopped the job at), `stopped` (a person or an orchestrator asked),
`budget` (trainops stopped the job at the run's max_cost_usd) or `unknown`. The retry budgets of the train step
spend one budget per class, so the order of the rules matters: trainops' own guards come first (their stop is not a
person's), transport and hardware errors before the generic "the script exited non-zero" rule, because an NCCL error
is reported by the user's script too (its rank is the one that notices the lost peer).

Each backend fills one `FailureEvidence` from what it knows (the runtime's failure file, the local supervisor,
SageMaker's FailureReason and SecondaryStatusTransitions, the health check); `classify()` walks `RULES` and returns the
first match with the line that decided it, so a user can check the verdict.

Standard library only: the Airflow trigger and the KFP components import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from trainops.spec.retries import (  # noqa: F401 - the classes and budgets, re-exported
    BUDGET,
    CLASSES,
    INFRASTRUCTURE,
    SETUP,
    STOPPED,
    TIMEOUT,
    UNKNOWN,
    USER,
    RetryBudgets,
)

#: How many characters of the deciding line the verdict keeps (it is shown in `trainops status` and XComs).
EVIDENCE_LIMIT = 300


@dataclass(frozen=True)
class FailureEvidence:
    """What a backend knows about how an attempt ended. Every field is optional; the more, the surer the verdict.

    `failure_text` is SageMaker's FailureReason or the local failure file (its first line, `key: value` lines and the
    stderr tail); `reason` is the failure file's `reason:` key (error | killed | oom | timeout | stopped);
    `secondary_statuses` are the secondary statuses in the order they were seen; `stop_requested` says a person or an
    orchestrator called stop; `healthcheck` is a failing health check's summary; `host_lost` names a host whose
    launcher ended without any failure record (the instance went away, not the script); `guard` is the sentence of
    a trainops guard that stopped the job (`trainops.backends.guards`: budget, stalled, wait bound)."""

    status: str = ""
    failure_text: str = ""
    reason: str = ""
    exit_code: int | None = None
    secondary_statuses: tuple[str, ...] = ()
    stop_requested: bool = False
    healthcheck: str = ""
    host_lost: str = ""
    guard: str = ""

    def sources(self) -> dict[str, str]:
        """The text each rule source matches against."""
        return {
            "guard": self.guard,
            "healthcheck": self.healthcheck,
            "stop_request": "stop requested" if self.stop_requested else "",
            "host_lost": f"host {self.host_lost} was lost" if self.host_lost else "",
            "secondary_status": "\n".join(self.secondary_statuses),
            "reason": self.reason,
            "failure_text": self.failure_text,
            "exit_code": "" if self.exit_code in (None, 0) else str(self.exit_code),
            "status": self.status,
        }


@dataclass(frozen=True)
class Rule:
    """A line of the table: when `pattern` matches the text of `source`, the attempt ended for `failure_class`."""

    failure_class: str
    source: str
    pattern: str
    why: str


@dataclass(frozen=True)
class Verdict:
    """The class of an ended attempt and the evidence that decided it (the rule and the matched line)."""

    failure_class: str
    source: str = ""
    evidence: str = ""
    why: str = ""
    reason: str = ""  # a trainops guard's kind (stalled, budget, wait_bound) when one stopped the job

    @property
    def retryable(self) -> bool:
        """Whether a fresh attempt can be expected to do better (only infrastructure failures)."""
        return self.failure_class == INFRASTRUCTURE

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (job results, XCom, `trainops status`)."""
        return asdict(self)

    def describe(self) -> str:
        """One line: the class, then what decided it."""
        if not self.evidence:
            return self.failure_class
        return f"{self.failure_class} ({self.why}; {self.source}: {self.evidence})"


_I = "(?i)"
#: How the failure reason of a job that failed before its training script started begins (the local backend writes it
#: so: `trainops.backends.local.job_result`); the rule of class `setup` matches it. No regex metacharacters in it.
BEFORE_SCRIPT = "before the training script started: "

#: The rules, in the order they are tried. Sources: see `FailureEvidence.sources`. Texts are real ones: SageMaker's
#: FailureReason prefixes (ClientError, AlgorithmError, CapacityError, InternalServerError), NCCL / libfabric / CUDA
#: messages, the runtime's failure-file sentences.
RULES: tuple[Rule, ...] = (
    # trainops' own guards stopped the job (its stop is not a person's): the guard says why.
    Rule(BUDGET, "guard", r"^budget:", "trainops stopped the job at the run's max_cost_usd"),
    Rule(INFRASTRUCTURE, "guard", r"^stalled:", "trainops' stall watchdog stopped the hung job"),
    Rule(TIMEOUT, "guard", r"^wait bound:", "trainops stopped the job at its wait bound, counted from its own start"),
    # Asked for: whatever the job printed while it was being stopped is a consequence.
    Rule(STOPPED, "stop_request", r".+", "stop was requested by a person or an orchestrator"),
    # Limits.
    Rule(TIMEOUT, "secondary_status", r"^(MaxRuntimeExceeded|MaxWaitTimeExceeded)$", "a time limit of the job"),
    Rule(TIMEOUT, "reason", r"^timeout$", "the runtime stopped the job at its time limit"),
    Rule(TIMEOUT, "secondary_status", r"^(TIMEOUT|DEADLINE)$", "Slurm stopped the job at its time limit (sbatch "
         "--time, from max_run)"),
    Rule(STOPPED, "secondary_status", r"^CANCELLED$", "the Slurm job was cancelled (scancel)"),
    Rule(TIMEOUT, "failure_text", _I + r"(MaxRuntimeExceeded|MaxWaitTimeExceeded|ran longer than (its|the) "
         r"(limit|max_run|MaxRuntimeInSeconds))", "a time limit of the job"),
    # Before the script: what the job needs of this machine (the local backend says so: `BEFORE_SCRIPT`).
    Rule(SETUP, "failure_text", r"\A" + BEFORE_SCRIPT, "the job failed before its training "
         "script started (a package it needs, a channel it cannot read, a limit of the machine): fix what it names"),
    # Before any training time: the machines.
    Rule(INFRASTRUCTURE, "healthcheck", r".+", "the GPU health check failed on a host"),
    Rule(INFRASTRUCTURE, "host_lost", r".+", "a host's launcher ended without a failure record"),
    Rule(INFRASTRUCTURE, "secondary_status", r"^(NODE_FAIL|BOOT_FAIL|PREEMPTED)$", "Slurm lost a node of the job "
         "(it stopped answering), could not boot one, or preempted the job"),
    Rule(USER, "secondary_status", r"^OUT_OF_MEMORY$", "a process of the Slurm job ran out of memory: ask for "
         "larger nodes or use less"),
    Rule(USER, "failure_text", _I + r"(disk is full|No space left on device|ENOSPC)",
         "the job's disk is full: raise volume_size or write less (a retry fills it again)"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"^the launcher of host \S+ (was )?killed by signal \d+ without writing "
         r"a failure file", "a host's launcher was killed from outside (the host was lost)"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"^health check (failed on host|on host \S+ could not run)",
         "the GPU health check failed on a host before training"),
    Rule(INFRASTRUCTURE, "secondary_status", r"^Interrupted$", "spot capacity was reclaimed"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(CapacityError|InsufficientInstanceCapacity|insufficient capacity|"
         r"not enough capacity|capacity is not available)", "no capacity for the instance type"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(InternalServerError|internal (server )?error|InternalFailure|"
         r"ServiceUnavailable|service is unavailable)", "an error inside the service"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(ThrottlingException|Rate exceeded|RequestLimitExceeded|"
         r"SlowDown|TooManyRequests)", "an AWS API throttled the job"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(instance (failure|was terminated|was lost|health)|"
         r"hardware (failure|error)|unhealthy (instance|host|node)|host was lost|spot interruption)",
         "an instance failed"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(uncorrectable ECC|ECC error|Xid[ :]+\d+|GPU has fallen off the bus|"
         r"cudaErrorDevicesUnavailable|busy or unavailable|CUDA error: unknown error|NVLink (error|failure)|"
         r"nvidia-smi has failed|no CUDA-capable device is detected)", "a GPU fault"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(NCCL (error|WARN).*(unhandled system error|remote process exited|"
         r"Connection (closed|reset|refused)|socket|NET/|timeout)|NET/OFI|libfabric|fi_[a-z_]+\(|"
         r"efa(\s|_)(error|device)|EFA (error|device)|ncclSystemError|ncclRemoteError|"
         r"Connection reset by peer.*(nccl|gloo|c10d)|"
         r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timeout|Timeout))",
         "a network transport error between hosts (NCCL / EFA)"),
    # The request itself, or the script.
    Rule(USER, "failure_text", _I + r"(ResourceLimitExceeded|ValidationException|AccessDenied|"
         r"ClientError|NoSuchBucket|NoSuchKey|invalid job input)", "the request or its input is invalid"),
    Rule(USER, "failure_text", _I + r"(CUDA out of memory|OutOfMemoryError)", "the script ran out of GPU memory"),
    Rule(USER, "reason", r"^oom$", "a rank was killed by SIGKILL, likely out of memory: use a larger instance "
         "or a smaller batch"),
    Rule(USER, "failure_text", _I + r"(AlgorithmError|ExecuteUserScriptError|Traceback \(most recent call last\)|"
         r"^\w*(Error|Exception)\b|exited with code [1-9]\d*)", "the training script failed"),
    Rule(USER, "failure_text", _I + r"killed by (SIGSEGV|SIGABRT|SIGFPE|SIGILL|SIGBUS)\b",
         "the process crashed itself (a fault in the script or a library it loads)"),
    Rule(USER, "reason", r"^error$", "the training script failed"),
    Rule(STOPPED, "status", r"^Stopped$", "the job was stopped"),
    Rule(STOPPED, "reason", r"^stopped$", "the job was stopped by a signal"),
    Rule(INFRASTRUCTURE, "reason", r"^killed$", "a process was killed by a signal nobody in the job sent"),
    Rule(USER, "exit_code", r".+", "the training script exited non-zero"),
)

#: How the sentence of a trainops guard begins (`trainops.backends.guards`): the stop reason a record keeps.
GUARD_REASON = re.compile(r"^(budget|stalled|wait bound): ")

_COMPILED = tuple((rule, re.compile(rule.pattern, re.MULTILINE)) for rule in RULES)


#: The message line of AWS toolkit's failure file, which names the error class alone on its first line
#: (``ExecuteUserScriptError:``, then ``ExitCode 1``, then ``ErrorMessage "ModuleNotFoundError: ...``).
_TOOLKIT_MESSAGE = re.compile(r'^ErrorMessage "?(?P<message>.*)$', re.MULTILINE)


def _matched_line(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start:] if end < 0 else text[start:end]
    if line.strip().endswith(":") and end >= 0:  # a head without its message: the toolkit's message line says why
        message = _TOOLKIT_MESSAGE.search(text, end)
        if message and message.group("message").strip():
            line = message.group(0)
    return line.strip()[:EVIDENCE_LIMIT]


def classify(evidence: FailureEvidence) -> Verdict | None:
    """The verdict for an ended attempt; None when it completed. Nothing matched: `unknown`."""
    if evidence.status == "Completed":
        return None
    sources = evidence.sources()
    for rule, pattern in _COMPILED:
        text = sources.get(rule.source, "")
        if not text:
            continue
        match = pattern.search(text)
        if match:
            reason = text.split(":", 1)[0].replace(" ", "_") if rule.source == "guard" else ""
            return Verdict(rule.failure_class, rule.source, _matched_line(text, match), rule.why, reason)
    return Verdict(UNKNOWN, "", (evidence.failure_text or evidence.status)[:EVIDENCE_LIMIT], "no rule matched")


def _failure_keys(text: str) -> dict[str, str]:
    keys: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        if line.startswith("---"):
            break
        name, sep, value = line.partition(":")
        if sep and name.strip().isidentifier():
            keys[name.strip()] = value.strip()
    return keys


def evidence_from_failure_file(text: str, *, status: str = "Failed", stop_requested: bool = False,
                               host_lost: str = "") -> FailureEvidence:
    """Evidence from the runtime's failure file (docs/contracts.md, section 4): its sentence, keys and stderr tail."""
    keys = _failure_keys(text)
    try:
        exit_code = int(keys.get("exit_code", "")) if keys.get("exit_code") else None
    except ValueError:
        exit_code = None
    return FailureEvidence(status=status, failure_text=text, reason=keys.get("reason", ""), exit_code=exit_code,
                           stop_requested=stop_requested, host_lost=host_lost)


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


def status_walk(history: Iterable[Any]) -> list[str]:
    """The secondary statuses of a job summary's history (``[{"status": ...}, ...]``, as `JobSummary` holds
    SageMaker's SecondaryStatusTransitions), in order: what the classifier reads as ``secondary_statuses``."""
    return [str(item.get("status")) for item in history or () if isinstance(item, Mapping) and item.get("status")]


def classify_result(result: Mapping[str, Any], *, stop_requested: bool = False) -> Verdict | None:
    """The verdict for a train step's result dict (either backend): status, failure_reason, secondary status,
    health check and lost host where the backend recorded them."""
    transitions = tuple(str(item) for item in result.get("secondary_statuses") or ())
    if not transitions and result.get("secondary_status"):
        transitions = (str(result["secondary_status"]),)
    text = str(result.get("failure_reason") or "")
    base = evidence_from_failure_file(text, status=str(result.get("status") or ""),
                                      stop_requested=stop_requested or bool(result.get("stop_requested")),
                                      host_lost=str(result.get("host_lost") or ""))
    guard = result.get("guard")
    guard_text = str(guard.get("message") or "") if isinstance(guard, Mapping) else ""
    if not guard_text and base.status == "Stopped" and GUARD_REASON.match(text):
        # A stopped job's record keeps the reason it was stopped for (a local status record read back by
        # `trainops status`): trainops' guards word theirs so.
        guard_text = text
    evidence = FailureEvidence(**{**asdict(base), "secondary_statuses": transitions,
                                  "healthcheck": str(result.get("healthcheck_failure") or ""),
                                  "guard": guard_text})
    return classify(evidence)


def rules_markdown() -> str:
    """docs/failures.md: the classes and the rule table, generated from `RULES` (a test keeps the file current:
    `python -c "from trainops.backends.failures import rules_markdown; print(rules_markdown(), end='')" >
    docs/failures.md`)."""
    lines = [
        "# Why an attempt ended: the failure classes",
        "",
        "Generated from `trainops/backends/failures.py` (`rules_markdown()`); a unit test fails when it is stale.",
        "",
        "Every ended training attempt gets one class, and the evidence that decided it (the rule and the line it "
        "matched). The train step's retry budgets (`retries:` on a pipeline's train step, `trainops run --retries`, "
        "`retry_budgets` of the Airflow operator, the KFP train component's `retries_json`) spend one budget per "
        "class; `stopped` and `budget` are never retried.",
        "",
        "trainops' own guards stop a job and say so (`trainops.backends.guards`; spec fields in docs/spec.md): "
        "`max_cost_usd` (with `budget: stop`, the job is stopped when its billable cost so far reaches what is left "
        "of the run's budget: SageMaker's billable time, or locally the wall time, x instances x the catalog "
        "price), the wait bound (`max_run` + `max_wait` + `wait_grace_seconds`, counted from the job's own start, "
        "so a re-attached wait gets no fresh bound; `stop_at_wait_bound: false` only stops waiting), and the stall "
        "watchdog (`stall_timeout`: no new log line and no metric for that long while the script runs; off by "
        "default, recommended for multi-node GPU jobs, where an NCCL hang or EFA falling back to TCP prints "
        "nothing and fails nothing; on SageMaker it reads the CloudWatch log streams' last event and ingestion "
        "times and the metrics' timestamps, locally the growth of the hosts' log files).",
        "",
        "Every wait applies the guards through the same per-poll check (`guards.act` on the backend's watch, "
        "`Backend.watch`): the train step's wait, the Airflow worker's poll and each reschedule poke, and the "
        "trigger of a deferred train task, which gets them as JSON in its arguments, so a restarted triggerer "
        "applies the same ones and the bound still counts from the job's start (a local stall's quiet time is "
        "counted again from the restart). The task resumed from the trigger fails with the guard's class: "
        "`budget` and `timeout` without Airflow's retries, a stall as an `infrastructure` failure. Why trainops "
        "stopped a job outlives the stop: on SageMaker, which keeps no stop reason, the guard tags the job "
        "(`trainops:stopped-by`, `trainops:stop-reason`) before StopTrainingJob and describe reads the tags back; "
        "a local job's record keeps the guard's sentence as its failure reason. So a later `trainops status` says "
        "budget, stalled or wait bound, not a bare Stopped.",
        "",
        "A status look that fails (a timeout, a 5xx, throttling, a refused connection) is not an ended attempt and "
        "gets no class: the wait looks again, and gives up only after 5 failed looks in a row and 60 s since the "
        "first (`trainops.backends.looks`), saying the job may still be running; no retry starts from it.",
        "",
        "| class | meaning | what a retry does |",
        "| --- | --- | --- |",
        "| `user` | the script or its input (an exception, a non-zero exit, an invalid request) | fails the same way: "
        "not retried by default |",
        "| `setup` | the job failed before its training script started: a package trainops needs for it is missing "
        "(with the `pip install` that adds it), a channel cannot be read, a limit of the machine (the per-user "
        "process limit), the output location cannot be written | meets the same: never retried (no budget); fix "
        "what it names |",
        "| `infrastructure` | capacity, a lost or faulty instance, a failed GPU health check, EFA/NCCL transport "
        "errors, spot interruption, throttling; reason `stalled`: no log line and no metric for `stall_timeout` "
        "seconds, so trainops' watchdog stopped the hung job | a fresh attempt `<name>-N` resumes from the shared "
        "checkpoints |",
        "| `timeout` | `max_run` / `max_wait` reached, or the wait bound (`max_run` + `max_wait` + "
        "`wait_grace_seconds` from the job's own start) passed and trainops stopped the job | would be stopped "
        "again: not retried by default |",
        "| `stopped` | a person or an orchestrator asked | never retried |",
        "| `budget` | the run's `max_cost_usd` was reached and trainops stopped the job (`budget: stop`) | never "
        "retried: no retry starts that cannot fit in what is left |",
        "| `unknown` | no rule matched | not retried by default |",
        "",
        "Rules, tried in this order (the first match decides). Sources: `guard` (a trainops guard stopped the job: "
        "`trainops.backends.guards`), `stop_request` (stop was asked), "
        "`secondary_status` (SageMaker's SecondaryStatusTransitions, a Slurm job's state), `reason` (the failure "
        "file's `reason:`), "
        "`failure_text` (SageMaker's FailureReason or the local failure file), `healthcheck`, `host_lost`, "
        "`exit_code`, `status`.",
        "",
        "| # | class | source | pattern | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for number, rule in enumerate(RULES, start=1):
        pattern = rule.pattern.replace("(?i)", "").replace("|", "\\|")
        lines.append(f"| {number} | `{rule.failure_class}` | `{rule.source}` | `{pattern}` | {rule.why} |")
    return "\n".join(lines) + "\n"
