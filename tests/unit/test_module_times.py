"""Each module's total time at the end of a run (tests/support/module_times.py), run as CI runs it: a pytest of its
own in a subprocess, on a tiny project whose conftest registers the plugin as tests/conftest.py does, alone and
under xdist. The figures themselves are timings, so the tests check what is counted, never how long it took: the
module that burns CPU in a child is listed with CPU seconds the idle one lacks, and the phase log holds every
phase of every test with the worker that ran it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from support import module_times


def pytest_addoption(parser):
    module_times.add_options(parser)


def pytest_configure(config):
    module_times.configure(config)
"""

# The child burns CPU until the clock of its own CPU time passes 0.5 s: a CPU figure, whatever the machine's load.
BUSY = """
import subprocess, sys

BURN = "import time\\nwhile time.process_time() < 0.5: pass"


def test_a_child_computes():
    subprocess.run([sys.executable, "-c", BURN], check=True)


def test_again():
    subprocess.run([sys.executable, "-c", BURN], check=True)
"""

IDLE = """
def test_nothing_to_do():
    assert True
"""


# A daemon the test starts and never reaps (as a Slurm or Ray cluster's daemons): it burns 0.5 CPU s, says so in a
# file, then waits to be killed; the test waits for the file (a condition) and kills it without reaping it.
DAEMON = """
import os, signal, subprocess, sys, time
from pathlib import Path

BURN = "import pathlib, sys, time\\nwhile time.process_time() < 0.5: pass\\npathlib.Path(sys.argv[1]).write_text('done')\\ntime.sleep(600)"
LEFT = []


def test_a_daemon_computes(tmp_path):
    done = tmp_path / "done"
    LEFT.append(subprocess.Popen([sys.executable, "-c", BURN, str(done)], start_new_session=True))
    while not done.exists():
        time.sleep(0.05)
    os.kill(LEFT[-1].pid, signal.SIGKILL)
"""


def run_inner(tmp_path: Path, *arguments: str, daemon: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_busy.py").write_text(BUSY)
    (tmp_path / "test_idle.py").write_text(IDLE)
    if daemon:
        (tmp_path / "test_daemon.py").write_text(DAEMON)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *arguments],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def listed(done: subprocess.CompletedProcess) -> dict[str, tuple[float, float, int]]:
    """The summary's rows: module -> (wall s, CPU s, tests)."""
    lines = done.stdout.splitlines()
    start = next(index for index, line in enumerate(lines) if "test modules of the largest total time" in line)
    rows = {}
    for line in lines[start + 2:]:
        parts = line.split()
        if len(parts) != 5 or not parts[4].endswith(".py"):
            break
        rows[parts[4]] = (float(parts[0]), float(parts[2]), int(parts[3]))
    return rows


@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one-process", "xdist"])
def test_the_summary_lists_each_module_with_its_tests_and_the_cpu_its_children_used(tmp_path, workers):
    log = tmp_path / "profile" / "phases.tsv"
    done = run_inner(tmp_path, *workers, "--module-times=5", f"--module-times-file={log}")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = listed(done)
    assert set(rows) == {"test_busy.py", "test_idle.py"}, done.stdout
    assert rows["test_busy.py"][2] == 2 and rows["test_idle.py"][2] == 1
    assert rows["test_busy.py"][1] >= 0.9, done.stdout  # two children of at least 0.5 CPU s each
    assert rows["test_idle.py"][1] < 0.5, done.stdout
    assert list(rows) == sorted(rows, key=lambda module: rows[module][0], reverse=True)  # largest total first

    phases = [line.split("\t") for line in log.read_text().splitlines()]
    assert len(phases) == 9  # setup, call and teardown of three tests, written once (by the controller)
    assert {(phase[0], phase[6]) for phase in phases} == {
        (when, test) for when in ("setup", "call", "teardown")
        for test in ("test_busy.py::test_a_child_computes", "test_busy.py::test_again",
                     "test_idle.py::test_nothing_to_do")}
    workers_seen = {phase[4] for phase in phases}
    assert workers_seen <= {"gw0", "gw1"} if workers else workers_seen == {"-"}

    summary = subprocess.run([sys.executable, str(REPO / "bench" / "suite_profile.py"), str(log)],
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "test_busy.py" in summary.stdout and summary.stdout.splitlines()[-1].split()[-2:] == ["3", "all"]


def test_without_the_options_nothing_is_listed_or_written(tmp_path):
    done = run_inner(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "largest total time" not in done.stdout
    assert sorted(path.name for path in tmp_path.iterdir()) == ["conftest.py", "test_busy.py", "test_idle.py"]


@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one-process", "xdist"])
def test_a_daemon_the_test_never_reaps_is_counted_where_a_cgroup_can_be_made(tmp_path, workers):
    """As root (this project's machines and CI) the test process counts its descendants through a cgroup of its
    own (`module_times.CpuGroup`), so a daemon's CPU is in its module's figure; the reaped-children figure misses it
    (the fallback elsewhere). The group is gone after the run."""
    import os

    from support.module_times import CpuGroup

    probe = CpuGroup.open()  # can this process make one (the test processes below can as well)
    if probe is not None:
        probe.close()
    before = set(probe.parent.glob("trainops-tests-*")) if probe is not None else set()
    done = run_inner(tmp_path, *workers, "--module-times=5", daemon=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = listed(done)
    if probe is None:
        assert os.geteuid() != 0, "root, yet no cgroup could be made for the CPU figures"
        assert rows["test_daemon.py"][1] < 0.5, done.stdout  # the fallback cannot see an unreaped daemon
        return
    assert not probe.group.exists()
    assert rows["test_daemon.py"][1] >= 0.45, done.stdout  # the daemon's 0.5 CPU s (the kernel's count)
    assert rows["test_idle.py"][1] < 0.5, done.stdout
    assert set(probe.parent.glob("trainops-tests-*")) <= before, "a test process left its group behind"
