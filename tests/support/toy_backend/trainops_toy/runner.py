"""What runs a toy job: the job's entry point as a child process, its output in the job's log, its state in
``status.json`` (written whole, then renamed). SIGTERM stops the child and records the job Stopped.

Run as ``python -m trainops_toy.runner JOB_DIR`` in a session of its own, so the job outlives whoever started it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def write(job: Path, **changes: object) -> None:
    path = job / "status.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update(changes)
    temporary = job / f".status.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(record))
    os.replace(temporary, path)


def main(job: Path) -> int:
    settings = json.loads((job / "job.json").read_text())
    model_dir = job / "model"
    model_dir.mkdir(exist_ok=True)
    environment = {**os.environ, **settings.get("environment", {}), "TOY_MODEL_DIR": str(model_dir),
                   "TOY_COLOUR": settings.get("colour") or "",
                   "TOY_JOB_NAME": job.name, "TOY_JOB_DIR": str(job),
                   **{f"TOY_CHANNEL_{name.upper()}": path for name, path in settings.get("channels", {}).items()}}
    with open(job / "output.log", "ab", buffering=0) as log:
        child = subprocess.Popen([sys.executable, "-u", settings["entry_point"]], cwd=settings["source_dir"],
                                 stdout=log, stderr=subprocess.STDOUT, env=environment)
        stopped: list[str] = []

        def stop(signum: int, _frame: object) -> None:
            stopped.append(signal.Signals(signum).name)
            child.terminate()

        signal.signal(signal.SIGTERM, stop)
        write(job, status="InProgress", runner_pid=os.getpid(), child_pid=child.pid, started=time.time())
        code = child.wait()
    ended = {"ended": time.time(), "exit_code": code}
    if stopped:
        reason = job / "stop-reason"  # why the backend stopped it (a guard's sentence), when it said
        write(job, status="Stopped", failure_reason=reason.read_text() if reason.exists() else f"stopped by {stopped[0]}",
              **ended)
    elif code == 0:
        write(job, status="Completed", model_artifact=str(model_dir), **ended)
    else:
        # The toy's own words: its vocabulary's rule (the state Failed) classifies it, not a neutral text rule.
        write(job, status="Failed", failure_reason=f"the entry point {settings['entry_point']} ended with exit "
                                                   f"status {code}", **ended)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
