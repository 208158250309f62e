"""`ToyBackend`: each training job is a process of this machine (`trainops_toy.runner`) under ``<root>/jobs/<name>``,
with a state file, a log and a model directory, so its status, logs and stop are real.

It is written against `trainops.backends.kit` alone, as a backend of another package would be (a test scans its
imports): its options type, its context (``root``), its vocabulary (`trainops_toy.vocabulary`: its states, failure
rules and price), one look at a job, its stop and its log lines. It writes no wait
loop: `PolledBackend` gives the wait, the guards (wait bound, budget, stall), failed-look handling and ``logs
--follow``. It has no evaluation, registry or staging. trainops finds it through the ``trainops.backends`` entry
point and is not edited for it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trainops.backends.kit import (
    BackendOptions,
    JobHandle,
    JobResult,
    JobSpec,
    JobStatus,
    Log,
    Look,
    Observation,
    Placement,
    PolledBackend,
    Problem,
    SpecError,
    front_end_option_problems,
    trainops_home,
)
from trainops_toy.runner import write
from trainops_toy.vocabulary import NODE_LOST, TOY

#: A marker file under the root: the next create call starts its job, then loses its answer (once), as a worker that
#: dies right after the call would: the test of a retry that re-attaches.
LOSE_NEXT_ANSWER = "lose-next-create-answer"

#: A channel on a persistent volume claim: the toy's "cluster" mounts ``pvc://<namespace>/<claim>/<path>`` at
#: ``<root>/claims/<namespace>/<claim>/<path>``. The value reaches the toy as the text the user wrote: trainops above
#: the backend never reads it.
CLAIM = re.compile(r"\Apvc://(?P<namespace>[a-z0-9-]+)/(?P<claim>[a-z0-9-]+)(?:/(?P<path>[^\x00]*))?\Z")


@dataclass(frozen=True)
class ToyOptions(BackendOptions):
    """Options of a toy job: ``colour`` (handed to the job as TOY_COLOUR), ``priority`` (a whole number, kept);
    ``channel_overrides`` (channel -> ``pvc://namespace/claim/path`` or an absolute directory: a pipeline step's
    ``channels:``) and ``checkpoint_key`` (kept), which the front ends pass."""

    backend: ClassVar[str] = "toy"

    colour: str | None = None
    priority: int | None = None
    channel_overrides: Mapping[str, str] | None = None
    checkpoint_key: str | None = None

    def __post_init__(self) -> None:
        problems = front_end_option_problems(self.channel_overrides, self.checkpoint_key,
                                             directory="pvc://<namespace>/<claim>/<path> or an absolute directory")
        if self.priority is not None and (isinstance(self.priority, bool) or not isinstance(self.priority, int)):
            problems.append(Problem("priority", f"{self.priority!r} is not a whole number"))
        if problems:
            raise SpecError(problems)


class ToyBackend(PolledBackend[ToyOptions]):
    """Jobs as processes of this machine, under ``root`` (default ``$TRAINOPS_HOME/toy``)."""

    name = "toy"
    Options = ToyOptions
    vocabulary = TOY
    CONTEXT = frozenset({"root"})
    WAIT_GRACE_SECONDS = 60.0
    poll_seconds = 0.2

    def __init__(self, root: str | None = None):
        self.root = Path(root) if root else trainops_home() / "toy"

    # --- where jobs live ---------------------------------------------------------------------------------------
    def location(self) -> dict[str, str]:
        return {"root": str(self.root)}

    def where(self) -> str:
        return str(self.root / "jobs")

    def _job(self, handle_or_name: JobHandle | str) -> Path:
        if isinstance(handle_or_name, JobHandle):
            root = Path(handle_or_name.location.get("root") or self.root)
            return root / "jobs" / handle_or_name.job_name
        return self.root / "jobs" / handle_or_name

    def _record(self, handle: JobHandle | str) -> dict[str, Any]:
        path = self._job(handle) / "status.json"
        if not path.exists():
            raise SpecError(Problem("job_name", f"no toy job {path.parent.name!r} in {path.parent.parent}"))
        record: dict[str, Any] = json.loads(path.read_text())
        return record

    # --- training jobs -------------------------------------------------------------------------------------------
    def _channels(self, spec: JobSpec, options: ToyOptions) -> dict[str, str]:
        """Channel -> the directory the job reads it from: a claim's mount under the root, or an absolute directory
        as given. Any other value (``s3://``, a relative path) is refused, naming the channel."""
        given = {name: (f"channels.{name}", str(getattr(channel, "s3_data", channel)))
                 for name, channel in spec.channels.items()}
        given.update({name: (f"channel_overrides.{name}", value)
                      for name, value in (options.channel_overrides or {}).items()})
        channels, problems = {}, []
        for name, (field_name, value) in sorted(given.items()):
            claim = CLAIM.match(value)
            if claim and ".." not in Path(claim["path"] or "").parts:
                channels[name] = str(self.root / "claims" / claim["namespace"] / claim["claim"] / (claim["path"] or ""))
            elif not claim and Path(value).is_absolute():
                channels[name] = value
            else:
                problems.append(Problem(field_name, f"{value!r}: the toy engine reads a channel from "
                                                    "pvc://<namespace>/<claim>/<path> (no '..') or an absolute "
                                                    "directory"))
        if problems:
            raise SpecError(problems, "toy job")
        return channels

    def dry_run(self, spec: JobSpec, name: str, options: ToyOptions) -> dict[str, Any]:
        source = Path(spec.source_dir or ".")
        if not (source / spec.entry_point).is_file():
            raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {source}"), "toy job")
        return {"job_name": name, "entry_point": spec.entry_point, "source_dir": str(source.resolve()),
                "channels": self._channels(spec, options), "checkpoint_key": options.checkpoint_key,
                "environment": dict(spec.environment or {}), "colour": options.colour, "priority": options.priority,
                "max_run": spec.max_run, "instance_type": spec.instance_type,
                "instance_count": spec.host_count(), "hourly_usd": TOY.hourly_price(spec.instance_type, "")}

    def create(self, spec: JobSpec, name: str, options: ToyOptions, *, detached: bool, log: Log) -> JobHandle:
        job = self._job(name)
        job.mkdir(parents=True)
        (job / "job.json").write_text(json.dumps(self.dry_run(spec, name, options)))
        (job / "status.json").write_text(json.dumps({"status": "InProgress", "created": time.time()}))
        subprocess.Popen([sys.executable, "-m", "trainops_toy.runner", str(job)], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log(f"[toy] started job {name} in {job}")
        marker = self.root / LOSE_NEXT_ANSWER
        if marker.exists():
            marker.unlink()
            raise RuntimeError(f"toy: the answer to creating {name} was lost (the job runs)")
        return self.handle(name, created=True)

    def reattach(self, spec: JobSpec, placement: Placement, options: ToyOptions, log: Log) -> JobHandle:
        """Follow the job of that name; each re-attach is noted in the job's ``attached.log`` (tests wait on it)."""
        with open(self._job(placement.job_name) / "attached.log", "a") as noted:
            noted.write(f"{time.time()}\n")
        return super().reattach(spec, placement, options, log)

    def status_of(self, name: str) -> JobStatus | None:
        path = self._job(name) / "status.json"
        return TOY.job_status(json.loads(path.read_text())["status"]) if path.exists() else None

    def _lost(self, job: Path, record: dict[str, Any]) -> dict[str, Any]:
        """The record of a job whose runner (its node) went away while the job ran, without recording how it ended:
        the toy's control plane records ``NodeLost`` (read again from the file, so a runner that ended the job just
        now keeps its own record)."""
        pid = record.get("runner_pid")
        if record.get("status") != "InProgress" or not pid or _alive(int(pid)):
            return record
        again: dict[str, Any] = json.loads((job / "status.json").read_text())
        if again.get("status") != "InProgress":
            return again
        write(job, status=NODE_LOST, ended=time.time(),
              failure_reason=f"the toy job's node was lost: its runner (process {pid}) went away before the job "
                             "ended")
        lost: dict[str, Any] = json.loads((job / "status.json").read_text())
        return lost

    def look(self, handle: JobHandle) -> Look:
        job = self._job(handle)
        record = self._lost(job, self._record(handle))
        if (job / "attached.log").exists():  # each look after a re-attach is noted (tests wait on the trigger's)
            with open(job / "looks-after-attach.log", "a") as noted:
                noted.write(f"{time.time()}\n")
        settings = json.loads((job / "job.json").read_text())
        started, ended = record.get("started"), record.get("ended")
        result = JobResult("toy", handle.job_name, TOY.job_status(record.get("status")),
                           secondary_status=record.get("status"), failure_reason=record.get("failure_reason"),
                           model_artifact=record.get("model_artifact"),
                           duration_seconds=(ended - started) if started and ended else None,
                           reattached=not handle.created,
                           details={"colour": settings.get("colour"), "priority": settings.get("priority"),
                                    "runner_pid": record.get("runner_pid"), "exit_code": record.get("exit_code")})
        if not started:
            return Look(result)  # the runner has not started the script: nothing for the guards yet
        now = time.time()
        try:
            last_line: float | None = (job / "output.log").stat().st_mtime
        except OSError:
            last_line = None
        return Look(result, Observation(now=now, started=started, running_since=started,
                                        billable_seconds=max(0.0, (ended or now) - started),
                                        last_activity=last_line, max_run=settings.get("max_run")))

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        record = self._record(handle)
        if TOY.job_status(record.get("status")).terminal or not record.get("runner_pid"):
            return f"{handle.job_name}: {record.get('status')}"
        if reason != "Stopped by the user":  # a stop with a reason (a guard, a killed task): the runner records it
            (self._job(handle) / "stop-reason").write_text(reason)  # as the failure reason; a person's, the signal
        try:
            os.killpg(int(record["runner_pid"]), signal.SIGTERM)
        except ProcessLookupError:
            return f"{handle.job_name}: already ended"
        return f"{handle.job_name}: stopping ({reason})"

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        path = self._job(handle) / "output.log"
        offset = int(cursor.get("offset", 0))
        if not path.exists():
            return [], {"offset": offset}
        with open(path, "rb") as file:
            file.seek(offset)
            data = file.read()
        complete = data[: data.rfind(b"\n") + 1]
        lines = complete.decode(errors="replace").splitlines()[:limit]
        used = sum(len(line.encode()) + 1 for line in lines)
        return [f"[toy] {line}" for line in lines], {"offset": offset + used}

    def render_request(self, spec: JobSpec, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.dry_run(spec, job_name, self.options(options))


def _alive(pid: int) -> bool:
    """Whether the process runs: one that ended and was not yet reaped by its parent (a zombie) has ended."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
