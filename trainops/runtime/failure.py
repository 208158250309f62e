"""The root cause of a failed launch, and the failure file that reports it (docs/contracts.md, section 4).

The launcher gathers two kinds of evidence: the records each rank's wrapper wrote (an exception or a non-zero exit,
with the exact time), and what a launcher observed of ranks that could not write anything (killed by a signal):
torchrun's agent, mpirun's report, or the launcher's own child. :func:`root_cause` picks one: a rank killed by a
signal other than the teardown signals (SIGTERM, SIGINT) is taken first, since the others' errors are usually its
consequences (a peer's broken connection); otherwise the earliest recorded failure; otherwise the earliest observed
one. The failure file is written once (first writer wins), so a script or launcher that reported first keeps its
text. The values of ``TRAINOPS_MASK_VARIABLES`` (see :mod:`trainops.runtime.output_relay`) are masked in it: a rank
that fails with its token in the exception message does not put the token in the failure file (which SageMaker
shows to anyone who can describe the job).

Standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from trainops.runtime.output_relay import mask
from trainops.runtime.processes import signal_name
from trainops.runtime.records import read_tail, write_atomically
from trainops.runtime.untrusted import read_text

#: How many lines of the failing rank's stderr the failure file keeps, and how long each may be.
TAIL_LINES = 30
TAIL_LINE_LENGTH = 400
#: The line before the stderr tail in a failure file.
TAIL_HEADING = "--- last lines of stderr ---"
#: The most of a failure file trainops reads back: what `render_failure` writes fits many times over (the first line,
#: eight fields, `TAIL_LINES` of `TAIL_LINE_LENGTH`); a script may write its own, of any size, or a sparse one.
READ_LIMIT_BYTES = 64 * 1024

_TEARDOWN_SIGNALS = {int(signal.SIGTERM), int(signal.SIGINT)}


@dataclass(frozen=True)
class Failure:
    """One failed rank (or the whole job, for ``stopped`` / ``timeout``), as reported in the failure file."""

    reason: str  # error | killed | oom | timeout | stopped
    host: str = ""
    rank: int | None = None
    local_rank: int | None = None
    exit_code: int | None = None
    signal: str = ""
    time: float = 0.0
    exception: str = ""
    summary: str = ""  # overrides the generated first line
    stderr_tail: list[str] = field(default_factory=list)
    source: str = ""  # record | torchrun | mpirun | launcher

    def first_line(self) -> str:
        """The root cause in one sentence."""
        if self.summary:
            return self.summary
        who = f"rank {self.rank} on host {self.host}" if self.rank is not None else f"the process on host {self.host}"
        if self.reason == "oom":
            return f"{who} was killed by {self.signal or 'SIGKILL'} (exit code {self.exit_code}), likely out of memory"
        if self.reason == "killed":
            return f"{who} was killed by {self.signal} (exit code {self.exit_code})"
        sentence = f"{who} exited with code {self.exit_code}"
        return f"{sentence}: {self.exception}" if self.exception else sentence


def classify_exit(exit_code: int) -> tuple[str, int, str]:
    """``(reason, exit_code, signal_name)`` for an exit status: negative numbers are signals as ``subprocess``
    reports them, 128+N is signal N as a shell or container reports it; SIGKILL (137) is reported as ``oom``."""
    number = None
    if exit_code < 0:
        number = -exit_code
    elif 128 < exit_code < 128 + 65:
        number = exit_code - 128
    if number is None:
        return "error", exit_code, ""
    name = signal_name(number)
    reason = "oom" if number == int(signal.SIGKILL) else "killed"
    return reason, 128 + number, name


def failure_from_record(record: dict[str, Any]) -> Failure:
    """A failure from a rank's own record of a non-zero end."""
    code = int(record.get("exit_code") or 1)
    reason = "error"
    name = ""
    if record.get("reason") == "interrupted":
        reason, code, name = classify_exit(code)
    return Failure(reason=reason, host=str(record.get("host", "")), rank=int(record["rank"]),
                   local_rank=record.get("local_rank"), exit_code=code, signal=name,
                   time=float(record.get("ended_at") or 0.0), exception=str(record.get("exception") or ""),
                   source="record")


def failure_from_observation(observed: dict[str, Any], host: str, source: str) -> Failure:
    """A failure from what a launcher saw: ``{"rank", "local_rank", "exit_code", "timestamp"}``."""
    reason, code, name = classify_exit(int(observed.get("exit_code") or 1))
    rank = observed.get("rank")
    return Failure(reason=reason, host=str(observed.get("host") or host), rank=None if rank is None else int(rank),
                   local_rank=observed.get("local_rank"), exit_code=code, signal=name,
                   time=float(observed.get("timestamp") or time.time()), source=source)


def root_cause(rank_records: Iterable[dict[str, Any]], observed: Iterable[Failure]) -> Failure | None:
    """The one failure to report, from the ranks' records and the launchers' observations (see the module text)."""
    rank_records = list(rank_records)
    recorded = [failure_from_record(r) for r in rank_records
                if r.get("state") == "exited" and int(r.get("exit_code") or 0) != 0]
    ended_by_record = {failure.rank for failure in recorded}
    unrecorded = [failure for failure in observed if failure.rank not in ended_by_record]

    def signal_number(failure: Failure) -> int | None:
        return failure.exit_code - 128 if failure.signal and failure.exit_code else None

    external = [failure for failure in unrecorded if failure.reason in ("killed", "oom")
                and signal_number(failure) not in _TEARDOWN_SIGNALS]
    for group in (external, recorded, unrecorded):
        if group:
            return min(group, key=lambda failure: (failure.time, failure.rank if failure.rank is not None else -1))
    return None


def with_tail(failure: Failure, record_dirs: Iterable[str], rank_records: Iterable[dict[str, Any]]) -> Failure:
    """The failure with the last lines of its rank's stderr, read from the rank's tail file."""
    if failure.rank is None:
        return failure
    directories = [r["record_dir"] for r in rank_records if r.get("rank") == failure.rank and r.get("record_dir")]
    directories += list(record_dirs)
    for directory in directories:
        lines = read_tail(directory, failure.rank, TAIL_LINES)
        if lines:
            return replace(failure, stderr_tail=lines)
    return failure


def render_failure(failure: Failure) -> str:
    """The failure file's text: the root cause in one sentence, ``key: value`` lines, then the stderr tail."""
    moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(failure.time)) if failure.time else ""
    lines = [
        failure.first_line(),
        f"host: {failure.host}",
        f"rank: {'' if failure.rank is None else failure.rank}",
        f"local_rank: {'' if failure.local_rank is None else failure.local_rank}",
        f"exit_code: {'' if failure.exit_code is None else failure.exit_code}",
        f"signal: {failure.signal}",
        f"reason: {failure.reason}",
        f"time: {moment}",
    ]
    if failure.stderr_tail:
        lines.append(TAIL_HEADING)
        lines += [line[:TAIL_LINE_LENGTH] for line in failure.stderr_tail]
    return mask("\n".join(lines) + "\n")


def write_once(path: str, text: str) -> bool:
    """Create ``path`` with ``text`` unless it exists (``O_CREAT | O_EXCL``: the first writer wins). True when this
    call wrote it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(mask(text))  # also text relayed from another host's launcher
    except OSError:
        # A full disk: no empty or cut failure file (a reader would take it for the whole story); the caller
        # still logs and returns the text.
        try:
            os.unlink(path)
        except OSError:
            pass
    return True


def write_success(path: str) -> None:
    """Create the empty ``output/success`` file, by rename (`records.write_atomically`): the ranks can write the
    output directory, and a FIFO or a link they left under the name is replaced, never blocked on or written through."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_atomically(path, b"", 0o644)


def parse_failure(text: str) -> dict[str, Any]:
    """Read a failure file back: ``{"summary": first line, "host": ..., "rank": ..., ..., "stderr": [lines]}`` (the
    values as written, strings). For callers that show or compare failures (the local backend, tests)."""
    lines = text.splitlines()
    result: dict[str, Any] = {"summary": lines[0] if lines else "", "stderr": []}
    in_tail = False
    for line in lines[1:]:
        if in_tail:
            result["stderr"].append(line)
        elif line.startswith(TAIL_HEADING.rstrip(" -")):
            in_tail = True
        elif ":" in line:
            key, _, value = line.partition(":")
            result.setdefault(key.strip(), value.strip())
    return result


def read_failure_text(path: str) -> str:
    """The first `READ_LIMIT_BYTES` of a failure file (`trainops.runtime.untrusted`: a regular file, never a link or a
    FIFO); raises OSError when there is none such."""
    return read_text(path, READ_LIMIT_BYTES)


def read_failure(path: str) -> dict[str, Any] | None:
    """:func:`parse_failure` of a failure file, or None when there is none."""
    try:
        return parse_failure(read_failure_text(path))
    except OSError:
        return None
