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

The rules here are the neutral ones: trainops' own guards, a stop that was asked for, the runtime's failure file
(docs/contracts.md, section 4) and what any training workload prints (GPU faults, NCCL, Python tracebacks). They name
no engine. Each engine brings its own rules in its vocabulary (`trainops.backends.vocabulary.Vocabulary.rules`: the
engine's states and service errors), each in a `STAGES` stage; `rules_with` lays them into the neutral table, so an
engine's rule is tried where its kind of evidence belongs (a lost node with the hosts, a service's error after the
machine's). An engine without rules of its own is classified by the neutral ones alone: what no rule matches is
`unknown`.

Each backend fills one `FailureEvidence` (a typed record: every field is documented there) from what it knows;
`classify()` walks the rules and returns the first match with the line that decided it, so a user can check the
verdict.

Standard library only: the Airflow trigger and the KFP components import it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
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

    - `status`: the trainops status the job ended with (`trainops.backends.states.JobStatus`: Completed, Failed,
      Stopped).
    - `failure_text`: why the engine says the job failed (the runtime's failure file: its first line, `key: value`
      lines and the stderr tail; or the engine's own failure reason).
    - `reason`: the failure file's `reason:` key (error | killed | oom | timeout | stopped).
    - `exit_code`: the failure file's `exit_code:` key.
    - `secondary_statuses`: the engine's own states of the job, in the order they were seen (source
      ``secondary_status``: what an engine's rules match, e.g. a node-lost state).
    - `stop_requested`: a person or an orchestrator called stop.
    - `healthcheck`: a failing health check's summary.
    - `host_lost`: a host whose launcher ended without any failure record (the machine went away, not the script).
    - `guard`: the sentence of a trainops guard that stopped the job (`trainops.backends.guards`: budget, stalled,
      wait bound).

    A result dict (`JobResult.to_dict`) carries them under the keys of `RESULT_KEYS`."""

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


#: The stages of the table, in the order they are tried: trainops' guards and a stop that was asked for; the job's
#: time limits; a failure before the script started; the hosts (health check, a lost host or node); the machine
#: (disk, a killed launcher, capacity, a service's own errors); the network and GPUs; the request or its input; the
#: script. An engine's rules join the neutral ones of their stage, after them.
STAGES: tuple[str, ...] = ("guard", "limit", "before_script", "hosts", "machine", "transport", "request", "script")
#: The sources a rule may match (`FailureEvidence.sources`).
SOURCES: tuple[str, ...] = ("guard", "healthcheck", "stop_request", "host_lost", "secondary_status", "reason",
                            "failure_text", "exit_code", "status")


@dataclass(frozen=True)
class Rule:
    """A line of the table: when `pattern` matches the text of `source`, the attempt ended for `failure_class`.
    ``stage`` (one of `STAGES`) says where in the table the rule is tried."""

    failure_class: str
    source: str
    pattern: str
    why: str
    stage: str = "machine"

    def __post_init__(self) -> None:
        # An engine's rule is data its author writes: a typo would silently never match, so it is refused here.
        if self.failure_class not in CLASSES:
            raise ValueError(f"failure rule class {self.failure_class!r} is not one of {', '.join(CLASSES)}")
        if self.source not in SOURCES:
            raise ValueError(f"failure rule source {self.source!r} is not one of {', '.join(SOURCES)}")
        if self.stage not in STAGES:
            raise ValueError(f"failure rule stage {self.stage!r} is not one of {', '.join(STAGES)}")
        re.compile(self.pattern)

    @classmethod
    def on_states(cls, failure_class: str, states: str | tuple[str, ...], why: str, stage: str) -> Rule:
        """The rule an engine writes for its own job states: ``failure_class`` when the attempt went through one of
        ``states`` (each matched whole against the evidence's ``secondary_statuses``, escaped)."""
        names = (states,) if isinstance(states, str) else states
        choice = re.escape(names[0]) if len(names) == 1 else "(" + "|".join(map(re.escape, names)) + ")"
        return cls(failure_class, "secondary_status", f"^{choice}$", why, stage)


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

#: The neutral rules, in the order they are tried within their stage. Texts are real ones: NCCL / libfabric / CUDA
#: messages, Python's, the runtime's failure-file sentences.
RULES: tuple[Rule, ...] = (
    # trainops' own guards stopped the job (its stop is not a person's): the guard says why.
    Rule(BUDGET, "guard", r"^budget:", "trainops stopped the job at the run's max_cost_usd", "guard"),
    Rule(INFRASTRUCTURE, "guard", r"^stalled:", "trainops' stall watchdog stopped the hung job", "guard"),
    Rule(TIMEOUT, "guard", r"^wait bound:", "trainops stopped the job at its wait bound, counted from its own start",
         "guard"),
    # Asked for: whatever the job printed while it was being stopped is a consequence.
    Rule(STOPPED, "stop_request", r".+", "stop was requested by a person or an orchestrator", "guard"),
    # Limits: the runtime's own (its failure file).
    Rule(TIMEOUT, "reason", r"^timeout$", "the runtime stopped the job at its time limit", "limit"),
    Rule(TIMEOUT, "failure_text", _I + r"ran longer than (its|the) (limit|max_run)", "a time limit of the job",
         "limit"),
    # Before any training time: the machines.
    Rule(INFRASTRUCTURE, "healthcheck", r".+", "the GPU health check failed on a host", "hosts"),
    Rule(INFRASTRUCTURE, "host_lost", r".+", "a host's launcher ended without a failure record", "hosts"),
    Rule(USER, "failure_text", _I + r"(disk is full|No space left on device|ENOSPC)",
         "the job's disk is full: raise volume_size or write less (a retry fills it again)"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"^the launcher of host \S+ (was )?killed by signal \d+ without writing "
         r"a failure file", "a host's launcher was killed from outside (the host was lost)"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"^health check (failed on host|on host \S+ could not run)",
         "the GPU health check failed on a host before training"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(ThrottlingException|Rate exceeded|RequestLimitExceeded|"
         r"SlowDown|TooManyRequests)", "a cloud API (object storage, the service) throttled the job"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(instance (failure|was terminated|was lost|health)|"
         r"hardware (failure|error)|unhealthy (instance|host|node)|host was lost|spot interruption)",
         "an instance failed"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(uncorrectable ECC|ECC error|Xid[ :]+\d+|GPU has fallen off the bus|"
         r"cudaErrorDevicesUnavailable|busy or unavailable|CUDA error: unknown error|NVLink (error|failure)|"
         r"nvidia-smi has failed|no CUDA-capable device is detected)", "a GPU fault", "transport"),
    Rule(INFRASTRUCTURE, "failure_text", _I + r"(NCCL (error|WARN).*(unhandled system error|remote process exited|"
         r"Connection (closed|reset|refused)|socket|NET/|timeout)|NET/OFI|libfabric|fi_[a-z_]+\(|"
         r"efa(\s|_)(error|device)|EFA (error|device)|ncclSystemError|ncclRemoteError|"
         r"Connection reset by peer.*(nccl|gloo|c10d)|"
         r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timeout|Timeout))",
         "a network transport error between hosts (NCCL / EFA)", "transport"),
    # The request itself, or the script.
    Rule(USER, "failure_text", _I + r"(AccessDenied|NoSuchBucket|NoSuchKey|invalid job input)",
         "the request or its input is invalid", "request"),
    Rule(USER, "failure_text", _I + r"(CUDA out of memory|OutOfMemoryError)", "the script ran out of GPU memory",
         "script"),
    Rule(USER, "reason", r"^oom$", "a rank was killed by SIGKILL, likely out of memory: use a larger instance "
         "or a smaller batch", "script"),
    Rule(USER, "failure_text", _I + r"(Traceback \(most recent call last\)|^\w*(Error|Exception)\b|"
         r"exited with code [1-9]\d*)", "the training script failed", "script"),
    Rule(USER, "failure_text", _I + r"killed by (SIGSEGV|SIGABRT|SIGFPE|SIGILL|SIGBUS)\b",
         "the process crashed itself (a fault in the script or a library it loads)", "script"),
    Rule(USER, "reason", r"^error$", "the training script failed", "script"),
    Rule(STOPPED, "status", r"^Stopped$", "the job was stopped", "script"),
    Rule(STOPPED, "reason", r"^stopped$", "the job was stopped by a signal", "script"),
    Rule(INFRASTRUCTURE, "reason", r"^killed$", "a process was killed by a signal nobody in the job sent", "script"),
    Rule(USER, "exit_code", r".+", "the training script exited non-zero", "script"),
)


def rules_with(engine_rules: Iterable[Rule] = ()) -> tuple[Rule, ...]:
    """The table an engine's attempts are classified by: stage by stage, the neutral rules, then the engine's."""
    own = tuple(engine_rules)
    return tuple(rule for stage in STAGES for rule in (*RULES, *own) if rule.stage == stage)


#: How the sentence of a trainops guard begins (`trainops.backends.guards`): the stop reason a record keeps.
GUARD_REASON = re.compile(r"^(budget|stalled|wait bound): ")

#: The result dict's keys (`JobResult.to_dict`) `classify_result` reads, and what each holds: the evidence a backend
#: records, declared here rather than left to each backend's ``details``.
RESULT_KEYS: dict[str, str] = {
    "status": "the trainops status the job ended with (FailureEvidence.status)",
    "failure_reason": "the engine's or the runtime's failure text (FailureEvidence.failure_text; its reason: and "
                      "exit_code: keys are read from it)",
    "secondary_statuses": "the engine's states of the job, in order (FailureEvidence.secondary_statuses)",
    "secondary_status": "the engine's last state, where no list was kept",
    "stop_requested": "true when a person or an orchestrator asked the job to stop",
    "host_lost": "a host whose launcher ended without a failure record",
    "healthcheck_failure": "a failing health check's summary",
    "guard": "the trainops guard that stopped the job: {kind, message}",
    "backend": "the backend that ran the job: whose vocabulary's rules classify it (absent: the default backend's)",
}


@functools.lru_cache(maxsize=32)
def _compiled(rules: tuple[Rule, ...]) -> tuple[tuple[Rule, re.Pattern[str]], ...]:
    return tuple((rule, re.compile(rule.pattern, re.MULTILINE)) for rule in rules)


#: The message line of a training toolkit's failure file, which names the error class alone on its first line
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


def classify(evidence: FailureEvidence, rules: Sequence[Rule] | None = None) -> Verdict | None:
    """The verdict for an ended attempt; None when it completed. Nothing matched: `unknown`. ``rules``: the engine's
    table (`rules_with`, or its vocabulary's `failure_rules`); None: the neutral rules alone."""
    if evidence.status == "Completed":
        return None
    sources = evidence.sources()
    for rule, pattern in _compiled(tuple(RULES if rules is None else rules)):
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


def status_walk(history: Iterable[Any]) -> list[str]:
    """The engine's states of a job summary's history (``[{"status": ...}, ...]``, as `JobSummary` holds them), in
    order: what the classifier reads as ``secondary_statuses``."""
    return [str(item.get("status")) for item in history or () if isinstance(item, Mapping) and item.get("status")]


def evidence_from_result(result: Mapping[str, Any], *, stop_requested: bool = False) -> FailureEvidence:
    """The evidence of a train step's result dict (its keys: `RESULT_KEYS`)."""
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
        # A stopped job's record keeps the reason it was stopped for (a status record read back by
        # `trainops status`): trainops' guards word theirs so.
        guard_text = text
    return FailureEvidence(**{**asdict(base), "secondary_statuses": transitions,
                              "healthcheck": str(result.get("healthcheck_failure") or ""), "guard": guard_text})


def classify_result(result: Mapping[str, Any], *, stop_requested: bool = False,
                    rules: Sequence[Rule] | None = None) -> Verdict | None:
    """The verdict for a train step's result dict by ``rules`` (None: the neutral ones alone). A front end calls
    `trainops.backends.vocabulary.classify_result`, which takes the rules of the result's backend."""
    return classify(evidence_from_result(result, stop_requested=stop_requested), rules)
