"""Process bookkeeping: liveness checked against start time, group signals, parent-death signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from trainops.runtime import processes


def test_start_ticks_tell_a_process_from_a_reused_pid():
    ticks = processes.process_start_ticks(os.getpid())
    assert isinstance(ticks, int) and ticks > 0
    assert processes.is_alive(os.getpid(), ticks)
    assert not processes.is_alive(os.getpid(), ticks + 1)
    assert not processes.is_alive(0)


def test_signal_process_reaches_the_whole_group():
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
           "print('ready', flush=True); time.sleep(60)"
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert leader.stdout.readline().strip() == b"ready"
        ticks = processes.process_start_ticks(leader.pid)
        assert processes.signal_process(leader.pid, signal.SIGKILL, ticks)
        leader.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(leader.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the group outlived its leader's kill")
        assert not processes.signal_process(leader.pid, signal.SIGKILL, ticks)
    finally:
        if leader.poll() is None:
            leader.kill()


def test_parent_death_signal_kills_an_orphan(tmp_path):
    marker = tmp_path / "child.pid"
    child_code = ("import os, signal, time; from trainops.runtime.processes import set_parent_death_signal; "
                  f"set_parent_death_signal(signal.SIGKILL); open({str(marker)!r}, 'w').write(str(os.getpid())); "
                  "time.sleep(60)")
    parent_code = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child_code!r}]); "
                   "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 20
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child_pid = int(marker.read_text())
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while processes.is_alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes.is_alive(child_pid)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_signal_names():
    assert processes.signal_name(9) == "SIGKILL"
    assert processes.signal_name(250) == "signal 250"


def test_a_subreaper_collects_orphans_but_not_the_children_it_keeps(tmp_path):
    # A launcher-like process: subreaper, one kept child (as a Popen would be), and a grandchild orphaned by its
    # parent's death. The orphan comes to the launcher, which reaps it; the kept child stays for its owner.
    code = """
import os, subprocess, sys, time
from trainops.runtime.processes import become_subreaper, reap_orphans
assert become_subreaper()
kept = subprocess.Popen([sys.executable, "-c", "pass"])
middle = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(0.5)']); "
    "print(p.pid, flush=True)"], stdout=subprocess.PIPE)
orphan = int(middle.stdout.readline())
middle.wait()
reaped, deadline = [], time.monotonic() + 60
while orphan not in reaped and time.monotonic() < deadline:  # until the orphan has ended and been handed to us
    reaped += reap_orphans({kept.pid})
    time.sleep(0.05)
print(reaped == [orphan], kept.wait() == 0)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["True", "True"], result.stderr
