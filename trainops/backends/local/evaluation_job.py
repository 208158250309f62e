"""A local evaluation as a job: a detached process of this machine that runs `run_evaluation` and leaves a status
record, so a caller that must not wait for it (a deferred Airflow task, whose worker gives its slot back) can start
it, look at it, stop it and read its result later, from another process.

Each evaluation job is a directory ``<state root>/evaluation-jobs/<name>/`` (mode 0700, its name checked like a
training job's): ``request.json`` (what to evaluate), ``status.json`` (``InProgress`` / ``Completed`` / ``Failed`` /
``Stopped``, the runner's pid and start time, the failure reason, the result) and ``output.log`` (the script's lines).
The runner is ``python -m trainops.backends.local.evaluation_job <dir>``, in a session of its own, so the worker that
started it may exit; it holds ``run.lock`` while it runs, and only a pid the kernel shows holding that lock through a
descriptor it opened at that path (`identity.holds_lock`) is ever signalled (a record names a pid, and records can be
forged); SIGTERM makes it stop the script's process group and record ``Stopped``. A record whose runner is gone
(killed) without a final status reads ``Failed``. Every file is written through `safe_fs` (never through a link
planted under its name). A name whose job runs or completed is re-attached to; one that failed or was stopped starts
again (the evaluation writes to the same output directory).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.locks import try_lock
from trainops.backends.hostfs.paths import checked_directory, child, secure_root
from trainops.backends.hostfs.safe_fs import open_state_file, read_bounded, write_atomically
from trainops.backends.local.evaluate import run_evaluation
from trainops.backends.local.identity import forget_hint, holds_lock, lock_holders
from trainops.errors import JobFailed, TrainopsError

ROOT_NAME = "evaluation-jobs"
#: A record without a runner pid this long after it was written: the runner never started.
START_GRACE_SECONDS = 60.0


class Stop(BaseException):
    """SIGTERM in the runner: unwinds `run_evaluation`, which stops the script's process group on the way."""


def jobs_root(workdir: str | os.PathLike[str] | None, create: bool = False) -> Path:
    root = secure_root(workdir, create=create)
    return checked_directory(root / ROOT_NAME, "workdir", create=create)


def job_path(name: str, workdir: str | os.PathLike[str] | None, create: bool = False) -> Path:
    return child(jobs_root(workdir, create=create), name, "job_name")


RUN_LOCK = "run.lock"  # held by the runner for as long as it runs
RECORD_LIMIT_BYTES = 16 * 1024 * 1024  # status.json (with the result's file list) and request.json


def _write(path: Path, value: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(value).encode("utf-8"))


def _runner(directory: Path, record: dict[str, Any]) -> int | None:
    """The record's runner pid if the kernel reports it holding the job's run lock (None: no runner runs)."""
    pid = record.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1 or pid == os.getpid():
        return None
    proven = holds_lock(pid, directory / RUN_LOCK)  # through a descriptor it opened at this path: not a hard link
    return pid if (pid in lock_holders(directory / RUN_LOCK) if proven is None else proven) else None


def _read_json(path: Path) -> dict[str, Any]:
    """A record of the job's directory, read as what a job may have replaced (bounded, a regular file only); a
    `JobFailed` saying what to do when it is not a JSON object."""
    try:
        record = json.loads(read_bounded(path, RECORD_LIMIT_BYTES, whole=True).decode("utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RecursionError) as error:
        raise JobFailed(f"{path} cannot be read ({getattr(error, 'strerror', None) or error}): "
                        f"{forget_hint(path.parent, 'this evaluation job', RUN_LOCK)}") from None
    if not isinstance(record, dict):
        raise JobFailed(f"{path} is not a JSON object: {forget_hint(path.parent, 'this evaluation job', RUN_LOCK)}")
    return record


def read(name: str, workdir: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """The job's status record (None: no such job); a runner that is gone without a final status reads Failed."""
    path = job_path(name, workdir) / "status.json"
    try:
        record = _read_json(path)
    except FileNotFoundError:
        return None
    if record.get("status") in ("InProgress", "Stopping"):
        written = record.get("written", 0)
        gone = (_runner(path.parent, record) is None if record.get("pid")
                else not isinstance(written, (int, float)) or time.time() - float(written) > START_GRACE_SECONDS)
        if gone and (reread := _read_json(path)).get("status") == record["status"]:
            record = {**reread, "status": "Failed",
                      "failure_reason": "the evaluation's runner exited without a result (killed?); see output.log"}
    return record


def start(name: str, workdir: str | os.PathLike[str] | None, arguments: dict[str, Any]) -> bool:
    """Start the evaluation ``name`` with `run_evaluation`'s ``arguments`` (JSON values), detached; False when a job
    of that name runs or completed (re-attached to instead)."""
    directory = job_path(name, workdir, create=True)
    directory.mkdir(mode=0o700, exist_ok=True)
    lock = try_lock(directory / "start.lock", name, patience=30.0)  # two tries starting at once start one runner
    if lock is None:
        raise JobFailed(f"another process is starting the evaluation job {name}; try again")
    try:
        existing = read(name, workdir)
        if existing is not None and existing.get("status") in ("InProgress", "Stopping", "Completed"):
            return False
        _write(directory / "request.json", arguments)
        _write(directory / "status.json", {"job_name": name, "status": "InProgress", "written": time.time(),
                                            "timeout": arguments.get("timeout")})

        with open(open_state_file(directory / "output.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as output:
            subprocess.Popen([sys.executable, "-m", "trainops.backends.local.evaluation_job", str(directory)],
                             stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                             start_new_session=True, close_fds=True)
        return True
    finally:
        lock.release()


def stop(name: str, workdir: str | os.PathLike[str] | None) -> str:
    """SIGTERM the job's runner (it stops the script, then records Stopped); what the job was doing."""
    record = read(name, workdir)
    for _ in range(50):  # a runner started a moment ago has not recorded its pid yet
        if record is None or record.get("pid") or record.get("status") != "InProgress":
            break
        time.sleep(0.1)
        record = read(name, workdir)
    if record is None:
        return "not started"
    if record.get("status") != "InProgress" or not record.get("pid"):
        return str(record.get("status"))
    runner = _runner(job_path(name, workdir), record)
    if runner is not None:
        try:
            os.killpg(runner, signal.SIGTERM)
        except ProcessLookupError:
            return str(record.get("status"))
    return "Stopping"


def run(directory: Path) -> int:
    """The runner: evaluate, then record how it ended (the script's lines go to this process's output)."""
    def stopped(signum: int, frame: Any) -> None:
        raise Stop()


    signal.signal(signal.SIGTERM, stopped)
    held = try_lock(directory / RUN_LOCK, f"evaluation runner {os.getpid()}")  # released when this process ends
    if held is None:
        print("trainops: another runner holds this evaluation job", flush=True)
        return 1
    status_path = directory / "status.json"
    record = _read_json(status_path)
    record.update(pid=os.getpid(), written=time.time())
    _write(status_path, record)
    arguments = _read_json(directory / "request.json")
    try:
        result = run_evaluation(**arguments, sink=lambda line, from_stderr: print(line, flush=True),
                                die_with_parent=True)
        record.update(status="Completed", result=result.to_dict())
    except Stop:
        record.update(status="Stopped", failure_reason="the evaluation was stopped")
    except (JobFailed, TrainopsError) as error:
        record.update(status="Failed", failure_reason=str(error))
    except Exception as error:  # noqa: BLE001 - any failure must reach the record, or it reads "killed"
        record.update(status="Failed", failure_reason=f"{type(error).__name__}: {error}")
    record["ended"] = time.time()
    _write(status_path, record)
    return 0 if record["status"] == "Completed" else 1


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
