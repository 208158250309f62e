"""Issue 39, class 3: liveness and identity come from the lock that is held, by the process that holds it.

- A forged record whose lock file is a hard link to another running job's lock (same inode, so `/proc/locks` and
  any inode match name that job's controller): `trainops stop` of the forged job must not kill the other one.
- The controller killed while one host's launcher cannot end (stopped with SIGSTOP, as one stuck in the kernel would
  be): the launcher still holds a copy of the job's lock, yet the job reads Failed at once, and a re-run of its name
  runs (under the next name) instead of following it forever.
- A detached job whose supervisor (its controller) is killed with -9 reads Failed, whatever its hosts do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from local_breaks import TRAINOPS, cli

from trainops.backends.local import identity
from trainops.runtime.processes import is_alive, stat_fields

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

# Runs until its flag file is removed (each host checks it), printing a line a second.
SCRIPT = """import os, time
flag = os.environ["FLAG"]
print("running", flush=True)
while os.path.exists(flag):
    time.sleep(0.2)
print("done", flush=True)
"""


def _spec(directory: Path, flag: Path, hosts: int = 1) -> Path:
    source = directory / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(SCRIPT)
    spec = directory / "job.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: lock-identity
        entry_point: train.py
        source_dir: src
        instance_type: ml.m5.large
        instance_count: {hosts}
        output_path: out
        environment: {{FLAG: "{flag}"}}
        """))
    return spec


def _wait_for(condition, what: str, timeout: float = 120.0):
    """Poll ``condition`` until it returns something true (what the job does next is the condition, not a delay)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _record(home: Path, name: str) -> dict:
    try:
        return json.loads((home / "jobs" / name / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _running(home: Path, name: str) -> dict:
    """The job's record once its host printed that it runs (its log says so)."""
    log = home / "jobs" / name / "logs" / "algo-1.log"
    _wait_for(lambda: log.exists() and "running" in log.read_text(errors="replace"), f"{name} to run")
    return _record(home, name)


def _children(pid: int) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()
            and (fields := stat_fields(entry)) is not None and len(fields) > 1 and fields[1] == str(pid)]


def _launcher_of(controller: int) -> int:
    """The first host's launcher (host_init), the controller's child."""
    return _wait_for(lambda: next((pid for pid in _children(controller)
                                   if b"host_init" in Path(f"/proc/{pid}/cmdline").read_bytes()), None),
                     "the host's launcher")


def _end(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=60)


def test_a_hard_link_to_another_jobs_lock_never_gets_that_job_stopped(tmp_path):
    home, flag = tmp_path / "home", tmp_path / "flag"
    flag.write_text("")
    env = {"TRAINOPS_HOME": str(home)}
    victim = subprocess.Popen([*TRAINOPS, "run", str(_spec(tmp_path, flag)), "--job-name", "victim"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env})
    try:
        record = _running(home, "victim")
        forged = home / "jobs" / "forged"
        forged.mkdir(mode=0o700)
        os.link(home / "jobs" / "victim" / identity.CONTROLLER_LOCK, forged / identity.CONTROLLER_LOCK)
        (forged / "status.json").write_text(json.dumps({**record, "job_name": "forged", "job_dir": str(forged)}))
        # The premise: by inode, the forged job's lock is held, and by the victim's controller.
        assert identity.lock_held(forged)
        assert victim.pid in identity.lock_holders(forged / identity.CONTROLLER_LOCK)
        assert identity.holds_lock(victim.pid, home / "jobs" / "victim" / identity.CONTROLLER_LOCK)
        assert not identity.holds_lock(victim.pid, forged / identity.CONTROLLER_LOCK)
        stopped = cli("stop", "forged", env=env, timeout=200)
        assert stopped.returncode == 0, (stopped.stdout, stopped.stderr)
        assert victim.poll() is None and _record(home, "victim")["status"] == "InProgress"
        status = cli("status", "forged", env=env)
        assert "Failed" in status.stdout, status.stdout
        flag.unlink()  # the victim ends on its own, untouched
        assert victim.wait(timeout=120) == 0
        assert _record(home, "victim")["status"] == "Completed"
    finally:
        flag.unlink(missing_ok=True)
        _end(victim)


def test_a_controller_gone_with_a_stuck_host_launcher_reads_failed_and_its_name_runs_again(tmp_path):
    home, flag = tmp_path / "home", tmp_path / "flag"
    flag.write_text("")
    env = {"TRAINOPS_HOME": str(home)}
    spec = _spec(tmp_path, flag)
    controller = subprocess.Popen([*TRAINOPS, "run", str(spec), "--job-name", "stuck"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env={**os.environ, **env})
    launcher = None
    try:
        _running(home, "stuck")
        launcher = _launcher_of(controller.pid)
        os.kill(launcher, signal.SIGSTOP)  # it will never see its controller go
        controller.kill()
        controller.wait(timeout=60)
        assert identity.lock_held(home / "jobs" / "stuck")  # the stopped launcher's copy still holds it
        status = cli("status", "stuck", env=env)
        assert status.returncode == 0 and "Failed" in status.stdout, (status.stdout, status.stderr)
        assert "controlling this job exited" in json.dumps(
            json.loads(cli("status", "stuck", "--json", env=env).stdout)), "the reason is given"
        flag.unlink()  # a new run ends at once
        again = cli("run", str(spec), "--job-name", "stuck", env=env, timeout=200)
        assert again.returncode == 0, (again.stdout, again.stderr)
        assert _record(home, "stuck-2")["status"] == "Completed"
    finally:
        flag.unlink(missing_ok=True)
        if launcher is not None:
            os.kill(launcher, signal.SIGCONT)  # it sees its controller's pipe closed and ends its host
            _wait_for(lambda: not is_alive(launcher), "the launcher to end", 60)
        _end(controller)


def test_a_detached_job_whose_supervisor_is_killed_reads_failed_whatever_its_hosts_do(tmp_path):
    home, flag = tmp_path / "home", tmp_path / "flag"
    flag.write_text("")
    env = {"TRAINOPS_HOME": str(home)}
    submitted = cli("run", str(_spec(tmp_path, flag, hosts=2)), "--job-name", "detached", "--no-wait", env=env)
    assert submitted.returncode == 0, (submitted.stdout, submitted.stderr)
    supervisor = _running(home, "detached")["controller"]["pid"]
    launcher = _launcher_of(supervisor)
    try:
        os.kill(launcher, signal.SIGSTOP)
        os.kill(supervisor, signal.SIGKILL)
        _wait_for(lambda: not is_alive(supervisor), "the supervisor to be gone", 60)
        status = cli("status", "detached", env=env)
        assert status.returncode == 0 and "Failed" in status.stdout, (status.stdout, status.stderr)
    finally:
        flag.unlink(missing_ok=True)
        os.kill(launcher, signal.SIGCONT)
        _wait_for(lambda: not is_alive(launcher), "the launcher to end", 60)
