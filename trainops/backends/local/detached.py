"""Detached local jobs: `trainops run --backend local --no-wait`, and what the Airflow operator defers on.

`submit_detached` starts the job under a small supervisor process (`trainops.backends.local.supervisor`) that
belongs to nobody: not a child of the caller, in a session of its own. The caller gets the job's status record
back as soon as the supervisor has taken the job's controller lock and recorded itself, and may then exit; the job
goes on. Afterwards:

- `trainops.backends.local.status.read(job_name, workdir)` is the live status (InProgress while the supervisor
  holds the job's lock; Completed / Failed / Stopped at the end; Failed, with the processes still alive counted,
  when the supervisor died);
- `trainops logs NAME --follow`, `trainops status NAME` and `trainops stop NAME` work on it as on any local job.

Submitting a name that already has a record never starts a second copy: the record is returned as it is (running
or finished), and two callers racing on one new name get the same job.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainops.backends.hostfs import paths
from trainops.backends.hostfs.safe_fs import open_state_file, read_tail_bytes
from trainops.backends.local import status
from trainops.backends.local.job import check_local_spec
from trainops.errors import JobFailed, Problem, SpecError
from trainops.spec.job import JobSpec
from trainops.spec.loader import load_job_spec, parse_job_spec, resolve_relative_paths

START_TIMEOUT_SECONDS = 120.0
OPTIONS = ("processes_per_host", "channel_overrides", "checkpoint_key", "grace_seconds", "launcher",
           "image_python")
SUPERVISOR_LOG = "supervisor.log"


def _as_spec(spec: Any):
    if isinstance(spec, JobSpec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_job_spec(os.fspath(spec))
    return resolve_relative_paths(parse_job_spec(spec), Path.cwd().resolve())


def submit_detached(spec: Any, job_name: str, *, workdir: str | os.PathLike | None = None,
                    start_timeout: float = START_TIMEOUT_SECONDS, **local_options: Any) -> dict:
    """Start `spec` as local job `job_name` under a detached supervisor and return its status record once the
    supervisor has recorded itself; when a job of that name exists (running or finished), return its record
    instead of starting another.

    `spec`: a `JobSpec`, a mapping or a spec file. `local_options`: processes_per_host, channel_overrides,
    checkpoint_key, grace_seconds, launcher, image_python (as for `LocalJob`). Raises `SpecError` for bad input
    and `JobFailed` when the supervisor could not start (its log, `<job dir>/supervisor.log`, is quoted)."""
    unknown = sorted(set(local_options) - set(OPTIONS))
    if unknown:
        raise SpecError([Problem(name, f"not an option of a detached local job (known: {', '.join(OPTIONS)})")
                         for name in unknown])
    spec = _as_spec(spec)
    check_local_spec(spec)
    if status.exists(job_name, workdir):
        return status.read(job_name, workdir)
    paths.secure_root(workdir, create=True)
    job_dir = paths.own_directory(paths.job_dir(job_name, workdir), "job_name")
    request = {"spec": spec.model_dump(mode="json", by_alias=True, exclude_defaults=True) | {
                   "distribution": spec.dist.to_canonical(), "entry_point": spec.entry_point},
               "job_name": job_name, "workdir": str(Path(workdir).resolve()) if workdir else None,
               "options": local_options}
    lines, log_path = _start_supervisor(request, job_dir, start_timeout)
    if "started" in lines:
        return status.read(job_name, workdir)
    busy = [line for line in lines if line.startswith("busy ")]
    if busy:  # another caller started this job a moment ago: that one is the job
        deadline = time.monotonic() + start_timeout
        while not status.exists(job_name, workdir) and time.monotonic() < deadline:
            time.sleep(0.05)
        if status.exists(job_name, workdir):
            return status.read(job_name, workdir)
    errors = [line[len("error "):] for line in lines if line.startswith("error ")]
    raise JobFailed(f"the supervisor of local job {job_name} did not start: "
                    f"{errors[0] if errors else _tail(log_path) or 'no reason given'} (log: {log_path})")


def _start_supervisor(request: dict, job_dir: Path, timeout: float) -> tuple[list[str], Path]:
    log_path = job_dir / SUPERVISOR_LOG
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))

    with open(open_state_file(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as log:  # never via a link
        process = subprocess.Popen([sys.executable, "-m", "trainops.backends.local.supervisor"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                   start_new_session=True)
    assert process.stdin is not None and process.stdout is not None  # both piped above
    try:
        process.stdin.write(json.dumps(request).encode("utf-8"))
        process.stdin.close()
        lines = _read_handshake(process.stdout.fileno(), timeout)
    finally:
        process.stdout.close()
        process.wait()  # the first process exits as soon as it has forked the supervisor
    return lines, log_path


def _read_handshake(descriptor: int, timeout: float) -> list[str]:
    buffer, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(descriptor, 4096)
        if not chunk:
            break
        buffer += chunk
        if b"\nstarted\n" in b"\n" + buffer:
            break
    return buffer.decode("utf-8", "replace").splitlines()


def _tail(path: Path, limit: int = 800) -> str:
    try:  # the log's last part only, and only a regular file (`trainops.runtime.untrusted`)
        text = read_tail_bytes(path, 4 * limit).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return text[-limit:]
