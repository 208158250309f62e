"""How trainops reaches a Slurm cluster: what a transport does, the job as Slurm describes it, and the two errors.

A job is described by `SlurmJob`: from the ``jobs`` entries of Slurm's OpenAPI v0.0.38 (slurmrestd's answers on
Slurm 22.05, `SlurmJob.from_openapi`) or from the fields ``squeue`` prints (`trainops.backends.slurm.cli`).
trainops looks up its own jobs only, by id (`Transport.job`) and by user and name (`Transport.named`, then the
submission token in the comment): other users' jobs are never parsed for a decision, and a field Slurm prints is
never assumed clean (a job name may hold any bytes, of any user's choosing).
A look that cannot reach the controller raises `SlurmUnreachable`, a `trainops.backends.looks.LookFailed`: a failed
look, never a failed job (every wait looks again, under the seam's one policy); a job Slurm does not know (any more)
is None, not an error.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from trainops.backends.looks import LookFailed


class SlurmUnreachable(LookFailed):
    """A look at the cluster failed (the controller or slurmrestd did not answer, or answered with an error that
    says nothing of the job): the job may well be running. Not a failed job."""


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm describes it (times in seconds since the epoch; None: not known or not yet)."""

    job_id: int
    name: str
    user: str
    state: str
    reason: str = ""
    nodes: str = ""
    comment: str = ""
    submitted: float | None = None
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    batch_host: str = ""

    @classmethod
    def from_openapi(cls, data: dict[str, Any]) -> SlurmJob:
        """A ``jobs`` entry of the v0.0.38 API (slurmrestd, ``squeue --json``)."""

        def when(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, (int, float)) and value > 0 else None

        state = str(data.get("job_state") or "")
        code = data.get("exit_code")
        job_id = data.get("job_id")
        if isinstance(job_id, bool) or not isinstance(job_id, int):
            raise ValueError(f"a job without a job id: {job_id!r}")
        return cls(job_id=job_id, name=str(data.get("name") or ""),
                   user=str(data.get("user_name") or ""), state=(state.split() or [""])[0],
                   reason=str(data.get("state_reason") or ""), nodes=str(data.get("nodes") or ""),
                   comment=str(data.get("comment") or ""), submitted=when("submit_time"),
                   started=when("start_time"), ended=when("end_time") if state not in RUNNING_STATES else None,
                   exit_code=code if isinstance(code, int) else None, batch_host=str(data.get("batch_host") or ""))


#: States in which a job's ``end_time`` is only its projected end.
RUNNING_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                  "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED")


class Transport(abc.ABC):
    """The four things trainops asks of a cluster."""

    #: How messages name the way the cluster is reached.
    label = ""

    @abc.abstractmethod
    def submit(self, script: str, script_path: str, job: dict[str, Any]) -> int:
        """Submit the batch script (its text, and where it lies on the shared directory) with the job's properties
        (the v0.0.38 API's names; the CLI reads the script's ``#SBATCH`` lines instead); return the job id."""

    @abc.abstractmethod
    def jobs(self) -> list[SlurmJob]:
        """The jobs the transport lists (the real transports look jobs up by id and name instead: `job`, `named`)."""

    def job(self, job_id: int) -> SlurmJob | None:
        """The job of that id, or None when Slurm does not know it (any more). The job may be another user's (an id
        given again after the controller lost its state): the caller compares its user, name and comment."""
        return next((job for job in self.jobs() if job.job_id == job_id), None)

    def named(self, user: str, name: str) -> list[SlurmJob]:
        """The jobs of ``user`` named ``name`` that Slurm remembers (for a submission whose id was never recorded:
        the caller picks the one whose comment carries its token)."""
        return [job for job in self.jobs() if job.user == user and job.name == name]

    @abc.abstractmethod
    def cancel(self, job_id: int) -> None:
        """Cancel the job (Slurm sends SIGTERM to every process of it, then SIGKILL after KillWait); a job that has
        ended already is not an error."""

    def version(self) -> str:
        """The cluster's Slurm release, where the transport can tell."""
        return ""
