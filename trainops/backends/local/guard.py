"""The guard of a local job: a tiny process that outlives a controller killed outright and finishes its work.

`kill -9` or the OOM killer gives the controller (`trainops run`, an Airflow task process, the detached supervisor)
no chance to stop its hosts. So, when a job starts, the controller starts this guard (`python -m
trainops.backends.local.guard JOB_DIR`) in a session of its own, handing it:

- the read end of a pipe whose write end only the controller holds: end-of-file means the controller is gone, a
  `done` line before it means the controller finished the job itself. Over it the controller also tells the guard
  every process it has tracked (`record <json>` lines, `trainops.backends.local.tracking.JobProcesses.save`): the
  guard acts on that, never on `processes.json`, which anyone able to write the job directory could forge;
- copies of the controller's locked descriptors (the job's controller lock and its checkpoint directory's lock):
  `flock` locks belong to the open file, so they stay held until the guard exits too. A re-run or an Airflow retry
  therefore neither starts a second controller of the job nor a second job on the same checkpoint directory while
  anything of the job still runs.

When the controller dies without `done`, the guard stops every process of the job (`trainops.backends.local.
tracking`: the process tree recorded while it ran, and its marker), records the job Failed with what happened and
how many processes it stopped and how many could not be stopped, then exits, releasing the locks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

GRACE_SECONDS = 5.0
GUARD_LOG = "guard.log"


class Guard:
    """The controller's handle on its guard."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.pid = process.pid
        self._lock = threading.Lock()

    def tell(self, record: dict) -> None:
        """Pass the controller's record of the job's processes on (the guard keeps the latest)."""
        line = b"record " + json.dumps(record).encode("utf-8") + b"\n"
        stdin = self.process.stdin
        if stdin is None:
            return
        with self._lock:
            try:
                stdin.write(line)
                stdin.flush()
            except (OSError, ValueError):
                pass

    def done(self) -> None:
        """The job finished under its controller: the guard exits without touching anything."""
        with self._lock:
            try:
                assert self.process.stdin is not None  # the guard is started with a pipe on its stdin
                self.process.stdin.write(b"done\n")
                self.process.stdin.close()
            except (OSError, ValueError):
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_guard(job_dir: Path, locked_descriptors: list[int]) -> Guard | None:
    """Start the job's guard holding copies of `locked_descriptors`; None when it could not start (the job runs
    unguarded, as before: said in the guard log)."""
    from trainops.backends.local.processes import MARKER

    env = {key: value for key, value in os.environ.items() if key != MARKER}
    package_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    try:
        with open(job_dir / GUARD_LOG, "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "trainops.backends.local.guard", str(job_dir)],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, env=env,
                                       start_new_session=True, pass_fds=tuple(locked_descriptors), cwd="/")
    except OSError:
        return None
    return Guard(process)


def _log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n")
    sys.stderr.flush()


def take_over(job_dir: Path, reported: dict | None = None) -> None:
    """The controller is gone: stop the job's processes (those it ``reported`` and its marker)
    and record how the job ended."""
    from trainops.backends.local import status
    from trainops.backends.local.tracking import JobProcesses

    try:
        record = status.read_record(job_dir, job_dir.name)
    except Exception as error:  # noqa: BLE001 - a corrupt record must not stop the clean-up
        _log(f"the status record cannot be read ({error}); stopping what processes.json names")
        record = {}
    recorded = record.get("controller")
    controller: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    pid = controller.get("pid", record.get("controller_pid"))
    active = record.get("status") in status.ACTIVE
    reason = (f"the trainops process controlling this job (pid {pid}) ended without finishing it (killed "
              "outright: SIGKILL or the out-of-memory killer)")
    if active:
        status.write(job_dir, {**record, "status": "Stopping", "secondary_status": "Stopping",
                               "failure_reason": reason + "; its guard is stopping the job's processes"})
    processes = JobProcesses.load(job_dir, record, reported=reported or {})
    stopped, left = processes.stop(GRACE_SECONDS)
    _log(f"controller pid {pid} gone: {stopped} process(es) of the job stopped, {left} left")
    if active:
        reason += f"; its guard stopped the {stopped} process(es) of the job still running"
        if left:
            reason += f", {left} could not be stopped"
        try:
            (job_dir / "failure").write_text(reason, encoding="utf-8")
        except OSError:
            pass
        status.write(job_dir, {**record, "status": "Failed", "secondary_status": "Failed", "failure_reason": reason,
                               "ended": time.time(), "processes_left": left, "processes_stopped": stopped})


def main(argv: list[str]) -> int:
    job_dir = Path(argv[0])
    pending, reported = b"", None
    while True:
        try:
            chunk = os.read(0, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line == b"done":
                return 0
            if line.startswith(b"record "):
                try:
                    reported = json.loads(line[len(b"record "):])
                except ValueError:
                    pass
    take_over(job_dir, reported if isinstance(reported, dict) else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
