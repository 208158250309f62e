"""The local backend's fault scenarios (issue 10, item 4), shared by test_reliability_faults.py (which checks the
stated bounds) and bench/reliability.py (which records the measured figures in RELIABILITY.md).

Each scenario runs `trainops run` on a real job of 2 simulated hosts (torchrun, one rank per host, the training
stand-in `scripts/faulty.py`), injects one fault, and returns a `FaultRun`: how long the job took to end after the
fault, which of its processes were left (by the job's marker, `job_processes(job_id)`, and by `pgrep -f` on the job
directory), the status record and the failure file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from trainops.backends.local.processes import job_processes

SCRIPT = Path(__file__).parent / "scripts" / "faulty.py"
#: Bounds the tests check (the job ends this long after the fault, at most); the bench measures the real figures.
FAILED_RANK_BOUND = 30.0
STOP_BOUND = 30.0
TIMEOUT_SLACK = 30.0  # a hung job ends within max_run + this


@dataclass
class FaultRun:
    """What one scenario measured."""

    name: str
    returncode: int
    seconds_to_end: float
    processes_left: list[int]
    pgrep_left: list[int]
    status: dict
    failure: str
    output: str
    extra: dict = field(default_factory=dict)
    since: str = "the fault"  # what seconds_to_end is counted from: "the fault" or "the start"


class RunningJob:
    """`trainops run` in a subprocess, its output collected line by line so a scenario can wait for a moment."""

    def __init__(self, root: Path, job_name: str, *, environment: dict | None = None, hosts: int = 2,
                 max_run: int = 600, output_path: Path | None = None, arguments: tuple[str, ...] = ()):
        self.root = root
        self.job_name = job_name
        self.arguments = arguments
        self.workdir = root / "work"
        self.output_path = output_path or root / "out"
        source = root / "src"
        source.mkdir(parents=True, exist_ok=True)
        shutil.copy(SCRIPT, source / "faulty.py")
        self.spec_path = root / f"{job_name}.yaml"
        self.spec_path.write_text(yaml.safe_dump({
            "name": "faulty", "entry_point": "faulty.py", "source_dir": str(source), "instance_type": "local",
            "instance_count": hosts, "distribution": {"type": "torch_distributed", "processes_per_host": 1},
            "output_path": str(self.output_path), "max_run": max_run,
            "environment": {"OMP_NUM_THREADS": "1", **(environment or {})}}))
        self.lines: list[str] = []
        self.read_done = False
        self._changed = threading.Condition()
        self.process: subprocess.Popen | None = None
        self.started = 0.0
        self.ended = 0.0

    def start(self) -> RunningJob:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "trainops.cli", "run", str(self.spec_path), "--workdir", str(self.workdir),
             "--job-name", self.job_name, *self.arguments], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.read_done = True
            self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        """The first match of `pattern` in the output, waiting up to `timeout` seconds for it."""
        compiled = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    found = compiled.search(line)
                    if found:
                        return found
                if self.read_done:
                    raise AssertionError(f"{pattern!r} never appeared; the job ended:\n" + self.output())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{pattern!r} did not appear in {timeout} s:\n" + self.output())
                self._changed.wait(min(remaining, 0.5))

    def finish(self, timeout: float = 300) -> int:
        """Wait for `trainops run` to exit; returns its exit code."""
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            self.ended = time.monotonic()
        with self._changed:  # the reader thread takes the last lines
            self._changed.wait_for(lambda: self.read_done, timeout=10)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def job_dir(self) -> Path:
        return self.workdir / "jobs" / self.job_name

    def status(self) -> dict:
        path = self.job_dir / "status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def wait_for_status(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record = self.status()
            if record.get("job_id"):
                return record
            time.sleep(0.1)
        raise AssertionError("no status record")

    def rank_pids(self, rank: int, timeout: float = 60) -> dict:
        """``{"host", "rank", "pid", "pid_in_host"}`` of `rank`, from `trainops status NAME --json` (its ``ranks``),
        once the controller has listed it."""
        deadline = time.monotonic() + timeout
        while not any(item.get("rank") == rank for item in self.status().get("ranks") or []):
            if time.monotonic() > deadline:
                raise AssertionError(f"rank {rank} never listed: {self.status()}")
            time.sleep(0.2)
        shown = subprocess.run([sys.executable, "-m", "trainops.cli", "status", self.job_name, "--backend", "local",
                                "--workdir", str(self.workdir), "--json"], capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        return next(item for item in json.loads(shown.stdout)["ranks"] if item["rank"] == rank)

    def result(self, name: str, fault_moment: float, **extra) -> FaultRun:
        """Wait for the end and measure; `fault_moment` (monotonic) is what the time to end counts from."""
        code = self.finish()
        record = self.status()
        failure_file = self.job_dir / "failure"
        return FaultRun(name=name, returncode=code, seconds_to_end=round(self.ended - fault_moment, 2),
                        processes_left=job_processes(record.get("job_id", "-")),
                        pgrep_left=pgrep(str(self.job_dir)), status=record,
                        failure=failure_file.read_text() if failure_file.exists() else "", output=self.output(),
                        extra=extra, since="the start" if fault_moment == self.started else "the fault")

    def kill(self) -> None:
        """Leave nothing behind even when a scenario fails half-way."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        record = self.status()
        if record.get("job_id"):
            signal_job(record["job_id"], signal.SIGKILL)


def signal_job(job_id: str, signum: int) -> None:
    """Signal every process carrying the job's marker (what a scenario does to the job from outside)."""
    for pid in job_processes(job_id):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def pgrep(pattern: str) -> list[int]:
    """Pids whose command line contains `pattern` (pgrep -f, fixed string), never this process."""
    completed = subprocess.run(["pgrep", "-f", re.escape(pattern)], capture_output=True, text=True, check=False)
    return [int(pid) for pid in completed.stdout.split() if int(pid) != os.getpid()]


def launcher_pid(job_id: str, host: str) -> int:
    """The pid of the runtime launcher of simulated host `host` in the job with marker `job_id`.

    Found by its working directory, `<job dir>/hosts/<host>`, where the controller starts it: inside the host's
    mount namespace SAGEMAKER_BASE_DIR is /opt/ml for every host, but the directory a process was started in stays
    that host's own directory (the kernel names it from the mount it was reached through, the same in any mount
    namespace copied from ours)."""
    seen = []
    for pid in job_processes(job_id):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            directory = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        seen.append((pid, directory, b" ".join(command[:4]).decode(errors="replace")))
        if Path(directory).parts[-2:] == ("hosts", host) and command[1:4] == [b"-m", b"trainops.runtime", b"launch"]:
            return pid
    raise AssertionError(f"no launcher of host {host} in job {job_id}; the job's processes: {seen}")


class CannotMakeReadOnly(RuntimeError):
    """This machine cannot make a directory read-only for root (neither chattr nor a read-only tmpfs mount works)."""


def _root_read_only_commands(path: Path) -> tuple[list[str], list[str]]:
    """How root makes `path` unwritable here: chattr +i where the file system supports it, else a read-only tmpfs
    mounted over it (a real "Read-only file system"). Returns the commands that do and undo it."""
    attempts = [(["chattr", "+i", str(path)], ["chattr", "-i", str(path)]),
                (["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], ["umount", str(path)])]
    reasons = []
    for make, undo in attempts:
        try:
            made = subprocess.run(make, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            reasons.append(f"{make[0]} is not installed")
            continue
        if made.returncode == 0:
            return make, undo
        reasons.append(f"{make[0]}: {made.stderr.strip()}")
    raise CannotMakeReadOnly(f"cannot make {path} read-only: {'; '.join(reasons)}")


@contextmanager
def read_only(path: Path):
    """Make a directory unwritable, even for root (chattr +i, else a read-only tmpfs over it; chmod for other
    users), and undo it afterwards."""
    undo = None
    if os.geteuid() == 0:
        _, undo = _root_read_only_commands(path)
    else:
        path.chmod(0o555)
    try:
        yield path
    finally:
        if undo:
            subprocess.run(undo, check=False)
        else:
            path.chmod(0o755)


def guarded(job: RunningJob):
    """Context: the job is killed outright if the scenario fails before it ends."""
    @contextmanager
    def guard():
        try:
            yield job
        finally:
            job.kill()
    return guard()


# --- the scenarios -------------------------------------------------------------------------------------------------

def rank_exits_non_zero(root: Path) -> FaultRun:
    job = RunningJob(root, "fault-exit", environment={"FAULT": "exit:1"}).start()
    with guarded(job):
        job.wait_for(r"rank 1 fails on purpose")
        return job.result("a rank exits non-zero", time.monotonic())


def rank_is_sigkilled(root: Path) -> FaultRun:
    """The rank prints its pid as its host sees it (inside the host's PID namespace, the namespace's, as in a
    container); the pid to signal from this machine is the one `trainops status` lists for it, as a user finds it."""
    job = RunningJob(root, "fault-kill").start()
    with guarded(job):
        logged = int(job.wait_for(r"started rank 1 pid (\d+)").group(1))
        job.wait_for(r"step 3\b")
        listed = job.rank_pids(1)
        assert listed["pid_in_host"] == logged and listed["host"] == "algo-2", (listed, logged)
        os.kill(listed["pid"], signal.SIGKILL)
        return job.result("a rank is SIGKILLed", time.monotonic(), pid=listed["pid"], pid_in_host=logged)


def rank_hangs(root: Path, max_run: int = 8) -> FaultRun:
    job = RunningJob(root, "fault-hang", environment={"FAULT": "hang:1"}, max_run=max_run).start()
    with guarded(job):
        job.wait_for(r"rank 1 hangs")
        run = job.result("a rank hangs (max_run stops it)", job.started, max_run=max_run)
        run.extra["overshoot_seconds"] = round(run.seconds_to_end - max_run, 2)
        return run


def launcher_of_host_2_dies(root: Path) -> FaultRun:
    job = RunningJob(root, "fault-launcher").start()
    with guarded(job):
        job.wait_for(r"step 3\b")
        pid = launcher_pid(job.wait_for_status()["job_id"], "algo-2")
        os.kill(pid, signal.SIGKILL)
        return job.result("the launcher of host 2 is SIGKILLed", time.monotonic(), pid=pid)


def spot_sigterm_then_rerun(root: Path, every: int = 5) -> tuple[FaultRun, FaultRun]:
    """SIGTERM to every process of the job (as a spot interruption stops the container), then the same spec again,
    asked to resume from the stopped job's checkpoints (a new job name otherwise starts afresh)."""
    environment = {"STEPS": "40", "STEP_SECONDS": "0.15", "CHECKPOINT_EVERY": str(every)}
    job = RunningJob(root, "spot-1", environment=environment).start()
    with guarded(job):
        job.wait_for(rf"checkpoint {2 * every}\b")
        job.wait_for(rf"step {2 * every + 2}\b")
        job_id = job.wait_for_status()["job_id"]
        moment = time.monotonic()
        signal_job(job_id, signal.SIGTERM)
        os.killpg(job.process.pid, signal.SIGTERM)
        stopped = job.result("the whole job is SIGTERMed", moment)
    reached = max(int(found) for found in re.findall(r"^\[algo-1 rank 0\] step (\d+)$", stopped.output, re.M))
    again = RunningJob(root, "spot-2", environment=environment, arguments=("--resume-from", "spot-1")).start()
    with guarded(again):
        resumed = int(again.wait_for(r"resumed at step (\d+)").group(1))
        rerun = again.result("re-run after SIGTERM", again.started)
    archive = rerun.status.get("model_artifact")
    trained = None
    if archive:
        with tarfile.open(archive) as tar:
            trained = json.load(tar.extractfile("model.json"))["steps"]
    stopped.extra.update(reached_step=reached, resumed_step=resumed, steps_lost=reached - resumed,
                         checkpoint_every=every, rerun_status=rerun.status.get("status"),
                         rerun_seconds=rerun.seconds_to_end, model_steps=trained)
    rerun.extra["model_steps"] = trained
    return stopped, rerun


def output_read_only_from_the_start(root: Path) -> FaultRun:
    output = root / "out"
    output.mkdir(parents=True)
    with read_only(output):
        job = RunningJob(root, "readonly-start", environment={"STEPS": "5"}, output_path=output).start()
        with guarded(job):
            run = job.result("the output path is read-only (from the start)", job.started)
        run.extra["entries_in_output"] = sorted(str(path.relative_to(output)) for path in output.rglob("*"))
    return run


def output_read_only_mid_job(root: Path) -> FaultRun:
    output = root / "out"
    job = RunningJob(root, "readonly-mid", environment={"STEPS": "15", "STEP_SECONDS": "0.2"},
                     output_path=output).start()
    with guarded(job):
        job.wait_for(r"step 2\b")
        target = output / "readonly-mid" / "output"
        while not target.exists():  # the deepest existing directory of the archive's place
            target = target.parent
        with read_only(target):
            job.wait_for(r"rank 0 done")
            moment = time.monotonic()
            run = job.result("the output path becomes read-only mid-job", moment)
        run.extra["entries_in_output"] = sorted(str(path.relative_to(output)) for path in output.rglob("*"))
        model = job.job_dir / "hosts" / "algo-1" / "model" / "model.json"
        run.extra["model_kept"] = model.exists()
    return run


SCENARIOS = [rank_exits_non_zero, rank_is_sigkilled, rank_hangs, launcher_of_host_2_dies,
             output_read_only_from_the_start, output_read_only_mid_job]
