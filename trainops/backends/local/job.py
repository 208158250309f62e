"""Running a job locally: the `CreateTrainingJob` request SageMaker would get, executed on this machine.

The job runs a request, whichever way it came (`trainops.backends.local.job_input`): a spec rendered by the request
package's own `render_local` (this machine's paths where SageMaker has S3, s3:// channels downloaded through boto3),
or a request as it was sent (`execute_training_request`). Then what SageMaker does for it, done here: one emulated
container per host, filled from the request
(`trainops.backends.local.container`), started with the request's entrypoint and environment, logs streamed, every
host stopped as soon as one fails (or MaxRuntimeInSeconds passes: SIGTERM, then SIGKILL after the grace SageMaker
gives, or it is asked to stop), the root cause named from the failure files, host 1's model directory packed into
`<output_path>/<job>/output/model.tar.gz`, and the job's status recorded so `trainops status` (and the Airflow / KFP
steps) can read it back.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.backends.hostfs import contract_dir, paths
from trainops.backends.hostfs.artifacts import output_location_problem, pack_outputs
from trainops.backends.hostfs.channels import fetch_channels
from trainops.backends.hostfs.layout import HostLayout
from trainops.backends.hostfs.locks import HeldLock, holder, try_lock
from trainops.backends.local import container, estimator_options, identity, status
from trainops.backends.local.control import clear_stop_request, request_stop, stop_requested
from trainops.backends.local.host_console import HostConsole
from trainops.backends.local.host_init import CONTROLLER_PIPE, HELD_LOCKS, stopped_in
from trainops.backends.local.identity import CONTROLLER_LOCK, own_identity
from trainops.backends.local.job_input import JobInput
from trainops.backends.local.job_result import (  # noqa: F401 - FAILURE_REASON_LIMIT, OUTPUT_TAIL_HEADING re-exported
    FAILURE_REASON_LIMIT,
    OUTPUT_TAIL_HEADING,
    LocalJobResult,
    with_output_tail,
)
from trainops.backends.local.ports import reserve_port
from trainops.backends.local.processes import MARKER, host_pid, pid_namespace_of
from trainops.backends.local.pump import LogPump
from trainops.backends.local.secrets import MASK_VARIABLES, mask
from trainops.backends.local.vocabulary import BEFORE_SCRIPT
from trainops.backends.request.code import dependency_problems
from trainops.backends.request.hosts import host_groups
from trainops.backends.request.render import is_s3_source
from trainops.backends.states import wait_bound_seconds
from trainops.errors import JobFailed, Problem, SpecError, install_hint, missing_package
from trainops.runtime.distributions import local_ports_needed
from trainops.runtime.failure import read_failure_text, root_cause
from trainops.runtime.host_facts import MPIRUN_SETTING
from trainops.runtime.plan import local_thread_share
from trainops.runtime.processes import process_limit_note
from trainops.runtime.records import read_records
from trainops.spec.job import JobSpec

POLL_SECONDS = 0.1
RANK_PID_POLLS = 5  # every fifth poll the controller looks for ranks started (`LocalJob._note_rank_pids`)
STOP_GRACE_SECONDS = 10.0
HOST_END_SECONDS = 30.0  # how long a killed host may take to end (its launcher waits until nothing of it is left)
FAILURE_SETTLE_SECONDS = 3.0  # how long the other hosts may take to end after the first failure, before stop-all
MAX_RUNTIME_GRACE_SECONDS = 120.0  # SageMaker's wait between SIGTERM and SIGKILL when MaxRuntimeInSeconds passes
#: How long the pumps may take to read the rest of their pipes once every host has ended (each host's launcher ends
#: only when nothing of its host is left, so the pipes reach their end; this bounds only a process that escaped).
PUMP_END_SECONDS = 60.0

Log = Callable[[str], None]

logger = logging.getLogger(__name__)


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class LocalJob:
    """One run of a CreateTrainingJob request on this machine, whichever way it was given (`JobInput`: a spec
    rendered, or a request as sent). `run()` blocks; `request_stop()` may be called from a signal handler."""

    def __init__(
        self,
        source: JobInput,
        job_name: str,
        *,
        workdir: str | os.PathLike | None = None,
        processes_per_host: int | None = None,
        channel_overrides: dict[str, str] | None = None,
        log: Log | None = None,
        grace_seconds: float = STOP_GRACE_SECONDS,
        checkpoint_key: str | None = None,
        image_python: str | None = None,
        s3_factory: Callable[[str], object] | None = None,
        max_runtime_grace_seconds: float = MAX_RUNTIME_GRACE_SECONDS,
        placed_new: bool = False,
    ):
        self.source = source
        self.request: dict = {}  # rendered by `run`, under the job's lock (the code channels are laid out then)
        self.image_python = image_python or sys.executable
        self.s3_factory = s3_factory
        self.max_runtime_grace_seconds = max_runtime_grace_seconds
        self._isolated = False
        self.checkpoint_key = checkpoint_key
        self.job_name = job_name
        self.workdir = workdir
        self.job_dir = paths.job_dir(job_name, workdir)
        self.processes_per_host = processes_per_host
        self.channel_overrides = channel_overrides or {}
        self.log = log or _print_line
        self.grace_seconds = grace_seconds
        self.job_id = uuid.uuid4().hex
        self._placed = time.time()  # a record of this name begun since is another caller's run (`_follow`)
        self.placed_new = placed_new  # the re-attach policy found no job of this name: follow a concurrent one
        self._stop_reason: str | None = None
        self._launchers: dict[str, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []
        self._log_lock = threading.Lock()
        # Values never written or returned as they are (logs, status, failure): see trainops.backends.local.secrets.
        self._secrets = source.secrets
        self._checkpoint_lock: HeldLock | None = None
        self._claim: HeldLock | None = None
        self._pumps: list[LogPump] = []
        self._console: HostConsole | None = None
        self._failed_host: str | None = None  # the host whose failure file (or exit) is the job's failure reason
        self._record: dict[str, Any] = {}  # the InProgress status record, rewritten when a rank's pid is learnt
        self._ranks: dict[tuple[str, int], dict[str, Any]] = {}  # (host, rank) -> its pids (`_note_rank_pids`)
        self._ranks_tried: set[tuple[str, int, int, Any]] = set()
        self._controller_pipes: dict[str, int] = {}  # host -> write end: its launcher ends the host at its close

    # --- the public surface -------------------------------------------------------------------------------------
    def request_stop(self, reason: str = "Stopped by the user") -> None:
        """Ask the job to stop; safe to call from a signal handler (it only sets a flag)."""
        if self._stop_reason is None:
            self._stop_reason = reason

    def run(self) -> LocalJobResult:
        """Lay out, launch, watch and finish the job; returns how it ended (never raises for a failed job).

        When another trainops process runs a job of the same name in the same work directory: for a job placed as
        a new name (``placed_new``: the backend's submit, a detached supervisor) that is another caller of the
        same new name, and the job is followed to its end and its result returned (two callers of one new name make
        one job, the re-attach rule), also when that run has already ended; otherwise `JobFailed` is raised without
        running anything (two controllers would overwrite each other's hosts and records).
        """
        started = time.time()
        paths.secure_root(self.workdir, create=True)  # root, jobs/, checkpoints/: made 0700, or refused
        paths.own_directory(self.job_dir, "job_name")
        claim = try_lock(self.job_dir / CONTROLLER_LOCK, f"{self.job_name} (controller pid {os.getpid()})",
                         patience=0.2)
        if self.placed_new and (claim is None or self.started_by_another()):
            if claim is not None:
                claim.release()
            return self._follow()
        if claim is None:
            raise JobFailed(f"local job {self.job_name} is already running in {self.job_dir} "
                            f"({holder(self.job_dir / CONTROLLER_LOCK)}): choose another job name, or follow it with "
                            f"trainops logs {self.job_name} --follow")
        self._claim = claim
        clear_stop_request(self.job_dir)  # an earlier run's; one made after the record below is this job's
        # Recorded at once, with the controller's identity, so status / stop / a detached caller see the job while
        # its inputs are being laid out.
        status.write(self.job_dir, {"job_name": self.job_name, "status": "InProgress", "secondary_status": "Starting",
                                    "job_dir": str(self.job_dir), "started": started, "job_id": self.job_id,
                                    "controller_pid": os.getpid(), "controller": own_identity()})
        try:
            return self._run(started)
        except Exception as error:
            # Say why in the record (else it would read "the controller exited before the job ended"); what failed
            # before any host started is the setup's, not the script's (`trainops.backends.failures`: class setup).
            limit = process_limit_note(error)
            hint = install_hint(error)
            said = limit or f"{type(error).__name__}: {error}" + (f" ({hint})" if hint else "")
            status.write_failed_start(self.job_dir, self.job_id, mask(
                said if self._launchers else f"{BEFORE_SCRIPT}{said}", self._secrets))
            if limit:
                raise JobFailed(f"local job {self.job_name} could not start its processes: {limit}") from error
            if hint:
                raise JobFailed(f"local job {self.job_name} {missing_package(error)}") from error
            raise
        finally:
            for lock in (claim, self._checkpoint_lock):
                if lock is not None:
                    lock.release()

    def _run(self, started: float) -> LocalJobResult:
        request = self.request = self.source.render(self.job_name, self.job_dir)
        output_path = request["OutputDataConfig"]["S3OutputPath"]
        unwritable = output_location_problem(output_path, self.job_name, self.job_dir)
        if unwritable:
            return self._refused(started, unwritable)
        channels = fetch_channels(request, self.job_dir, self.channel_overrides, self.s3_factory)
        for line in estimator_options.unemulated_lines(request):
            logger.info("%s", line)
        checkpoint_dir = self._checkpoint_dir()
        self._isolated = container.namespaces_available()
        layouts = [contract_dir.fill_container(request, host, self.job_dir / "hosts" / host, channels, checkpoint_dir,
                                            mount=self._isolated)
                   for host, _, _ in host_groups(request)]
        if contract_dir.uses_toolkit(request) and not self._isolated:
            return self._refused(started, "the toolkit launcher needs a private mount namespace for each emulated "
                                          "container (/opt/ml and the algo-N host names), and `unshare --mount` is "
                                          "not allowed here: run as root or enable user namespaces, or use the "
                                          "trainops launcher")
        result = LocalJobResult(job_name=self.job_name, status="InProgress", job_dir=str(self.job_dir),
                                started=started, ended=started, checkpoint_dir=str(checkpoint_dir),
                                hosts=[layout.name for layout in layouts],
                                processes_per_host=self.processes_per_host)
        isolation = container.isolation() if self._isolated else None
        status.reserve_space(self.job_dir)  # given back when the disk fills, so the job's end can still be recorded
        # A request made since the job recorded itself (while it was laying out) is this job's: seen at once (an
        # earlier run's was cleared before this job's first record: `clear_stop_request`).
        self._check_stop_request()
        self._record = {**result.to_dict(), "controller_pid": os.getpid(), "job_id": self.job_id,
                        "controller": own_identity(), "isolation": isolation,
                        "spec": self.source.public(self.request)}
        status.write(self.job_dir, self._record)
        if any(checkpoint_dir.iterdir()):
            logger.info("[trainops] resuming: checkpoint directory %s has content", checkpoint_dir)

        with reserve_port(count=local_ports_needed(len(layouts))) as port:
            try:
                self._start(layouts, port.port)
                outcome = self._watch(layouts)
            finally:
                result.processes_left = self._stop_all()
                clear_stop_request(self.job_dir)  # answered
                # what each host's launcher stopped after its entrypoint ended
                result.processes_stopped = sum(stopped_in(str(container.init_report(self.job_dir, layout.name)))
                                               for layout in layouts)
                for descriptor in self._controller_pipes.values():  # every launcher has ended (`_stop_all`)
                    os.close(descriptor)
                self._controller_pipes.clear()
                for reader in self._readers:  # every host has ended: each pump reads to the end of its pipe
                    reader.join(timeout=PUMP_END_SECONDS)
                for pump in self._pumps:
                    result.log_lines_lost += pump.lost_lines + pump.console_lost
                    if pump.summary():
                        logger.warning("[trainops] log output lost: %s", pump.summary())
                if self._console is not None:
                    self._console.close()
                    result.log_lines_lost += self._console.lost
                    if self._console.lost:
                        logger.warning("[trainops] %d line(s) could not be shown on the console (%s)",
                                       self._console.lost, "; ".join(self._console.errors) or "it did not read them")
        result.status, result.secondary_status, result.failure_reason = outcome
        if result.status == "Failed" and result.failure_reason and self._failed_host:
            result.failure_reason = with_output_tail(result.failure_reason, [
                line for pump in self._pumps if pump.host == self._failed_host for line in pump.recent_lines()])
        estimator_options.sync_tensorboard(request, layouts, self.s3_factory)
        if result.status == "Completed":
            self._finish_outputs(layouts[0], result)
        result.ended = time.time()
        if result.failure_reason:
            result.failure_reason = mask(result.failure_reason, self._secrets)
            status.write_failure(self.job_dir, result.failure_reason)
        status.write(self.job_dir, {**result.to_dict(), "job_id": self.job_id, "ranks": self._rank_list(),
                                    "isolation": self._record.get("isolation"),
                                    "spec": self.source.public(self.request)})
        return result

    # --- another caller's run of this name ----------------------------------------------------------------------
    def started_by_another(self) -> bool:
        """Whether the job directory holds a record of a run that began after this job was placed: another caller
        placed the same new name at the same moment and ran it (maybe to its end) first."""
        try:
            record = status.read_record(self.job_dir, self.job_name)
        except SpecError:
            return False
        started = record.get("started")
        return isinstance(started, (int, float)) and started >= self._placed and record.get("job_id") != self.job_id

    def _follow(self) -> LocalJobResult:
        """The re-attach rule for two callers of one new name: the one that got the job's lock runs it; this one
        follows it to its end (a stop asked of this one is passed on) and returns how it ended."""
        logger.info("[trainops] local job %s was started by another caller (%s): following it to its end",
                    self.job_name, holder(self.job_dir / CONTROLLER_LOCK))
        deadline = time.monotonic() + 60.0
        while True:  # its first record follows its lock at once
            # The lock first, then the record: a holder records before its lock drops, so no record after a free
            # lock is a holder that recorded nothing (not one that recorded and ended between the two looks).
            held = identity.lock_held(self.job_dir)
            if status.exists(self.job_name, self.workdir):
                break
            if time.monotonic() > deadline or not held:
                raise JobFailed(f"local job {self.job_name} is held by another controller that records nothing "
                                f"({holder(self.job_dir / CONTROLLER_LOCK)}): follow it with trainops logs "
                                f"{self.job_name} --follow")
            time.sleep(POLL_SECONDS)
        record, asked = status.read(self.job_name, self.workdir), False
        recorded = record.get("spec")
        spec: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        deadline = time.monotonic() + wait_bound_seconds(spec.get("max_run") or 86400, spec.get("max_wait"))
        while record.get("status") in status.ACTIVE and time.monotonic() < deadline:
            if self._stop_reason and not asked:
                request_stop(self.job_dir, self._stop_reason)
                asked = True
            time.sleep(POLL_SECONDS * 5)
            record = status.read(self.job_name, self.workdir)
        known = {name: record[name] for name in LocalJobResult.__dataclass_fields__ if name in record}
        known.update(job_name=self.job_name, job_dir=str(self.job_dir), status=record.get("status", "Failed"))
        known.setdefault("started", record.get("started") or time.time())
        known.setdefault("ended", record.get("ended") or time.time())
        return LocalJobResult(**known)

    # --- pieces -------------------------------------------------------------------------------------------------
    def _max_run(self) -> int:
        return int(self.request["StoppingCondition"]["MaxRuntimeInSeconds"])

    def _refused(self, started: float, reason: str) -> LocalJobResult:
        """A job that could not start (nothing was launched): recorded Failed with the reason."""
        logger.error("[trainops] %s", reason)
        reason = f"{BEFORE_SCRIPT}{reason}"
        result = LocalJobResult(job_name=self.job_name, status="Failed", job_dir=str(self.job_dir), started=started,
                                ended=time.time(), secondary_status="Starting", failure_reason=reason,
                                processes_per_host=self.processes_per_host)
        status.write_failure(self.job_dir, reason)
        status.write(self.job_dir, {**result.to_dict(), "job_id": self.job_id,
                                    "spec": self.source.public(self.request)})
        return result

    def _checkpoint_dir(self) -> Path:
        """Where the job's checkpoints live, so that a re-run of the same job resumes and a new job starts afresh:

        - the spec's `checkpoint_s3_uri` when it has one (on SageMaker the same prefix means the same checkpoints:
          jobs that name it share them, deliberately);
        - else the caller's `checkpoint_key` (the train step passes its job's name, so its attempts `<name>-N` and a
          re-run of the name resume; the pipeline runner, the KFP component and the Airflow operator the job's
          identity, so a retry resumes while new data or a forced retrain starts afresh; `trainops run
          --resume-from JOB` the checkpoints of an earlier job);
        - else the job's name: never another job's (a second `trainops run` of one spec, under a new name, used to
          resume the first's final checkpoint and train nothing).

        Never shared by two jobs running at once (a sweep of one spec would resume from each other's checkpoints):
        while one job holds the directory, another gets one of its own, `<key>@<job name>`."""
        checkpoint_uri = (self.request.get("CheckpointConfig") or {}).get("S3Uri")
        key = self.checkpoint_key or self.job_name
        field = "checkpoint_key"
        if checkpoint_uri:
            key, field = checkpoint_uri.split("://", 1)[-1].strip("/").replace("/", "__"), "checkpoint_s3_uri"
        key = paths.checkpoint_component(key, field)  # one safe component: never `..` out of the root
        root = paths.checkpoints_root(self.workdir)
        directory = root / key
        self._checkpoint_lock = try_lock(root / f".{key}.lock", self.job_name)
        if self._checkpoint_lock is None:
            private = root / paths.short_key(f"{key}@{self.job_name}")
            logger.info("[trainops] checkpoint directory %s is in use by running job %s: this job keeps its "
                        "checkpoints in %s", directory, holder(root / f".{key}.lock"), private)
            directory = private
        return paths.own_directory(directory, field)  # a link or a file there is refused, never resumed from

    def _environment(self, layout: HostLayout, addresses: dict[str, str], port: int) -> dict[str, str]:
        """The container's environment (`contract_dir.container_environment`) plus what only the local executor sets:
        loopback addresses and a reserved port (jobs run side by side on one machine), the shared checkpoint
        directory, the job's process marker, and TRAINOPS_LOCAL (the runtime's stand-ins for AWS's libraries)."""
        inherited_masks = os.environ.get(MASK_VARIABLES, "")
        request_masks = (self.request.get("Environment") or {}).get(MASK_VARIABLES, "")
        masks = sorted({name.strip() for name in f"{inherited_masks},{request_masks}".split(",") if name.strip()})
        extra = {
            "TRAINOPS_LOCAL": "1",
            "TRAINOPS_HOST_ADDRESSES": json.dumps(addresses),
            "TRAINOPS_MASTER_PORT": str(port),
            "TRAINOPS_CHECKPOINT_DIR": str(layout.base_dir / "checkpoints"),
            "TRAINOPS_JOB_NAME": self.job_name,
            "PYTHONUNBUFFERED": "1",
            MASK_VARIABLES: ",".join(masks),
            MARKER: self.job_id,
            # The image's mpirun, found in trainops' own environment: set after the request's Environment, so a
            # spec's PATH never chooses what the runtime starts as mpirun ("": none here, a clear error if needed).
            MPIRUN_SETTING: container.image_tool("mpirun", self.image_python) or "",
        }
        if self.processes_per_host:
            extra["TRAINOPS_PROCESSES_PER_HOST"] = str(self.processes_per_host)
        requested = self.request.get("Environment") or {}
        if contract_dir.uses_toolkit(self.request) and "OMP_NUM_THREADS" not in {*requested, *os.environ}:
            # Every emulated host shares this machine: each rank gets its share of the cores, as the trainops
            # runtime gives its ranks (plan.local_thread_share); AWS's toolkit leaves torch one thread per core per
            # rank, and the digits example trained ~18x slower on 2 cores under load (issue 47).
            hosts = int((self.request.get("ResourceConfig") or {}).get("InstanceCount") or 1)
            extra["OMP_NUM_THREADS"] = str(local_thread_share(os.cpu_count() or 1, hosts,
                                                              self.processes_per_host or 1))
        return contract_dir.container_environment(self.request, layout, inherited=os.environ, isolated=self._isolated,
                                               extra=extra, python=self.image_python)

    def _start(self, layouts: list[HostLayout], port: int) -> None:
        addresses = {layout.name: "127.0.0.1" for layout in layouts}
        logs_dir = self.job_dir / "logs"
        logs_dir.mkdir(exist_ok=True)
        hosts = [layout.name for layout in layouts]
        locks = [descriptor for lock in (self._claim, self._checkpoint_lock)
                 if lock is not None and (descriptor := lock.fileno()) is not None]
        for layout in layouts:
            if self._check_stop_request() or self._stop_reason:
                break  # stopped while starting: no further host is started (_watch records the job Stopped)
            argv = container.isolate(contract_dir.container_argv(self.request, self.image_python), layout, self.job_dir,
                                     hosts)
            environment = self._environment(layout, addresses, port)
            # Whichever thread starts it, the host ends when this process does: the pipe's write end is ours alone
            # (close-on-exec), so its end of file reaches the host's launcher only when we are gone (or give the host
            # up: `_stop_all`). The launcher holds copies of the job's locks until its host has ended.
            read_end, write_end = os.pipe()
            self._controller_pipes[layout.name] = write_end
            environment[CONTROLLER_PIPE] = str(read_end)
            environment[HELD_LOCKS] = ",".join(map(str, locks))
            passed = (read_end, *locks)
            try:
                process = subprocess.Popen(
                    argv,
                    env=environment,
                    cwd=str(layout.base_dir),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C reaches trainops, which stops hosts in order
                    pass_fds=passed,
                )
            finally:
                os.close(read_end)
            self._launchers[layout.name] = process
            assert process.stdout is not None  # started with stdout=PIPE
            if self._console is None:  # one printer for every host: a slow console never slows a pump
                self._console = HostConsole(self.log)
            pump = LogPump(layout.name, process.stdout.fileno(), logs_dir / f"{layout.name}.log",
                           secrets=self._secrets, log=self._console.put, log_lock=self._log_lock)
            self._pumps.append(pump)
            reader = threading.Thread(target=pump.run, daemon=True)
            reader.start()
            self._readers.append(reader)

    def _watch(self, layouts: list[HostLayout]) -> tuple[str, str, str | None]:
        max_run = self._max_run()
        deadline = time.monotonic() + max_run
        by_name = {layout.name: layout for layout in layouts}
        polls = 0
        while True:
            if polls % RANK_PID_POLLS == 0:
                self._note_rank_pids(layouts)
            polls += 1
            if self._check_stop_request() or self._stop_reason:
                return "Stopped", "Stopped", self._stop_reason
            if time.monotonic() > deadline:
                logger.warning("[trainops] MaxRuntimeInSeconds (%s s) exceeded: stopping every host (SIGTERM, "
                               "SIGKILL after %g s)", max_run, self.max_runtime_grace_seconds)
                self.grace_seconds = self.max_runtime_grace_seconds
                return "Stopped", "MaxRuntimeExceeded", (
                    f"MaxRuntimeExceeded: the job ran longer than max_run ({max_run} s)")
            codes = {name: process.poll() for name, process in self._launchers.items()}
            failed = [name for name, code in codes.items() if code not in (None, 0)]
            if failed:
                codes = self._settle(codes)
                host = self._first_failed_host(layouts, codes)
                return "Failed", "Failed", self._root_cause(by_name[host], codes[host] or 1)
            if all(code == 0 for code in codes.values()):
                return "Completed", "Completed", None
            time.sleep(POLL_SECONDS)

    def _note_rank_pids(self, layouts: list[HostLayout]) -> None:
        """Learn the pid on this machine of every rank that started (its record in the host's ``output/ranks``
        names its pid in the host, which inside a host's PID namespace is the namespace's) and list them in the
        status record: `trainops status` shows, per rank, the pid to signal or debug from this machine."""
        namespaced = self._isolated and container.pid_namespaces_available()
        changed = False
        for layout in layouts:
            launcher = self._launchers.get(layout.name)
            if launcher is None:
                continue
            for record in read_records([str(layout.base_dir / "output" / "ranks")]):
                rank, pid, ticks = record.get("rank"), record.get("pid"), record.get("start_ticks")
                if record.get("state") != "running" or not isinstance(rank, int) or not isinstance(pid, int):
                    continue
                attempt = (layout.name, rank, pid, ticks)
                if attempt in self._ranks_tried:
                    continue
                self._ranks_tried.add(attempt)  # once: a rank killed keeps a "running" record
                namespace = pid_namespace_of(launcher.pid) if namespaced else None
                if namespaced and namespace is None:
                    continue
                found = host_pid(pid, ticks if isinstance(ticks, int) else None, namespace)
                if found is not None:
                    self._ranks[(layout.name, rank)] = {"host": layout.name, "rank": rank, "pid": found,
                                                        "pid_in_host": pid}
                    changed = True
        if changed and self._record:
            self._record["ranks"] = self._rank_list()
            status.write(self.job_dir, self._record)

    def _rank_list(self) -> list[dict[str, Any]]:
        return [self._ranks[key] for key in sorted(self._ranks, key=lambda key: (key[1], key[0]))]

    def _settle(self, codes: dict[str, int | None]) -> dict[str, int | None]:
        """After the first host fails, give the others a moment to end too (their ranks usually fail at once on the
        broken connection), so the root cause is chosen among every host's records, not from whichever launcher
        happened to exit first."""
        deadline = time.monotonic() + FAILURE_SETTLE_SECONDS
        while any(code is None for code in codes.values()) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            codes = {name: process.poll() for name, process in self._launchers.items()}
        return codes

    def _first_failed_host(self, layouts: list[HostLayout], codes: dict[str, int | None]) -> str:
        """The host whose failure came first across the job (the runtime's own rule over every host's rank records:
        a rank killed by a signal, else the earliest recorded failure); else the first launcher that failed."""
        failed = [name for name, code in codes.items() if code not in (None, 0)]
        cause = root_cause(read_records(str(layout.base_dir / "output" / "ranks") for layout in layouts), [])
        if cause is not None and cause.host in failed:
            return cause.host
        return failed[0]

    def _root_cause(self, layout: HostLayout, code: int) -> str:
        self._failed_host = layout.name

        try:  # bounded, a regular file only: the host's ranks could have left anything under that name
            text = read_failure_text(str(layout.failure_file)).strip()
        except OSError:
            text = ""
        if not text:
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            text = (f"the launcher of host {layout.name} {how} without writing a failure file"
                    + status.disk_full_note(layout.base_dir))
            if code > 0 and not self._script_started():
                text = BEFORE_SCRIPT + text  # the host failed to start (a launcher killed is a host lost, not this)
        return text[:FAILURE_REASON_LIMIT]

    def _script_started(self) -> bool:
        """Whether a rank of the job started (its wrapper, which runs the script, left a record on some host)."""
        return bool(read_records(str(Path(self.job_dir) / "hosts" / host / "output" / "ranks")
                                 for host in self._launchers))

    def _check_stop_request(self) -> bool:
        """Pass a stop asked for from another process (`control.request_stop`) on to the job; True when there is
        one."""
        reason = stop_requested(self.job_dir)
        if reason is not None:
            self.request_stop(reason)
        return reason is not None

    def _stop_all(self) -> int:
        """Stop every host still running: SIGTERM (each launcher passes it on), then, after the grace, the host is
        given up (its pipe closed: its launcher kills every process of the host and ends once none is left).
        Returns how many hosts had still not ended after that."""
        running = {name: p for name, p in self._launchers.items() if p.poll() is None}
        if not running:
            return 0
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
        given_up = [name for name, process in running.items() if process.poll() is None]
        for name in given_up:  # the host's launcher kills every process of the host, then ends
            os.close(self._controller_pipes.pop(name))
        deadline = time.monotonic() + HOST_END_SECONDS
        for name in given_up:
            try:
                running[name].wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("[trainops] host %s had not ended %g s after it was killed", name, HOST_END_SECONDS)
        return sum(process.poll() is None for process in running.values())

    def _finish_outputs(self, first_host: HostLayout, result: LocalJobResult) -> None:
        pack = (estimator_options.write_outputs_uncompressed if estimator_options.is_uncompressed(self.request)
                else pack_outputs)  # CompressionType NONE: the model's files, not model.tar.gz
        try:
            model, output = pack(self.request["OutputDataConfig"]["S3OutputPath"], self.job_name,
                                 first_host, self.job_dir, self.s3_factory)
        except OSError as error:
            result.status, result.secondary_status = "Failed", "Uploading"
            result.failure_reason = (f"could not write the model artifact: {error}; the model directory is kept in "
                                     f"{first_host.model_dir} (nothing was written under the archive's final name)")
            return
        result.model_artifact, result.output_artifact = model, output


def check_local_spec(spec: JobSpec) -> None:
    """Refuse what cannot run locally, before anything is laid out."""
    problems = dependency_problems(spec.dependencies or ())
    if spec.source_dir is not None and is_s3_source(spec.source_dir) and not spec.source_dir.endswith(".tar.gz"):
        problems.insert(0, Problem("source_dir", f"{spec.source_dir!r}: an s3:// source_dir names a tarball object "
                                                 "(s3://bucket/prefix/sourcedir.tar.gz), or give a local directory"))
    if problems:
        raise SpecError(problems)
