"""How a local job ended (`LocalJobResult`, small and JSON-able: an XCom value, a KFP output) and how its failure reason
is worded: the host's last lines added when its failure file has none of its own (a failure before the training
script started begins with `trainops.backends.local.vocabulary.BEFORE_SCRIPT`, which the classifier's `setup` rule
matches)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from trainops.runtime.failure import TAIL_HEADING, TAIL_LINE_LENGTH

FAILURE_REASON_LIMIT = 1024  # SageMaker's FailureReason shows the first 1,024 characters of the failure file

#: The line before what trainops saw a failed host print last, when its failure file has no stderr tail of its own.
OUTPUT_TAIL_HEADING = "--- last lines of the host's output, as trainops saw them ---"


def with_output_tail(reason: str, lines: list[str]) -> str:
    """The failure reason with the last lines its host printed (`LogPump.recent_lines`), when the failure file has no
    stderr tail of its own: a full disk loses the rank's tail file, a launcher that fails before any rank writes
    none. The newest lines are kept within `FAILURE_REASON_LIMIT`, each cut at `TAIL_LINE_LENGTH`."""
    if TAIL_HEADING in reason:
        return reason
    kept = [line[:TAIL_LINE_LENGTH] for line in lines]
    while kept:
        text = "\n".join([reason.rstrip("\n"), OUTPUT_TAIL_HEADING, *kept])
        if len(text) <= FAILURE_REASON_LIMIT:
            return text
        kept.pop(0)
    return reason


@dataclass
class LocalJobResult:
    """How a local job ended: small and JSON-able (it becomes an XCom value and a KFP output)."""

    job_name: str
    status: str  # Completed | Failed | Stopped
    job_dir: str
    started: float
    ended: float
    secondary_status: str = ""
    failure_reason: str | None = None
    model_artifact: str | None = None
    output_artifact: str | None = None
    checkpoint_dir: str | None = None
    hosts: list[str] = field(default_factory=list)
    processes_per_host: int | None = None
    processes_left: int = 0  # hosts not yet ended after the clean-up (`_stop_all`): 0 unless a process would not die
    processes_stopped: int = 0  # still running in a host after its entrypoint ended, stopped by its launcher
    log_lines_lost: int = 0

    @property
    def duration_seconds(self) -> float:
        return round(self.ended - self.started, 3)

    @property
    def succeeded(self) -> bool:
        return self.status == "Completed"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["duration_seconds"] = self.duration_seconds
        return data
