"""Running a launch plan: start it, forward stop signals, watch it, leave no process behind, report the outcome.

The plan's command runs without a shell, in a new session (its own process group), with the parent's environment
plus the plan's additions, and with a parent-death signal so it cannot outlive a launcher that is killed outright.
torchrun and Open MPI start each rank as the leader of its own process group, so the launcher also signals every rank
recorded in the record directories (pid checked against its start time), and after the job ends it sweeps: any rank
still alive gets SIGTERM, then SIGKILL.

SIGTERM and SIGINT to the launcher are forwarded to the command and to every rank; after ``stop_grace_seconds`` what is
left is killed; the failure file then says ``reason: stopped`` and the launch exits 1. The same happens with
``reason: timeout`` when ``max_run_seconds`` passes.

A TensorFlow parameter-server plan also has a parameter-server process (:mod:`trainops.runtime.parameter_server`),
started before the worker in a session of its own, in the order AWS's TensorFlow toolkit uses: after a successful
worker, a host other than the master keeps serving until the master's worker address closes, then its parameter
server is stopped (SIGTERM, SIGKILL after a few seconds). A parameter server that exits while the worker runs fails
the host (the worker is stopped): the job could not train without it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainops.runtime import failure as failures
from trainops.runtime import mpi_coordination as coordination
from trainops.runtime import records
from trainops.runtime.environment import child_environment
from trainops.runtime.plan import LaunchPlan
from trainops.runtime.processes import (
    become_subreaper,
    is_alive,
    parent_death_signal_setter,
    process_limit_note,
    reap_orphans,
    signal_group,
    signal_process,
)

DEFAULT_STOP_GRACE_SECONDS = 30.0
_POLL_SECONDS = 0.1
_SWEEP_SECONDS = 3.0
_STDERR_KEEP_BYTES = 64 * 1024
_PARAMETER_SERVER_GRACE_SECONDS = 5.0
#: How often a worker host checks whether the master's worker is still up: the toolkit's 10 s on SageMaker; a local
#: simulation checks each second.
MASTER_POLL_SECONDS = 10.0
LOCAL_MASTER_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Outcome:
    """How a launch ended on this host: the launcher's exit code (0 or 1), the failure it reported, and the text
    of this host's failure file (which may have been written first by someone else)."""

    exit_code: int
    failure: failures.Failure | None = None
    failure_text: str = ""


class _StderrRelay(threading.Thread):
    """Copies a child's stderr to ours and keeps the last part, to read mpirun's report of the failed rank."""

    def __init__(self, stream: Any):
        super().__init__(name="trainops-mpirun-stderr", daemon=True)
        self.stream = stream
        self.kept = b""

    def run(self) -> None:
        destination = sys.stderr.fileno()
        while True:
            chunk = os.read(self.stream.fileno(), 65536)
            if not chunk:
                break
            try:
                os.write(destination, chunk)
            except OSError:
                pass
            self.kept = (self.kept + chunk)[-_STDERR_KEEP_BYTES:]

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


def _log(message: str) -> None:
    print(f"trainops: {message}", file=sys.stderr, flush=True)


class Launch:
    """One execution of a plan on this host. ``run()`` returns the :class:`Outcome`; the object is single-use."""

    def __init__(self, plan: LaunchPlan, parent_env: Mapping[str, str] | None = None,
                 max_run_seconds: float | None = None, stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS,
                 wait_seconds: float | None = None, collect_orphans: bool = False):
        self.plan = plan
        self.parent_env = dict(os.environ if parent_env is None else parent_env)
        self.max_run_seconds = max_run_seconds
        self.stop_grace_seconds = stop_grace_seconds
        if wait_seconds is None:
            wait_seconds = coordination.LOCAL_WAIT_SECONDS if plan.local else coordination.DEFAULT_WAIT_SECONDS
        self.wait_seconds = wait_seconds
        self.record_dirs = [plan.record_dir]
        self.child: subprocess.Popen | None = None
        self.stop_signal: int | None = None
        self.timed_out = False
        self.started = time.monotonic()
        self.kill_at: float | None = None
        self.spawn_error = ""
        self.parameter_server: subprocess.Popen | None = None
        self.parameter_server_failure = ""
        # Only a process that does nothing but this launch may collect orphans: reaping reaches every exited child.
        self.collect_orphans = collect_orphans

    # --- stopping ---------------------------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """Whether a stop was asked for (a signal) or the run time is over."""
        if self.stop_signal is None and self.max_run_seconds is not None \
                and time.monotonic() - self.started > self.max_run_seconds:
            self.timed_out = True
            self._begin_stop(signal.SIGTERM)
        return self.stop_signal is not None

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._begin_stop(signum)

    def request_stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop the launch as SIGTERM to the launcher would (forwarded to every rank; reported as stopped)."""
        self._begin_stop(signum)

    def _begin_stop(self, signum: int) -> None:
        if self.stop_signal is not None:
            return
        self.stop_signal = int(signum)
        self.kill_at = time.monotonic() + self.stop_grace_seconds
        self._signal_everything(int(signum))

    def _signal_everything(self, signum: int) -> None:
        if self.child is not None and self.child.poll() is None:
            signal_group(self.child.pid, signum)
        if self.parameter_server is not None and self.parameter_server.poll() is None:
            signal_group(self.parameter_server.pid, signum)
        for record in records.read_records(self.record_dirs):
            if record.get("state") == "running":
                signal_process(int(record["pid"]), signum, record.get("start_ticks"))

    def _alive_ranks(self) -> list[dict[str, Any]]:
        return [record for record in records.read_records(self.record_dirs)
                if record.get("state") == "running" and is_alive(int(record["pid"]), record.get("start_ticks"))]

    def sweep(self) -> None:
        """Make sure no rank of this launch is left: SIGTERM to any still alive, SIGKILL after a few seconds."""
        if self.child is not None:
            signal_group(self.child.pid, signal.SIGKILL)
        alive = self._alive_ranks()
        for record in alive:
            signal_process(int(record["pid"]), signal.SIGTERM, record.get("start_ticks"))
        deadline = time.monotonic() + _SWEEP_SECONDS
        while alive and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
            alive = self._alive_ranks()
        for record in alive:
            signal_process(int(record["pid"]), signal.SIGKILL, record.get("start_ticks"))
        self._reap(wait_seconds=1.0 if alive else 0.2)

    def _reap(self, wait_seconds: float = 0.0) -> None:
        """Collect orphans handed to this launcher (it is their subreaper), waiting a little for the last ones."""
        if not self.collect_orphans:
            return
        keep = {process.pid for process in (self.child, self.parameter_server)
                if process is not None and process.returncode is None}
        deadline = time.monotonic() + wait_seconds
        while True:
            reap_orphans(keep)
            if time.monotonic() >= deadline:
                return
            time.sleep(_POLL_SECONDS)

    # --- running ----------------------------------------------------------------------------------------------

    def _prepare(self) -> None:
        for stale in (self.plan.failure_path, self.plan.success_path):
            try:
                os.remove(stale)
            except FileNotFoundError:
                pass
        records.clear_records(self.plan.record_dir)
        os.makedirs(self.plan.record_dir, exist_ok=True)
        for name in ("SM_MODEL_DIR", "SM_OUTPUT_DATA_DIR"):
            if self.plan.env.get(name):
                os.makedirs(self.plan.env[name], exist_ok=True)

    def run(self) -> Outcome:
        """Run the plan to its end and report (failure or success file written, outcome returned)."""
        self._prepare()
        if self.collect_orphans:
            become_subreaper()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            # Signal handlers can only be set from the main thread; a caller running a launch in another thread
            # stops it through request_stop().
            previous = {number: signal.signal(number, self._on_signal) for number in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.plan.mode == "mpi_worker":
                return self._run_mpi_worker()
            if self.plan.mode == "mpirun":
                return self._run_mpi_master()
            if self.plan.parameter_server:
                return self._run_with_parameter_server()
            return self._finish(self._run_child())
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _spawn(self, capture_stderr: bool) -> tuple[subprocess.Popen, _StderrRelay | None]:
        _log(f"{self.plan.mode} on host {self.plan.current_host}: {' '.join(self.plan.argv)}")
        child = subprocess.Popen(
            self.plan.argv, cwd=self.plan.cwd, env=child_environment(self.parent_env, self.plan.env),
            start_new_session=True, preexec_fn=parent_death_signal_setter(signal.SIGTERM),
            stderr=subprocess.PIPE if capture_stderr else None)
        relay = None
        if capture_stderr:
            relay = _StderrRelay(child.stderr)
            relay.start()
        return child, relay

    def _run_child(self, capture_stderr: bool = False) -> tuple[int, str]:
        """Start the plan's command and wait for it, watching for stops; returns (exit status, captured stderr)."""
        if self.should_stop():
            return 1, ""
        try:
            self.child, relay = self._spawn(capture_stderr)
        except OSError as error:
            self.spawn_error = (f"cannot start {self.plan.argv[0]} on host {self.plan.current_host}: "
                                f"{process_limit_note(error) or error}")
            _log(self.spawn_error)
            return 127, ""
        if self.stop_signal is not None:  # a stop that arrived while starting
            self._signal_everything(self.stop_signal)
        polls = 0
        while self.child.poll() is None:
            time.sleep(_POLL_SECONDS)
            polls += 1
            if polls % 20 == 0:
                self._reap()
            self.should_stop()
            self._watch_parameter_server()
            if self.kill_at is not None and time.monotonic() > self.kill_at:
                signal_group(self.child.pid, signal.SIGKILL)
                self._signal_everything(signal.SIGKILL)
                self.kill_at = time.monotonic() + self.stop_grace_seconds
        if relay is not None:
            relay.join(2.0)
        self.sweep()
        return self.child.returncode, relay.text() if relay else ""

    # --- outcomes ---------------------------------------------------------------------------------------------

    def _stop_failure(self) -> failures.Failure:
        host = self.plan.current_host
        if self.timed_out:
            return failures.Failure(
                reason="timeout", host=host, time=time.time(), signal="SIGTERM",
                summary=f"the job ran longer than its limit of {self.max_run_seconds:g} s and was stopped on host "
                        f"{host}")
        name = signal.Signals(self.stop_signal).name if self.stop_signal else "SIGTERM"
        return failures.Failure(reason="stopped", host=host, time=time.time(), signal=name,
                                exit_code=128 + (self.stop_signal or signal.SIGTERM),
                                summary=f"the job was stopped by {name} on host {host}")

    def _observed(self, status: int, captured: str) -> list[failures.Failure]:
        host = self.plan.current_host
        if self.plan.mode == "torchrun":
            return [failures.failure_from_observation(item, host, "torchrun")
                    for item in records.read_observed(self.plan.record_dir)]
        if self.plan.mode == "mpirun":
            report = coordination.parse_mpirun_report(captured)
            if report is None:
                return []
            per_host = max(1, self.plan.processes_per_host)
            index = min(report["rank"] // per_host, len(self.plan.hosts) - 1)
            report.update(host=self.plan.hosts[index], local_rank=report["rank"] % per_host, timestamp=time.time())
            return [failures.failure_from_observation(report, host, "mpirun")]
        return [failures.failure_from_observation(
            {"rank": self.plan.node_rank, "local_rank": 0, "exit_code": status, "timestamp": time.time()},
            host, "launcher")]

    def _failure_for(self, status: int, captured: str) -> failures.Failure | None:
        if self.stop_signal is not None:
            return self._stop_failure()
        if self.parameter_server_failure:
            return failures.Failure(reason="error", host=self.plan.current_host, exit_code=status or 1,
                                    time=time.time(), summary=self.parameter_server_failure, source="launcher")
        if self.spawn_error:
            return failures.Failure(reason="error", host=self.plan.current_host, exit_code=status, time=time.time(),
                                    summary=self.spawn_error, source="launcher")
        rank_records = records.read_records(self.record_dirs)
        unfinished = [r for r in rank_records if r.get("state") != "exited" or r.get("exit_code")]
        if status == 0 and not unfinished:
            return None
        found = failures.root_cause(rank_records, self._observed(status, captured) if status else [])
        if found is None:
            reason, code, name = failures.classify_exit(status or 1)
            launcher = os.path.basename(self.plan.argv[0]) if self.plan.argv else "launcher"
            found = failures.Failure(
                reason=reason, host=self.plan.current_host, exit_code=code, signal=name, time=time.time(),
                summary=f"{launcher} exited with code {status} on host {self.plan.current_host} and no rank "
                        "recorded a failure", source="launcher")
        return failures.with_tail(found, self.record_dirs, rank_records)

    def _report(self, failure: failures.Failure | None) -> Outcome:
        if failure is None:
            failures.write_success(self.plan.success_path)
            _log(f"all ranks on host {self.plan.current_host} exited 0")
            return Outcome(exit_code=0)
        text = failures.render_failure(failure)
        if not failures.write_once(self.plan.failure_path, text):
            try:
                text = failures.read_failure_text(self.plan.failure_path)
            except OSError:
                pass  # not a file trainops can read back (a FIFO, a link): its own text stands
        _log(f"job failed: {text.splitlines()[0] if text else failure.first_line()}")
        _log(f"failure file: {self.plan.failure_path}")
        return Outcome(exit_code=1, failure=failure, failure_text=text)

    def _finish(self, result: tuple[int, str]) -> Outcome:
        status, captured = result
        return self._report(self._failure_for(status, captured))

    # --- TensorFlow parameter servers ----------------------------------------------------------------------------

    def _run_with_parameter_server(self) -> Outcome:
        """Start this host's parameter server, run the worker, wait for the master where the toolkit does, stop the
        parameter server, report."""
        argv = list(self.plan.parameter_server)
        _log(f"parameter server on host {self.plan.current_host}: {' '.join(argv)}")
        env = dict(self.plan.env)
        env.update(self.plan.parameter_server_env)
        try:
            self.parameter_server = subprocess.Popen(
                argv, cwd=self.plan.cwd, env=child_environment(self.parent_env, env), start_new_session=True,
                preexec_fn=parent_death_signal_setter(signal.SIGTERM))
        except OSError as error:
            return self._report(failures.Failure(
                reason="error", host=self.plan.current_host, exit_code=127, time=time.time(), source="launcher",
                summary=f"cannot start the parameter server on host {self.plan.current_host}: {error}"))
        try:
            result = self._run_child()
            if result[0] == 0 and self.plan.wait_for_master and not self.parameter_server_failure:
                self._wait_for_master_to_finish(self.plan.wait_for_master)
        finally:
            self._stop_parameter_server()
        return self._finish(result)

    def _watch_parameter_server(self) -> None:
        """A parameter server that ends while the worker runs fails the host: the worker is stopped."""
        server = self.parameter_server
        if server is None or self.parameter_server_failure or server.poll() is None:
            return
        self.parameter_server_failure = (f"the parameter server on host {self.plan.current_host} exited with code "
                                         f"{server.returncode} while the worker was running (see its output above)")
        _log(self.parameter_server_failure)
        if self.child is not None and self.child.poll() is None:
            self._signal_everything(signal.SIGTERM)
            if self.kill_at is None:
                self.kill_at = time.monotonic() + self.stop_grace_seconds

    def _wait_for_master_to_finish(self, address: str) -> None:
        """Keep this host's parameter server up while the master's worker still accepts connections (the toolkit
        polls the master's port 2222 the same way), unless the launch is stopped."""
        host, _, port = address.rpartition(":")
        pause = LOCAL_MASTER_POLL_SECONDS if self.plan.local else MASTER_POLL_SECONDS
        told = False
        while not self.should_stop():
            self._watch_parameter_server()
            if self.parameter_server_failure or not _accepts_connections(host, int(port)):
                return
            if not told:
                _log(f"the master's worker ({address}) is still up: host {self.plan.current_host} keeps its "
                     "parameter server until it is done")
                told = True
            time.sleep(pause)

    def _stop_parameter_server(self) -> None:
        server = self.parameter_server
        if server is None:
            return
        if server.poll() is None:
            signal_group(server.pid, signal.SIGTERM)
            try:
                server.wait(_PARAMETER_SERVER_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                signal_group(server.pid, signal.SIGKILL)
                server.wait()
        # Whatever the server started in its session goes with it.
        signal_group(server.pid, signal.SIGKILL)
        _log(f"parameter server on host {self.plan.current_host} stopped")

    # --- mpirun: master and workers -----------------------------------------------------------------------------

    def _run_mpi_master(self) -> Outcome:
        coordinator: coordination.MasterCoordinator | coordination.MeetingDirectory | None = None
        try:
            if self.plan.local or self.plan.meeting_dir:
                coordinator = (coordination.MeetingDirectory(self.plan.meeting_dir) if self.plan.meeting_dir
                               else coordination.MasterCoordinator(self.plan.coordination))
                workers = coordinator.wait_for(self.plan.wait_for_hosts, self.should_stop, self.wait_seconds)
                host_env_dir = self.plan.env["TRAINOPS_HOST_ENV_DIR"]
                coordination.write_host_environment(host_env_dir, self.plan.current_host, self.plan.env)
                for registration in workers.values():
                    coordination.write_host_environment(host_env_dir, registration.host, registration.env)
                    self.record_dirs.append(registration.record_dir)
            elif self.plan.wait_for_hosts:
                coordination.start_sshd()
                coordination.wait_for_ssh(self.plan.wait_for_hosts, self.should_stop, self.wait_seconds)
            outcome = self._finish(self._run_child(capture_stderr=True))
        except InterruptedError:
            outcome = self._report(self._stop_failure())
        except coordination.CoordinationError as error:
            outcome = self._report(failures.Failure(reason="error", host=self.plan.current_host, time=time.time(),
                                                    summary=str(error), source="launcher"))
        if coordinator is not None:
            coordinator.finish({"exit_code": outcome.exit_code, "failure": outcome.failure_text})
        return outcome

    def _run_mpi_worker(self) -> Outcome:
        try:
            if self.plan.local or self.plan.meeting_dir:
                if self.plan.meeting_dir:
                    meeting = coordination.MeetingDirectory(self.plan.meeting_dir)
                    meeting.register(self.plan.current_host, self.plan.record_dir, self.plan.env)
                else:
                    connection = coordination.register_with_master(
                        self.plan.coordination, self.plan.current_host, self.plan.record_dir, self.plan.env,
                        self.should_stop, self.wait_seconds)
                _log(f"host {self.plan.current_host} registered with the master host {self.plan.master_host}; "
                     "its ranks run under the master's mpirun")
                result = (meeting.wait_for_outcome(self.should_stop) if self.plan.meeting_dir
                          else coordination.wait_for_outcome(connection, self.should_stop))
                self.sweep()
                return self._worker_outcome(result)
            _log(f"host {self.plan.current_host} waits for mpirun from {self.plan.master_host}")
            if coordination.start_sshd() is None:
                _log(f"no ssh daemon ({coordination.SSHD}) on this image: mpirun cannot reach this host")
            coordination.wait_for_daemon(self.should_stop)
            return self._report(self._local_rank_failure())
        except InterruptedError:
            self.sweep()
            return self._report(self._stop_failure())
        except coordination.CoordinationError as error:
            return self._report(failures.Failure(reason="error", host=self.plan.current_host, time=time.time(),
                                                 summary=str(error), source="launcher"))

    def _worker_outcome(self, result: dict[str, Any] | None) -> Outcome:
        if result is None:
            return self._report(failures.Failure(
                reason="error", host=self.plan.current_host, time=time.time(), source="launcher",
                summary=f"the master host {self.plan.master_host} went away without reporting how the job ended"))
        if int(result.get("exit_code", 1)) == 0:
            return self._report(None)
        text = str(result.get("failure") or "")
        if text and failures.write_once(self.plan.failure_path, text):
            _log(f"job failed: {text.splitlines()[0]}")
            return Outcome(exit_code=1, failure=None, failure_text=text)
        return self._report(failures.Failure(reason="error", host=self.plan.current_host, time=time.time(),
                                             summary="the job failed on the master host", source="launcher"))

    def _local_rank_failure(self) -> failures.Failure | None:
        rank_records = records.read_records(self.record_dirs)
        found = failures.root_cause(rank_records, [])
        if found is not None:
            return failures.with_tail(found, self.record_dirs, rank_records)
        if any(r.get("state") != "exited" for r in rank_records):
            return failures.Failure(reason="stopped", host=self.plan.current_host, time=time.time(),
                                    summary=f"the ranks on host {self.plan.current_host} were stopped: the job "
                                            f"failed on another host (see {self.plan.master_host}'s failure file)")
        return None


def _accepts_connections(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def execute(plan: LaunchPlan, parent_env: Mapping[str, str] | None = None, max_run_seconds: float | None = None,
            stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS, collect_orphans: bool = False) -> Outcome:
    """Run a plan on this host and report its outcome (see the module text). Writes ``output/success`` or
    ``output/failure``; returns the :class:`Outcome` whose ``exit_code`` the CLI exits with. ``collect_orphans``
    (the CLI's choice) makes this process the subreaper of everything the launch starts and reaps what is orphaned:
    only for a process that runs nothing else."""
    return Launch(plan, parent_env, max_run_seconds, stop_grace_seconds, collect_orphans=collect_orphans).run()

