"""`SlurmBackend`: the `trainops.backends.api.Backend` seam over a Slurm cluster (the modules of this package).

`submit` is the seam's template: the dry run (`layout.check_spec`, the request and the batch script), the re-attach
policy (`place_job`, over `status_of`: the job's record under the shared directory, then Slurm), then `create`: the
job's files laid out (`layout`), its record written, the script submitted (`sbatch`, or slurmrestd), the Slurm job
id recorded. Everything after reads the records and asks Slurm (`status`), through the transport the cluster
settings name (`cli`, `rest`). Those settings are the backend's context (`get_backend("slurm", options={"shared_dir":
...})`, `SlurmCluster`), and every handle carries them, so a handle alone finds its job again.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.api import JobHandle, Log
from trainops.backends.cluster_steps import HereSteps
from trainops.backends.guards import JobGuards
from trainops.backends.hostfs.host_logs import read_new_lines
from trainops.backends.hostfs.locks import try_lock
from trainops.backends.hostfs.paths import own_directory
from trainops.backends.looks import Looks
from trainops.backends.options import BackendOptions
from trainops.backends.polled import Look, PolledBackend, Watch
from trainops.backends.request.render import masked
from trainops.backends.slurm import layout, records, status
from trainops.backends.slurm.cli import CommandTransport
from trainops.backends.slurm.following import SlurmWatch, look_of
from trainops.backends.slurm.layout import check_spec, job_directory, render
from trainops.backends.slurm.options import CLUSTER_SETTINGS, SlurmCluster, SlurmOptions
from trainops.backends.slurm.rest import RestTransport
from trainops.backends.slurm.script import batch_script, rest_job, time_limit
from trainops.backends.slurm.status import current_user, owns
from trainops.backends.slurm.transport import SlurmUnreachable, Transport
from trainops.backends.slurm.vocabulary import SLURM
from trainops.backends.states import JobStatus
from trainops.errors import Problem, SpecError

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

logger = logging.getLogger(__name__)

#: The batch step's environment through slurmrestd, which requires one (the submitting process's means nothing on
#: the cluster): a PATH where the batch script finds srun (/opt/slurm/bin on HyperPod, else the system's).
REST_ENVIRONMENT = {"PATH": "/opt/slurm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
DEFAULT_POLL_SECONDS = 2.0


def checked_poll_seconds(value: Any) -> float:
    """``poll_seconds`` as a number of seconds a wait can sleep: finite, above zero, at most an hour; else a
    `SpecError` naming it, before anything is submitted (nan, inf or -1 used to submit the job, then crash the
    wait)."""
    import math

    seconds = value
    if isinstance(value, str):
        try:
            seconds = float(value)
        except ValueError:
            seconds = None
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds)
            or not 0 < seconds <= 3600):
        raise SpecError(Problem("poll_seconds", f"{value!r} is not a number of seconds between 0 and 3600 (how often "
                                                f"a wait asks Slurm; default {DEFAULT_POLL_SECONDS:g})"),
                        "slurm backend settings")
    return float(seconds)


class SlurmBackend(HereSteps, PolledBackend[SlurmOptions]):
    """Training jobs as Slurm batch jobs.

    A pipeline's other steps run where trainops runs (the login node, the Airflow worker, the KFP pod), as the local
    backend runs them, over the shared directory: staging copies data into the shared file system (the FSx mount),
    an evaluation reads the model there, and the model registry is a directory (default ``<shared_dir>/registry``).

    Args:
        shared_dir, transport, rest_url, rest_user, rest_token_file: where the cluster is and how it is reached
            (`SlurmCluster`).
        poll_seconds: how often a wait asks Slurm (default 2 s).
        client_factory: boto3 client factory for s3:// channels and staging sources.
        registry_dir: the model registry's directory (default ``<shared_dir>/registry``).
    """

    name = "slurm"
    vocabulary = SLURM
    Options = SlurmOptions
    CONTEXT = frozenset({*CLUSTER_SETTINGS, "poll_seconds", "client_factory", "registry_dir"})
    # An evaluation runs where trainops runs: no job to start and follow (not `started`), the task runs it.

    def __init__(self, shared_dir: str | None = None, transport: str | None = None, rest_url: str | None = None,
                 rest_user: str | None = None, rest_token_file: str | None = None,
                 poll_seconds: float | None = None, client_factory: Callable[[str], Any] | None = None,
                 registry_dir: str | None = None):
        self.cluster = SlurmCluster(shared_dir=shared_dir, transport=transport, rest_url=rest_url,
                                     rest_user=rest_user, rest_token_file=rest_token_file)
        self.poll_seconds = DEFAULT_POLL_SECONDS if poll_seconds is None else checked_poll_seconds(poll_seconds)
        self.client_factory = client_factory
        self.registry_dir = registry_dir

    @property
    def label(self) -> str:
        return "Slurm"

    # --- where the cluster is ---------------------------------------------------------------------------------
    def _with(self, cluster: Mapping[str, Any]) -> SlurmBackend:
        """This backend with other cluster settings laid over its own (a job's options, a handle's location)."""
        settings = {**self.cluster.given(), **{key: value for key, value in cluster.items()
                                                  if key in CLUSTER_SETTINGS and value is not None}}
        return SlurmBackend(**settings, poll_seconds=self.poll_seconds, client_factory=self.client_factory,
                            registry_dir=self.registry_dir)

    def location(self) -> dict[str, str]:
        return {key: str(value) for key, value in self.cluster.given().items()}

    def where(self) -> str:
        return f"the Slurm jobs of {self.cluster.shared_dir or 'no shared_dir'}"

    def _of(self, handle: JobHandle) -> SlurmBackend:
        return self._with(handle.location) if handle.location else self

    def _shared_dir(self) -> str:
        if not self.cluster.shared_dir:
            raise SpecError(Problem("shared_dir", "the slurm backend needs the directory its jobs live in, which "
                                                  "every node sees: -o shared_dir=PATH (a named backend or the "
                                                  "handle gives it too)"))
        return os.path.expanduser(self.cluster.shared_dir)

    def _job_dir(self, name: str, create: bool = False) -> Path:
        return job_directory(self._shared_dir(), name, create=create)

    def transport(self) -> Transport:
        if (self.cluster.transport or "cli") == "rest":
            if not self.cluster.rest_url:
                raise SpecError(Problem("rest_url", "transport rest needs slurmrestd's address: -o "
                                                    "rest_url=http://HOST:PORT"))

            return RestTransport(self.cluster.rest_url, self.cluster.rest_user or current_user(),
                                 self.cluster.rest_token_file)

        return CommandTransport(user=current_user())

    def _user(self) -> str:
        return (self.cluster.rest_user if self.cluster.transport == "rest" else None) or current_user()

    # --- submitting -------------------------------------------------------------------------------------------
    def status_of(self, name: str) -> JobStatus | None:
        """The job's status (the re-attach policy's look): a look that cannot reach Slurm is looked at again under
        the seam's policy, never taken for "no such job" (that would submit the job twice)."""
        job_dir, transport = self._job_dir(name), self.transport()
        record = Looks(f"Slurm job {name}", poll_seconds=self.poll_seconds).look(
            lambda: status.read(job_dir, name, transport))
        return None if record is None else JobStatus.parse(record["status"])

    def dry_run(self, spec: JobSpec, name: str, options: SlurmOptions) -> dict[str, Any]:
        """The request, the batch script and (transport rest) the job's properties, nothing written; every problem
        of the spec on Slurm at once."""
        check_spec(spec, options, self.cluster.shared_dir)
        if self.cluster.transport == "rest" and options.sbatch_options:
            raise SpecError(Problem("sbatch_options", f"{', '.join(sorted(options.sbatch_options))}: slurmrestd takes "
                                                      "the job's properties, not sbatch's options, and trainops passes "
                                                      "them on through the Slurm commands only: use transport cli on "
                                                      "a login node, or leave sbatch_options out (partition, account, "
                                                      "qos, reservation, constraint and exclusive are options of "
                                                      "their own, for both transports)"),
                            "job for the slurm backend")
        job_dir = self._job_dir(name)
        request, batch = render(spec, name, options, job_dir, self._shared_dir(), token="TOKEN")
        rendered: dict[str, Any] = {"request": masked(request), "batch_script": batch_script(batch),
                                    "job_dir": str(job_dir), "transport": self.cluster.transport or "cli"}
        if self.cluster.transport == "rest":
            rendered["rest_job"] = rest_job(batch, REST_ENVIRONMENT)
        return rendered

    def create(self, spec: JobSpec, name: str, options: SlurmOptions, *, detached: bool, log: Log) -> JobHandle:
        job_dir = self._job_dir(name, create=True)

        own_directory(job_dir, "job_name")
        lock = try_lock(job_dir / ".submit.lock", f"{name} (submitting, pid {os.getpid()})", patience=120.0)
        if lock is None:
            raise SpecError(Problem("job_name", f"another trainops process has been submitting {name} for two "
                                                "minutes: follow it with trainops status / logs"))
        try:
            if records.read(job_dir, records.JOB) is not None:  # another caller of the same new name was first
                return self.handle(name, created=False)
            token = uuid.uuid4().hex
            records.write(job_dir, records.JOB, {
                "job_name": name, "token": token, "user": self._user(), "uid": os.getuid(), "status": "Submitting",
                "submitted": time.time(), "transport": self.cluster.transport or "cli",
                "nodes_requested": spec.host_count(), "instance_type": spec.instance_type,
                "instance_count": spec.host_count(), "max_run": spec.max_run})
            try:
                prepared = layout.lay_out(spec, name, options, job_dir, self._shared_dir(), token=token,
                                          s3_factory=self.client_factory)
                records.update(job_dir, records.JOB, checkpoint_dir=prepared.checkpoint_dir,
                               output_dir=prepared.output_dir, hosts=list(prepared.hosts))
                script = batch_script(prepared.batch)  # as written to job.sbatch: rendered, not read back
                job_id = self.transport().submit(script, str(job_dir / "job.sbatch"),
                                                 rest_job(prepared.batch, REST_ENVIRONMENT))
            except SlurmUnreachable:
                raise  # it may have reached Slurm: the record stays, and the next look finds it by its comment
            except BaseException:
                (job_dir / records.JOB).unlink(missing_ok=True)  # nothing was submitted: the name is free again
                raise
            records.update(job_dir, records.JOB, slurm_job_id=job_id)
        finally:
            lock.release()
        logger.info("[trainops] submitted %s as Slurm job %d (%d nodes, %s)", name, job_id, spec.host_count(),
                    job_dir)
        return self.handle(name, created=True)

    # --- following a job --------------------------------------------------------------------------------------
    def status_record(self, handle: JobHandle) -> dict[str, Any]:
        """Everything trainops knows of the job: its record, Slurm's look, how it ended (`status.read`)."""
        backend = self._of(handle)
        record = status.read(backend._job_dir(handle.job_name), handle.job_name, backend.transport())
        if record is None:
            raise SpecError(Problem("job_name", f"no Slurm job named {handle.job_name!r} in "
                                                f"{backend._shared_dir()}/jobs"), source="slurm job")
        return record

    def look(self, handle: JobHandle) -> Look:
        """One look (the kit's polled-job helper waits, guards and follows logs with it): the status record, as a
        result and what the guards observe (`following.look_of`)."""
        return look_of(self.status_record(handle), handle)

    def watch(self, handle: JobHandle, guards: JobGuards, *, log: Log | None = None) -> Watch:
        return SlurmWatch(self._of(handle), handle, guards, log)

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """Record why, then cancel the Slurm job (``scancel``: SIGTERM to every process of it on every node, SIGKILL
        after the cluster's KillWait)."""
        backend = self._of(handle)
        job_dir = backend._job_dir(handle.job_name)
        record = records.read(job_dir, records.JOB)
        if record is None:
            return f"{handle.job_name}: not started"
        if record.get("final"):
            return f"{handle.job_name}: already ended ({record['final'].get('status')})"
        if records.read(job_dir, records.STOP) is None:
            records.write(job_dir, records.STOP, {"reason": reason, "at": time.time(), "pid": os.getpid()})
        job_id = record.get("slurm_job_id")
        if job_id is None:
            return f"{handle.job_name}: stop recorded; no Slurm job id yet (the submission is under way)"
        return backend._cancel_own(handle.job_name, record, int(job_id), reason)

    def _cancel_own(self, name: str, record: Mapping[str, Any], job_id: int, reason: str) -> str:
        """``scancel`` the job only once a look has shown it is this submission's: its user, its name and the token
        in its comment (`status.owns`). Every stop comes here (trainops stop, the seam's stop and stop_job, Airflow's
        on_kill, Ctrl-C, a guard): after a controller restarted without its state, the recorded id may be another
        user's job, which is never cancelled."""
        transport = self.transport()
        job = transport.job(job_id)
        if job is None:
            return f"{name}: Slurm no longer knows job {job_id}: nothing to cancel"
        if not owns(job, dict(record), name):
            logger.warning("[trainops] Slurm job %d is no longer %s (the controller gave its id again: it belongs "
                           "to %s): not cancelled", job_id, name, job.user or "a job trainops cannot read")
            return (f"{name}: not cancelled: Slurm job {job_id} is another job now (its controller lost its state "
                    f"and gave the id again); {name} is no longer in Slurm")
        transport.cancel(job_id)
        return f"{name}: cancelled Slurm job {job_id} ({reason})"

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """Complete lines written after ``cursor`` (host -> byte offset) in the hosts' logs on the shared directory."""
        backend = self._of(handle)
        lines, after = read_new_lines(handle.job_name, backend._shared_dir(), dict(cursor), limit)
        return lines, dict(after)

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> str:
        """The exact batch script the job would be submitted with (its hosts are laid out from the CreateTrainingJob
        request, ``request.json`` beside it)."""
        script: str = self.dry_run(spec, job_name, self.options(options))["batch_script"]
        return script

    def render_summary(self, rendered: dict[str, Any] | str, spec: Any) -> dict[str, Any]:
        """What a reviewer reads first: the allocation, its time limit, where it runs."""
        lines = rendered.splitlines() if isinstance(rendered, str) else []
        return {"nodes": spec.host_count(), "time": time_limit(spec.max_run), "instance_type": spec.instance_type,
                "sbatch": [line.split(" ", 1)[1] for line in lines if line.startswith("#SBATCH ")],
                "srun": next((line for line in lines if line.startswith("srun ")), None)}

    def check_spec(self, spec: Any, region: str | None = None,
                   options: BackendOptions | Mapping[str, Any] | None = None) -> None:
        """What the slurm backend would refuse in the spec with ``options`` (its channel overrides, processes per
        host...; the shared directory may still come with the job)."""
        check_spec(spec, self.options(options), self.cluster.shared_dir or "/shared")

    # --- a pipeline's other steps: where trainops runs, over the shared directory (`HereSteps`) ------------------
    def _here_dir(self) -> str:
        return self._shared_dir()
