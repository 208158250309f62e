"""Issue 24, build item 1: each emulated host a PID namespace (the default wherever the kernel allows one: made
directly as root, or inside a user namespace of its own) whose init dies with its controller, so the kernel ends
every process of the host, daemons and double forks included, even when nothing of trainops is left to clean up (the
controller and the hosts' launchers killed outright). With the namespace turned off (TRAINOPS_LOCAL_PID_NAMESPACE=0,
the fallback) the host's launcher, a child subreaper, still stops such a daemon when the controller is killed; with
the launcher itself killed outright the daemon outlives it: the weaker promise docs/runtime.md states."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from process_scenarios import TRAINOPS, kill_all, processes_with, wait_for, write_job
from support.project_copy import readable_project

from trainops.backends.local import container

pytestmark = pytest.mark.skipif(not container.pid_namespaces_available(),
                                reason="this machine allows no PID namespace (neither as root nor in a user namespace)")
VARIANTS = {"pid": {}, "user-pid": {"TRAINOPS_LOCAL_PID_NAMESPACE": "user"}}


# A controller that runs the job from a thread other than its main one (a worker's thread, a notebook's): the
# parent-death signal would follow that thread, so the host's end with the controller rests on the pipe alone.
THREADED_CONTROLLER = """import sys, threading
from trainops.backends.local.job import LocalJob
from trainops.backends.local.job_input import from_spec
from trainops.spec import load_job_spec
spec, workdir = sys.argv[1:3]
worker = threading.Thread(target=lambda: LocalJob(from_spec(load_job_spec(spec)), "ns", workdir=workdir).run())
worker.start()
worker.join()
"""


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the kernel's record)."""
    from trainops.runtime.processes import stat_fields

    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and (fields := stat_fields(entry)) and fields[1] == str(pid)]


def _kill_controller(tmp_path, environment: dict[str, str], *, patience: float = 30, threaded: bool = False,
                     launchers_too: bool = False) -> dict:
    """`trainops run` of a job whose rank double-forks a daemon that sheds the job's marker; SIGKILL the controller
    (and the hosts' launchers) once the daemon runs. Returns what was seen: the record, the daemon's fate, how long
    it took."""
    token = f"daemon-{uuid.uuid4().hex}"
    spec = write_job(tmp_path, {"MODE": "helper", "TOKEN": token, "STEPS": "1500"})
    workdir = tmp_path / "work"
    command = ([sys.executable, "-c", THREADED_CONTROLLER, str(spec), str(workdir)] if threaded
               else [*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "ns"])
    controller = subprocess.Popen(command, cwd=tmp_path,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, **environment})
    try:
        seen = ""
        while "step 3" not in seen:
            line = controller.stdout.readline()
            if not line:
                break
            seen += line
        assert processes_with(token), seen[-2000:]  # the double-forked daemon that shed the job's marker runs
        record = json.loads((workdir / "jobs" / "ns" / "status.json").read_text())
        killed = time.monotonic()
        for launcher in (_children(controller.pid) if launchers_too else []):
            os.kill(launcher, signal.SIGKILL)  # nor the hosts' own launchers
        controller.kill()
        controller.wait()
        gone = wait_for(lambda: not processes_with(token, tmp_path), patience)
        return {"record": record, "gone": gone, "seconds": round(time.monotonic() - killed, 2),
                "left": processes_with(token, tmp_path)}
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_all(processes_with(token, tmp_path))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_killing_the_controller_outright_ends_every_process_of_the_host(tmp_path, variant):
    seen = _kill_controller(tmp_path, VARIANTS[variant])
    assert seen["record"]["isolation"] == variant, seen["record"]
    assert seen["gone"], seen


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_killing_the_hosts_launchers_outright_too_still_ends_every_process_of_the_host(tmp_path, variant):
    """With a PID namespace the host's init dies with its launcher (parent-death signal), so even the launcher
    killed outright takes every process of the host with it."""
    seen = _kill_controller(tmp_path, VARIANTS[variant], launchers_too=True)
    assert seen["record"]["isolation"] == variant and seen["gone"], seen


def test_a_controller_that_ran_the_job_from_another_thread_still_takes_every_process_of_the_host_with_it(tmp_path):
    seen = _kill_controller(tmp_path, {}, threaded=True)
    assert seen["record"]["isolation"] in VARIANTS and seen["gone"], seen


def test_kill_9_of_the_controller_alone_ends_every_process_of_the_host_and_the_job_reads_failed(tmp_path):
    seen = _kill_controller(tmp_path, {})
    assert seen["record"]["isolation"] in VARIANTS and seen["gone"], seen
    shown = subprocess.run([*TRAINOPS, "status", "ns", "--backend", "local", "--workdir", str(tmp_path / "work"),
                            "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "Failed", shown.stdout


def test_without_the_pid_namespace_killing_the_controller_outright_still_ends_the_daemon(tmp_path):
    """The fallback: each host's launcher is a child subreaper, so the double-forked daemon stays its descendant,
    and the controller's end (its pipe) makes the launcher stop every descendant before it ends."""
    seen = _kill_controller(tmp_path, {"TRAINOPS_LOCAL_PID_NAMESPACE": "0"})
    assert seen["record"]["isolation"] in ("mount", "user-mount"), seen["record"]
    assert seen["gone"], seen


def test_without_the_pid_namespace_a_daemon_outlives_its_hosts_launcher_killed_outright(tmp_path):
    """The fallback's limit, as docs/runtime.md states it: with the host's launcher itself killed outright (and the
    controller), nothing is left to stop a process that left the launcher's session."""
    seen = _kill_controller(tmp_path, {"TRAINOPS_LOCAL_PID_NAMESPACE": "0"}, launchers_too=True, patience=5)
    assert seen["record"]["isolation"] in ("mount", "user-mount"), seen["record"]
    assert not seen["gone"] and seen["left"], seen


def test_a_daemon_left_by_a_completed_job_is_stopped_by_the_hosts_init_and_counted(tmp_path):
    token = f"daemon-{uuid.uuid4().hex}"
    spec = write_job(tmp_path, {"MODE": "helper", "TOKEN": token, "STEPS": "3"})
    workdir = tmp_path / "work"
    try:
        done = subprocess.run([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "ns"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert not processes_with(token)
        record = json.loads((workdir / "jobs" / "ns" / "status.json").read_text())
        assert record["status"] == "Completed" and record["processes_stopped"] >= 1 and record["processes_left"] == 0
    finally:
        kill_all(processes_with(token))


# --- an unprivileged user: the user-namespace variant ----------------------------------------------------------------
NOBODY = 65534


def _as_nobody(python: str, home: Path, pythonpath: str) -> list[str]:
    """The command prefix that runs `python` as user nobody with trainops and its packages importable from
    ``pythonpath``, a copy nobody can read (`support.project_copy`: the checkout and its venv may lie where nobody
    can reach; this test's interpreter too, so `python` is one of the same version that nobody may run)."""
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TRAINOPS_HOME": str(home / "home"),
                   "PYTHONPATH": pythonpath}
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i",
            *(f"{key}={value}" for key, value in environment.items()), python]


def _python_for_nobody(home: Path, pythonpath: str) -> str | None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if os.path.exists(candidate) and subprocess.run([*_as_nobody(candidate, home, pythonpath), "-c",
                                                         "import trainops.cli"],
                                                        capture_output=True, timeout=120, cwd=home).returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root, to run a job as nobody")
def test_an_unprivileged_user_gets_the_user_namespace_variant_and_its_daemons_end_with_the_controller():
    root = Path(tempfile.mkdtemp(prefix="trainops-nobody-"))
    token = f"daemon-{uuid.uuid4().hex}"
    controller = None
    stack = contextlib.ExitStack()
    try:
        spec = write_job(root, {"MODE": "helper", "TOKEN": token, "STEPS": "1500"})
        for path in [root, *root.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        pythonpath = stack.enter_context(readable_project())
        python = _python_for_nobody(root, pythonpath)
        if python is None:
            pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that user nobody may run")
        nobody = _as_nobody(python, root, pythonpath)
        probe = subprocess.run([*nobody, "-c", "from trainops.backends.local import container as c\n"
                                "print(c.isolation(), c.isolation_works('pid'))"],
                               capture_output=True, text=True, timeout=120, cwd=root)
        assert probe.stdout.split() == ["user-pid", "False"], probe  # plain namespaces refused, the user ns works
        controller = subprocess.Popen([*nobody, "-m", "trainops.cli", "run", str(spec), "--workdir", str(root / "work"),
                                       "--job-name", "ns"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, cwd=root)
        seen = ""
        while "step 3" not in seen:
            line = controller.stdout.readline()
            if not line:
                break
            seen += line
        assert processes_with(token), seen[-2000:]
        status = root / "work" / "jobs" / "ns" / "status.json"
        assert wait_for(lambda: json.loads(status.read_text()).get("ranks"), 30), status.read_text()
        record = json.loads(status.read_text())
        assert record["isolation"] == "user-pid", record
        rank = record["ranks"][0]
        facts = dict(line.split(":", 1) for line in Path(f"/proc/{rank['pid']}/status").read_text().splitlines())
        assert facts["Uid"].split()[0] == str(NOBODY) and int(facts["NSpid"].split()[-1]) == rank["pid_in_host"]
        controller.kill()
        controller.wait()
        assert wait_for(lambda: not processes_with(token, root), 30), processes_with(token, root)
    finally:
        if controller is not None and controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_all(processes_with(token, root))
        shutil.rmtree(root, ignore_errors=True)
        stack.close()
