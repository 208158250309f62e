"""Issue 24, break 2: nothing read from a record is signalled or written through.

A `processes.json` naming a look-alike "cgroup" (a directory called `trainops-*` with a `cgroup.procs` listing an
unrelated process and a `cgroup.kill` linked to a file), its pids and sessions copied from that process; a
`status.json` whose controller identity is copied from an unrelated live process: `trainops stop` must signal
none of them and write through no link. Only what the kernel says is the job's (the holder of its lock, a process
carrying its marker) is stopped; trainops makes no cgroup, so a cgroup a record names is never read or written.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from local_breaks import cli

from trainops.backends.local import identity
from trainops.runtime.processes import process_start_ticks


def _bystander() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def _job_dir(workdir: Path, name: str) -> Path:
    job = workdir / "jobs" / name
    job.mkdir(parents=True)
    return job


def test_a_forged_processes_record_makes_stop_signal_nothing_and_write_through_no_link(tmp_path):
    workdir = tmp_path / "work"
    job = _job_dir(workdir, "forged")
    victim_file = tmp_path / "victim"
    victim_file.write_text("precious\n")
    fake = tmp_path / "fake" / "trainops-forged-job"
    fake.mkdir(parents=True)
    bystander = _bystander()
    try:
        ticks = process_start_ticks(bystander.pid)
        (fake / "cgroup.procs").write_text(f"{bystander.pid}\n")
        (fake / "cgroup.kill").symlink_to(victim_file)
        (job / "status.json").write_text(json.dumps({"job_name": "forged", "status": "Completed",
                                                     "job_id": "forged-job"}))
        (job / "processes.json").write_text(json.dumps({
            "job_id": "forged-job", "boot_id": identity.boot_id(), "mechanism": "cgroup", "cgroup": str(fake),
            "known": {str(bystander.pid): ticks}, "sessions": {str(bystander.pid): ticks}}))
        result = cli("stop", "forged", "--workdir", str(workdir), "--backend", "local", timeout=120)
        time.sleep(0.5)
        assert bystander.poll() is None, (result.returncode, result.stdout, result.stderr)
        assert victim_file.read_text() == "precious\n"
        assert "Traceback" not in result.stderr
        status = cli("status", "forged", "--workdir", str(workdir), "--backend", "local", "--json")
        assert bystander.poll() is None, status.stdout
    finally:
        bystander.kill()
        bystander.wait()


def test_a_controller_identity_copied_from_an_unrelated_process_is_never_signalled(tmp_path):
    """The job looks alive (its lock is held, by a process that is not the recorded one) and does not answer the
    stop request; the recorded controller is a live bystander whose pid, start time and boot id match exactly."""
    from trainops.backends.local.control import stop_local_job

    workdir = tmp_path / "work"
    job = _job_dir(workdir, "copied")
    lock = job / ".controller.lock"
    lock.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "handle = open(sys.argv[1], 'r+')\nfcntl.flock(handle, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(120)\n", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    bystander = _bystander()
    try:
        assert holder.stdout.readline().strip() == "held"
        copied = {"pid": bystander.pid, "start_ticks": process_start_ticks(bystander.pid),
                  "boot_id": identity.boot_id(), "host": "here"}
        assert identity.same_process(copied)  # the copy is perfect: only the lock tells it apart
        (job / "status.json").write_text(json.dumps({"job_name": "copied", "status": "InProgress",
                                                     "job_id": "copied-job", "controller": copied,
                                                     "controller_pid": bystander.pid}))
        said = stop_local_job("copied", workdir, timeout=1.0)
        time.sleep(0.3)
        assert bystander.poll() is None, said
        assert holder.poll() is None, said  # not the recorded pid either: nothing was proven, nothing signalled
        # The recorded controller does not hold the lock itself: the job has no controller, it reads Failed
        assert "Failed (nothing to stop)" in said
    finally:
        for process in (bystander, holder):
            process.kill()
            process.wait()


def test_the_real_controller_holding_the_lock_is_the_one_proven(tmp_path):
    """The other side of the rule: the process the kernel reports as holding the job's lock, with the recorded
    identity, is the controller (what `trainops stop` may kill when it does not answer)."""
    job = _job_dir(tmp_path / "work", "real")
    lock = job / ".controller.lock"
    lock.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               "handle = open(sys.argv[1], 'r+')\nfcntl.flock(handle, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\ntime.sleep(120)\n", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        recorded = {"pid": holder.pid, "start_ticks": process_start_ticks(holder.pid),
                    "boot_id": identity.boot_id()}
        assert identity.signalable_controller({"controller": recorded}, job) == holder.pid
        with open(lock) as handle:  # this process does not hold it: a shared probe fails while it is held
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                raise AssertionError("the lock should be held")
            except BlockingIOError:
                pass
    finally:
        holder.kill()
        holder.wait()
    os.unlink(lock)
