"""Running a job locally: one runtime launcher per simulated host, all on 127.0.0.1, watched until the end.

What SageMaker does for a job, done here: lay out each host's contract directory, start the launchers, stream the
logs, stop every host as soon as one fails (or the job exceeds max_run, or it is asked to stop), name the root
cause from the failure files, pack host 1's model directory into `<output_path>/<job>/output/model.tar.gz`, and
record the job's status so `trainops status` (and the Airflow / KFP steps) can read it back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from trainops.backends.local import paths, status
from trainops.backends.local.artifacts import output_location_problem, pack_outputs
from trainops.backends.local.inputs import resolve_channels, resolve_code_dir
from trainops.backends.local.layout import HostLayout, lay_out_job
from trainops.backends.local.locks import HeldLock, holder, try_lock
from trainops.backends.local.ports import reserve_port
from trainops.backends.local.identity import own_identity
from trainops.backends.local.processes import MARKER, kill_job
from trainops.backends.local.pump import LogPump
from trainops.backends.local.secrets import MASK_VARIABLES, job_secrets, mask, mask_variables, public_spec
from trainops.backends.local.watch import ProcessWatch
from trainops.errors import JobFailed, SpecError
from trainops.spec.job import JobSpec

POLL_SECONDS = 0.1
STOP_GRACE_SECONDS = 10.0
JOB_LOCK = ".controller.lock"  # held by the trainops process running the job (trainops.backends.local.locks)
FAILURE_REASON_LIMIT = 1024  # SageMaker's FailureReason shows the first 1,024 characters of the failure file

Log = Callable[[str], None]


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


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
    processes_left: int = 0  # alive after the job's clean-up: 0 unless some could not be stopped
    processes_stopped: int = 0  # still running when the job ended, stopped by the clean-up
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


class LocalJob:
    """One run of a job spec on this machine. `run()` blocks; `request_stop()` may be called from a signal handler."""

    def __init__(
        self,
        spec: JobSpec,
        job_name: str,
        *,
        workdir: str | os.PathLike | None = None,
        processes_per_host: int | None = None,
        channel_overrides: dict[str, str] | None = None,
        log: Log | None = None,
        grace_seconds: float = STOP_GRACE_SECONDS,
        checkpoint_key: str | None = None,
    ):
        self.spec = spec
        self.checkpoint_key = checkpoint_key
        self.job_name = job_name
        self.workdir = workdir
        self.job_dir = paths.job_dir(job_name, workdir)
        self.processes_per_host = processes_per_host
        self.channel_overrides = channel_overrides or {}
        self.log = log or _print_line
        self.grace_seconds = grace_seconds
        self.job_id = uuid.uuid4().hex
        self._stop_reason: str | None = None
        self._launchers: dict[str, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []
        self._log_lock = threading.Lock()
        # Values never written or returned as they are (logs, status, failure): see trainops.backends.local.secrets.
        self._secrets = job_secrets(spec, dict(os.environ))
        self._checkpoint_lock: HeldLock | None = None
        self._claim: HeldLock | None = None
        self._process_watch: ProcessWatch | None = None  # processes, guard, stop requests (backends.local.watch)
        self._pumps: list[LogPump] = []

    # --- the public surface -------------------------------------------------------------------------------------
    def request_stop(self, reason: str = "Stopped by the user") -> None:
        """Ask the job to stop; safe to call from a signal handler (it only sets a flag)."""
        if self._stop_reason is None:
            self._stop_reason = reason

    def run(self) -> LocalJobResult:
        """Lay out, launch, watch and finish the job; returns how it ended (never raises for a failed job).

        Raises `JobFailed` without running anything when another trainops process is running a job of the same
        name in the same work directory (two controllers would overwrite each other's hosts and records).
        """
        started = time.time()
        self.job_dir.mkdir(parents=True, exist_ok=True)
        claim = try_lock(self.job_dir / JOB_LOCK, f"{self.job_name} (controller pid {os.getpid()})", patience=0.2)
        if claim is None:
            raise JobFailed(f"local job {self.job_name} is already running in {self.job_dir} "
                            f"({holder(self.job_dir / JOB_LOCK)}): choose another job name, or follow it with "
                            f"trainops logs {self.job_name} --follow")
        self._claim = claim
        # Recorded at once, with the controller's identity, so status / stop / a detached caller see the job while
        # its inputs are being laid out.
        status.write(self.job_dir, {"job_name": self.job_name, "status": "InProgress", "secondary_status": "Starting",
                                    "job_dir": str(self.job_dir), "started": started, "job_id": self.job_id,
                                    "controller_pid": os.getpid(), "controller": own_identity()})
        try:
            return self._run(started)
        finally:
            for lock in (claim, self._checkpoint_lock):
                if lock is not None:
                    lock.release()

    def _run(self, started: float) -> LocalJobResult:
        unwritable = output_location_problem(self.spec, self.job_name, self.job_dir)
        if unwritable:
            return self._refused(started, unwritable)
        channels = resolve_channels(self.spec, self.job_dir, self.channel_overrides, self.log)
        code_dir = resolve_code_dir(self.spec)
        checkpoint_dir = self._checkpoint_dir()
        layouts = lay_out_job(self.spec, self.job_name, self.job_dir, channels, code_dir, checkpoint_dir)
        result = LocalJobResult(job_name=self.job_name, status="InProgress", job_dir=str(self.job_dir),
                                started=started, ended=started, checkpoint_dir=str(checkpoint_dir),
                                hosts=[layout.name for layout in layouts],
                                processes_per_host=self.processes_per_host)
        held = [lock.fileno() for lock in (self._claim, self._checkpoint_lock) if lock is not None]
        self._process_watch = ProcessWatch(self.job_dir, self.job_id, log=self.log, locked_descriptors=held,
                                           on_stop_request=self.request_stop)
        self._process_watch.start()
        status.write(self.job_dir, {**result.to_dict(), "controller_pid": os.getpid(), "job_id": self.job_id,
                                    "controller": own_identity(), "processes": self._process_watch.describe(),
                                    "spec": public_spec(self.spec)})
        if any(checkpoint_dir.iterdir()):
            self.log(f"[trainops] resuming: checkpoint directory {checkpoint_dir} has content")
        with reserve_port() as port:
            try:
                self._start(layouts, port.port)
                outcome = self._watch(layouts)
            finally:
                self._stop_all()
                result.processes_stopped, result.processes_left = self._process_watch.finish(grace_seconds=1.0)
                for reader in self._readers:
                    reader.join(timeout=5)
                for pump in self._pumps:
                    result.log_lines_lost += pump.lost_lines + pump.console_lost
                    if pump.summary():
                        self.log(f"[trainops] log output lost: {pump.summary()}")
        result.status, result.secondary_status, result.failure_reason = outcome
        if result.status == "Completed":
            self._finish_outputs(layouts[0], result)
        result.ended = time.time()
        if result.failure_reason:
            result.failure_reason = mask(result.failure_reason, self._secrets)
            status.write_failure(self.job_dir, result.failure_reason)
        status.write(self.job_dir, {**result.to_dict(), "job_id": self.job_id, "spec": public_spec(self.spec)})
        return result

    # --- pieces -------------------------------------------------------------------------------------------------
    def _refused(self, started: float, reason: str) -> LocalJobResult:
        """A job that could not start (nothing was launched): recorded Failed with the reason."""
        self.log(f"[trainops] {reason}")
        result = LocalJobResult(job_name=self.job_name, status="Failed", job_dir=str(self.job_dir), started=started,
                                ended=time.time(), secondary_status="Starting", failure_reason=reason,
                                processes_per_host=self.processes_per_host)
        status.write_failure(self.job_dir, reason)
        status.write(self.job_dir, {**result.to_dict(), "job_id": self.job_id, "spec": public_spec(self.spec)})
        return result

    def _checkpoint_dir(self) -> Path:
        """Where the job's checkpoints live, so that a re-run of the same job resumes:

        - the spec's `checkpoint_s3_uri` when it has one (on SageMaker the same prefix means the same checkpoints);
        - else the caller's `checkpoint_key` (the pipeline runner, the KFP component and the Airflow operator pass
          the job's identity, so a retry resumes while new data or a forced retrain starts afresh);
        - else the spec's name (`trainops run` of the same spec file).

        Never shared by two jobs running at once (a sweep of one spec would resume from each other's checkpoints):
        while one job holds the directory, another gets one of its own, `<key>@<job name>`."""
        key = self.checkpoint_key or self.spec.name or f"job-{self.spec.spec_hash()[:12]}"
        if self.spec.checkpoint_s3_uri:
            key = self.spec.checkpoint_s3_uri[len("s3://"):].strip("/").replace("/", "__")
        root = paths.checkpoints_root(self.workdir)
        directory = root / key
        self._checkpoint_lock = try_lock(root / f".{key}.lock", self.job_name)
        if self._checkpoint_lock is None:
            private = root / f"{key}@{self.job_name}"
            self.log(f"[trainops] checkpoint directory {directory} is in use by running job "
                     f"{holder(root / f'.{key}.lock')}: this job keeps its checkpoints in {private}")
            directory = private
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def _environment(self, layout: HostLayout, addresses: dict[str, str], port: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.spec.environment)
        env.update({
            "SAGEMAKER_BASE_DIR": str(layout.base_dir),
            "TRAINOPS_LOCAL": "1",
            "TRAINOPS_HOST_ADDRESSES": json.dumps(addresses),
            "TRAINOPS_MASTER_PORT": str(port),
            "TRAINOPS_CHECKPOINT_DIR": str(layout.base_dir / "checkpoints"),
            "TRAINOPS_JOB_NAME": self.job_name,
            "PYTHONUNBUFFERED": "1",
            MASK_VARIABLES: mask_variables(self.spec, os.environ.get(MASK_VARIABLES)),
            MARKER: self.job_id,
        })
        if self.processes_per_host:
            env["TRAINOPS_PROCESSES_PER_HOST"] = str(self.processes_per_host)
        # The runtime must be importable in every host, as it is in the container through its channel.
        package_root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        return env

    def _start(self, layouts: list[HostLayout], port: int) -> None:
        addresses = {layout.name: "127.0.0.1" for layout in layouts}
        logs_dir = self.job_dir / "logs"
        logs_dir.mkdir(exist_ok=True)
        for layout in layouts:
            process = subprocess.Popen(
                [sys.executable, "-m", "trainops.runtime", "launch"],
                env=self._environment(layout, addresses, port),
                cwd=str(layout.base_dir),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches trainops, which stops hosts in order
                preexec_fn=self._process_watch.preexec(),  # the job's cgroup, and death with the controller
            )
            self._launchers[layout.name] = process
            self._process_watch.add_launcher(process.pid)
            pump = LogPump(layout.name, process.stdout.fileno(), logs_dir / f"{layout.name}.log",
                           secrets=self._secrets, log=self.log, log_lock=self._log_lock)
            self._pumps.append(pump)
            reader = threading.Thread(target=pump.run, daemon=True)
            reader.start()
            self._readers.append(reader)

    def _watch(self, layouts: list[HostLayout]) -> tuple[str, str, str | None]:
        deadline = time.monotonic() + self.spec.max_run
        by_name = {layout.name: layout for layout in layouts}
        while True:
            if self._stop_reason:
                return "Stopped", "Stopped", self._stop_reason
            if time.monotonic() > deadline:
                self.log(f"[trainops] max_run ({self.spec.max_run} s) exceeded: stopping every host")
                return "Stopped", "MaxRuntimeExceeded", (
                    f"MaxRuntimeExceeded: the job ran longer than max_run ({self.spec.max_run} s)")
            codes = {name: process.poll() for name, process in self._launchers.items()}
            failed = [name for name, code in codes.items() if code not in (None, 0)]
            if failed:
                host = failed[0]
                return "Failed", "Failed", self._root_cause(by_name[host], codes[host])
            if all(code == 0 for code in codes.values()):
                return "Completed", "Completed", None
            time.sleep(POLL_SECONDS)

    def _root_cause(self, layout: HostLayout, code: int) -> str:
        try:
            text = layout.failure_file.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            text = ""
        if not text:
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            text = (f"the launcher of host {layout.name} {how} without writing a failure file"
                    + status.disk_full_note(layout.base_dir))
        return text[:FAILURE_REASON_LIMIT]

    def _stop_all(self) -> None:
        running = {name: p for name, p in self._launchers.items() if p.poll() is None}
        if not running:
            return
        for process in running.values():
            try:
                process.terminate()  # the launcher forwards SIGTERM to its ranks and records `stopped`
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self.grace_seconds
        for process in running.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        kill_job(self.job_id, grace_seconds=1.0)

    def _finish_outputs(self, first_host: HostLayout, result: LocalJobResult) -> None:
        try:
            model, output = pack_outputs(self.spec, self.job_name, first_host, self.job_dir)
        except OSError as error:
            result.status, result.secondary_status = "Failed", "Uploading"
            result.failure_reason = (f"could not write the model artifact: {error}; the model directory is kept in "
                                     f"{first_host.model_dir} (nothing was written under the archive's final name)")
            return
        result.model_artifact, result.output_artifact = model, output


def run_local_job(spec: JobSpec, job_name: str, **options) -> LocalJobResult:
    """Run `spec` as `job_name` on this machine and return how it ended (see `LocalJob`)."""
    return LocalJob(spec, job_name, **options).run()


def check_local_spec(spec: JobSpec) -> None:
    """Refuse what cannot run locally, before anything is laid out."""
    if spec.source_dir and spec.source_dir.startswith("s3://"):
        raise SpecError("source_dir: an s3:// code location cannot run locally; give the local directory")
