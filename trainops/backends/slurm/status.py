"""Where a Slurm job stands, from Slurm's look and the job's records: one status record, as `trainops status` shows
it and the seam's results carry it.

Slurm's state decides while Slurm remembers the job (`trainops.backends.slurm.vocabulary.slurm_status`); the records
decide once it has forgotten it (no slurmdbd: ``MinJobAge`` after the end): the end Slurm gave it, recorded by the
first look that saw it (``final`` in ``slurm-job.json``), else the job's own ``ended.json`` (how its step ended, or how
Slurm ended it: scancel, the time limit, a lost node), else trainops' stop request.
A look that cannot reach Slurm raises `SlurmUnreachable` (nothing is recorded then): the job is not failed by it.
"""

from __future__ import annotations

import getpass
import os
import time
from pathlib import Path
from typing import Any

from trainops.backends.slurm import records
from trainops.backends.slurm.script import COMMENT_PREFIX
from trainops.backends.slurm.transport import SlurmJob, Transport
from trainops.backends.slurm.vocabulary import slurm_status
from trainops.backends.states import JobStatus

#: How long a record may wait for the Slurm job id its submission was to get before the submission counts as lost.
SUBMIT_SECONDS = 300.0
#: The record's keys a status record shows as they are.
SHOWN = ("slurm_job_id", "nodes", "instance_type", "instance_count", "checkpoint_dir", "output_dir", "hosts",
         "submitted", "transport", "user", "max_run")


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _why(job: SlurmJob, record: dict[str, Any], stop: dict[str, Any] | None,
         ended: dict[str, Any] | None) -> str | None:
    """The failure reason of an ended job, in the words of the one who ended it."""
    state = job.state
    if state == "COMPLETED":
        return None
    if state == "CANCELLED":
        return str(stop["reason"]) if stop else f"CANCELLED: job {job.job_id} was cancelled outside trainops (scancel)"
    if state in ("TIMEOUT", "DEADLINE"):
        return (f"{state}: the job ran longer than its time limit (max_run {record.get('max_run')} s, sbatch "
                "--time); Slurm stopped it")
    if state in ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED"):
        seen = f"; the job said: {str(ended['failure_reason']).splitlines()[0]}" if ended and ended.get(
            "failure_reason") else ""
        return f"{state}: Slurm ended job {job.job_id} ({job.reason or 'no reason given'}) on nodes {job.nodes}{seen}"
    if ended and ended.get("failure_reason"):
        return str(ended["failure_reason"])
    if state == "OUT_OF_MEMORY":
        return f"OUT_OF_MEMORY: a process of job {job.job_id} ran out of memory on nodes {job.nodes}"
    code = job.exit_code
    how = "" if code is None else (f" (killed by signal {code & 0x7F})" if code & 0x7F else f" (exit code {code >> 8})")
    return f"{state}: the batch script of job {job.job_id} ended{how} before it could say why: see its batch log"


def _from_slurm(job: SlurmJob, record: dict[str, Any], stop: dict[str, Any] | None,
                ended: dict[str, Any] | None) -> dict[str, Any]:
    status = slurm_status(job.state)
    view: dict[str, Any] = {"status": status.value, "secondary_status": job.state, "slurm_state": job.state,
                            "slurm_reason": job.reason, "nodes": job.nodes, "started": job.started,
                            "ended": job.ended}
    if status.terminal:
        view["failure_reason"] = _why(job, record, stop, ended)
        if status is JobStatus.COMPLETED and ended:
            view["model_artifact"] = ended.get("model_artifact")
            view["output_artifact"] = ended.get("output_artifact")
    return view


def _forgotten(name: str, record: dict[str, Any], stop: dict[str, Any] | None,
               ended: dict[str, Any] | None) -> dict[str, Any]:
    """A job Slurm no longer knows that no look saw end: the job's own end record (the state Slurm ended it in, when
    Slurm ended it: the batch shell's trap wrote it), else the stop request."""
    if ended and ended.get("slurm_state"):
        when = ended.get("ended")
        job = SlurmJob(job_id=int(record.get("slurm_job_id") or 0), name=name, user=str(record.get("user") or ""),
                       state=str(ended["slurm_state"]), reason=str(ended.get("slurm_line") or ""),
                       nodes=str(ended.get("nodes") or ""), ended=float(when) if when else None)
        return _from_slurm(job, record, stop, None)
    if ended:
        return {"status": ended.get("status", "Failed"), "secondary_status": ended.get("status"),
                "failure_reason": ended.get("failure_reason"), "model_artifact": ended.get("model_artifact"),
                "output_artifact": ended.get("output_artifact"), "ended": ended.get("ended")}
    if stop:
        return {"status": "Stopped", "secondary_status": "CANCELLED", "failure_reason": stop.get("reason")}
    return {"status": "Failed", "secondary_status": "UNKNOWN",
            "failure_reason": f"Slurm no longer knows job {record.get('slurm_job_id')} and the job left no end record: "
                              "it ended (cancelled, timed out or lost a node) more than the cluster's MinJobAge "
                              "before trainops looked"}


def _adopt(job_dir: Path, record: dict[str, Any], transport: Transport) -> SlurmJob | None:
    """The Slurm job of a submission whose id was never recorded (trainops stopped between sbatch and the record):
    looked up by the user and the job's name, then picked by the submission's token in its comment."""
    mark = f"{COMMENT_PREFIX}{record.get('token')}"
    name = str(record.get("job_name") or job_dir.name)
    found = [job for job in transport.named(str(record.get("user") or ""), name) if job.comment == mark]
    if found:
        records.update(job_dir, records.JOB, slurm_job_id=found[0].job_id)
        return found[0]
    return None


def owns(job: SlurmJob, record: dict[str, Any], name: str) -> bool:
    """Whether the Slurm job ``job`` is the submission ``record`` made: its user, its name and the submission's token
    in its comment. An id alone proves nothing: a controller that lost its state gives ids again, to anyone's job."""
    token = record.get("token")
    return (bool(token) and job.user == record.get("user") and job.name == name
            and job.comment == f"{COMMENT_PREFIX}{token}")


def read(job_dir: Path, name: str, transport: Transport) -> dict[str, Any] | None:
    """The job's status record, or None when there is no trainops job of that name; raises `SlurmUnreachable`
    when Slurm must be asked and does not answer."""
    record = records.read(job_dir, records.JOB)
    if record is None:
        return None
    view: dict[str, Any]
    if record.get("final"):
        view = dict(record["final"])
        stop = records.read(job_dir, records.STOP)
    else:
        job: SlurmJob | None = None
        if record.get("slurm_job_id") is not None:
            job = transport.job(int(record["slurm_job_id"]))
            if job is not None and not owns(job, record, name):
                job = None  # an id reused after a controller's state was wiped: not this job
        else:
            job = _adopt(job_dir, record, transport)
        # The job's own records are read after the look, never before: the batch host writes ended.json and trainops
        # stop writes its request before Slurm can report the end, so a look that saw the end finds them. Read before
        # the look, a job ending between the two reads was recorded final without its model or the stop's reason.
        stop, ended = records.read(job_dir, records.STOP), records.read(job_dir, records.ENDED)
        if job is not None:
            view = _from_slurm(job, record, stop, ended)
        elif record.get("slurm_job_id") is None:
            lost = time.time() - float(record.get("submitted") or 0) > SUBMIT_SECONDS
            view = ({"status": "Failed", "secondary_status": "UNKNOWN", "failure_reason": "the submission never "
                     "reached Slurm (no job carries its comment)"} if lost
                    else {"status": "InProgress", "secondary_status": "Submitting"})
        else:
            view = _forgotten(name, record, stop, ended)
        if JobStatus.parse(view["status"]).terminal:
            view["started"] = view.get("started") or record.get("started")
            records.update(job_dir, records.JOB, final=view)
    return _assemble(name, job_dir, record, view, stop)


def _assemble(name: str, job_dir: Path, record: dict[str, Any], view: dict[str, Any],
              stop: dict[str, Any] | None) -> dict[str, Any]:
    started, ended = view.get("started"), view.get("ended")
    if started and not ended and not JobStatus.parse(view["status"]).terminal:
        elapsed: float | None = time.time() - float(started)
    else:
        elapsed = float(ended) - float(started) if started and ended else None
    result = {"job_name": name, "backend": "slurm", **{key: record.get(key) for key in SHOWN}, **view,
              "job_dir": str(job_dir), "duration_seconds": round(elapsed, 3) if elapsed is not None else None,
              "billable_seconds": int(elapsed) if elapsed is not None else None,
              "stop_requested": bool(stop),
              "batch_log": str(job_dir / "logs" / f"batch-{record.get('slurm_job_id')}.log")}
    return result
