"""A local job's controller is identified by its lock, its pid and start time and the boot id
(`trainops.backends.local.identity`), never by a pid alone; corrupt records are refused with the field named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.backends.hostfs.locks import try_lock
from trainops.backends.local import identity, status
from trainops.errors import SpecError


def test_only_a_proven_live_process_may_be_signalled():
    me = identity.own_identity()
    assert identity.same_process(me)
    assert identity.signalable_controller({"controller": me}) is None  # never this process itself
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        from trainops.runtime.processes import process_start_ticks

        proven = {"pid": child.pid, "start_ticks": process_start_ticks(child.pid), "boot_id": identity.boot_id()}
        assert identity.signalable_controller({"controller": proven}) == child.pid
        reused = {**proven, "start_ticks": proven["start_ticks"] - 1}  # same pid, another process
        other_boot = {**proven, "boot_id": "another-boot"}
        no_time = {**proven, "start_ticks": None}
        for record in (reused, other_boot, no_time, {**proven, "pid": 1}, {**proven, "pid": -1}):
            assert identity.signalable_controller({"controller": record}) is None, record
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("record, field", [
    ([1, 2], "status"),
    ({"status": "InProgress", "controller_pid": "123"}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": -1}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": 0}, "controller_pid"),
    ({"status": "InProgress", "controller_pid": True}, "controller_pid"),
    ({"status": "InProgress", "controller": {"pid": "x"}}, "controller.pid"),
    ({"status": "InProgress", "controller": [1]}, "controller"),
    ({"status": "Running"}, "status"),
])
def test_corrupt_records_are_refused_with_the_field_named(tmp_path: Path, record, field):
    job_dir = tmp_path / "jobs" / "bad"
    job_dir.mkdir(parents=True)
    (job_dir / "status.json").write_text(json.dumps(record))
    with pytest.raises(SpecError) as caught:
        status.read("bad", tmp_path)
    assert any(problem.path == field for problem in caught.value.problems), caught.value
    assert f"remove {job_dir} to forget it" in str(caught.value)  # nothing holds its lock: say how to forget it


def test_liveness_is_the_lock_not_the_pid(tmp_path: Path):
    job_dir = tmp_path / "jobs" / "job"
    status.write(job_dir, {"job_name": "job", "status": "InProgress", "controller_pid": 1})
    assert status.read("job", tmp_path)["status"] == "Failed"  # pid 1 is alive, yet nobody controls the job
    lock = try_lock(job_dir / identity.CONTROLLER_LOCK, "job")
    try:
        # Held, but not by the process the record names (pid 1): no controller (issue 39: a held lock is not one)
        assert identity.lock_held(job_dir) and status.read("job", tmp_path)["status"] == "Failed"
        status.write(job_dir, {"job_name": "job", "status": "InProgress", "controller": identity.own_identity()})
        assert status.read("job", tmp_path)["status"] == "InProgress"  # the recorded process holds it itself
    finally:
        lock.release()
    assert not identity.lock_held(job_dir) and status.read("job", tmp_path)["status"] == "Failed"


#: A host's launcher without a PID namespace, in miniature: a child subreaper whose child double-forks a daemon into
#: a session of its own, then exits; the launcher's own walk must find the daemon below it and nothing else.
SUBREAPER_LAUNCHER = """
import ctypes, importlib.util, json, subprocess, sys, time
spec = importlib.util.spec_from_file_location("host_init", sys.argv[1])
host_init = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_init)
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER, as a host's launcher is
daemon = ("import os, sys, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n"
          "        open(sys.argv[1], 'w').write(str(os.getpid()))\\n        time.sleep(120)\\n    os._exit(0)\\n")
subprocess.run([sys.executable, "-c", daemon, sys.argv[2]], check=True)
deadline = time.monotonic() + 10
# Until the daemon has said its pid and its short-lived parent is gone: a walk in between may see either, or
# (the parent ending between the listing of /proc and the read of its record) neither.
while time.monotonic() < deadline:
    try:
        pid = int(open(sys.argv[2]).read())
    except (OSError, ValueError):
        pid = None
    host_init._reap(-1)  # the daemon's parent, ended and handed to this subreaper, as the launcher does
    if pid is not None and list(host_init._descendants()) == [pid]:
        break
    time.sleep(0.05)
found = host_init._descendants()
stopped = host_init._stop_descendants(1.0)
print(json.dumps({"found": sorted(found), "stopped": stopped, "after": sorted(host_init._descendants())}))
"""


def test_a_hosts_launcher_finds_and_stops_only_what_is_below_it(tmp_path: Path):
    """What replaced the recorded process tree: a host's launcher stops the processes the kernel shows below it (a
    daemon that left its session included), never init, the caller or the caller's ancestors, whatever a record
    says (no record is read)."""
    import json
    import os
    import subprocess
    import sys

    from trainops.backends.local import host_init

    done = subprocess.run([sys.executable, "-c", SUBREAPER_LAUNCHER, host_init.__file__, str(tmp_path / "daemon")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["found"] == [int((tmp_path / "daemon").read_text())], seen
    assert seen["stopped"] == 1 and seen["after"] == [], seen
    assert not {1, os.getpid(), os.getppid()} & set(seen["found"])
