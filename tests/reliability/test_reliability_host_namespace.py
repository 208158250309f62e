"""Issue 24, build item 1 (opt-in for now: TRAINOPS_LOCAL_PID_NAMESPACE=1): each emulated host a PID namespace whose
init dies with its controller, so the kernel ends every process of the host, daemons and double forks included,
even when nothing of trainops is left to clean up (the controller and its guard both killed outright)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid

import pytest
from process_scenarios import TRAINOPS, kill_all, processes_with, wait_for, write_job

from trainops.backends.local import host_init

pytestmark = pytest.mark.skipif(not (host_init.available() and shutil.which("unshare")),
                                reason="needs mount and PID namespaces (root)")
PID_NAMESPACE = {"TRAINOPS_LOCAL_PID_NAMESPACE": "1"}


def test_killing_the_controller_and_its_guard_outright_still_ends_every_process_of_the_host(tmp_path):
    token = f"daemon-{uuid.uuid4().hex}"
    spec = write_job(tmp_path, {"MODE": "helper", "TOKEN": token, "STEPS": "1500"})
    workdir = tmp_path / "work"
    controller = subprocess.Popen([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "ns"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, **PID_NAMESPACE})
    try:
        seen = ""
        while "step 3" not in seen:
            line = controller.stdout.readline()
            if not line:
                break
            seen += line
        assert processes_with(token), seen[-2000:]  # the double-forked daemon that shed the job's marker runs
        record = json.loads((workdir / "jobs" / "ns" / "status.json").read_text())
        guard = (record.get("processes") or {}).get("guard_pid")
        assert guard, record
        os.kill(guard, signal.SIGKILL)  # no trainops process is left to clean up after the controller
        controller.kill()
        controller.wait()
        assert wait_for(lambda: not processes_with(token, tmp_path), 60), processes_with(token, tmp_path)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_all(processes_with(token, tmp_path))


def test_a_daemon_left_by_a_completed_job_is_stopped_by_the_hosts_init_and_counted(tmp_path):
    token = f"daemon-{uuid.uuid4().hex}"
    spec = write_job(tmp_path, {"MODE": "helper", "TOKEN": token, "STEPS": "3"})
    workdir = tmp_path / "work"
    try:
        done = subprocess.run([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "ns"],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **PID_NAMESPACE})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert not processes_with(token)
        record = json.loads((workdir / "jobs" / "ns" / "status.json").read_text())
        assert record["status"] == "Completed" and record["processes_stopped"] >= 1 and record["processes_left"] == 0
    finally:
        kill_all(processes_with(token))
