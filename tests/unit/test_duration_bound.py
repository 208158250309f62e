"""The bound on one test's time (tests/support/duration_bound.py), run as CI runs it: a pytest of its own in a
subprocess, on a tiny project whose conftest registers the plugin as tests/conftest.py does, alone and under xdist.

A bound of a nanosecond stands for "past the bound" (every call takes longer), so no test here depends on timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.duration_bound import EXCEPTIONS, bound_of, load_scale

TESTS = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from support import duration_bound
from support.duration_bound import Allowance, add_options, configure

duration_bound.EXCEPTIONS["test_inner.py::test_named"] = Allowance(3600, "a long job, said why")


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    configure(config)
"""

INNER = """
def test_quick():
    assert sum(range(10)) == 45


def test_named():
    assert True


def test_broken():
    assert 1 == 2, "its own failure"
"""


def run_inner(tmp_path: Path, *arguments: str, ini_bound: str = "300") -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text(f"[pytest]\ntest_seconds_bound = {ini_bound}\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *arguments],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def closing_line(done: subprocess.CompletedProcess) -> str:
    return done.stdout.strip().splitlines()[-1]


def test_within_the_bound_only_the_broken_test_fails(tmp_path):
    done = run_inner(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 2 passed" in closing_line(done), done.stdout
    assert "past its bound" not in done.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_test_past_its_bound_fails_and_the_closing_line_counts_it(tmp_path, workers):
    done = run_inner(tmp_path, *workers, ini_bound="1e-9")
    assert done.returncode == 1, done.stdout + done.stderr
    # test_quick outran the bound; test_named has an exception of an hour; test_broken keeps its own failure
    assert "2 failed, 1 passed" in closing_line(done), done.stdout
    assert "test_inner.py::test_quick passed, but its call took" in done.stdout
    assert "past its bound of 0 s" in done.stdout and "tests/support/duration_bound.py EXCEPTIONS" in done.stdout
    assert "its own failure" in done.stdout
    assert "test_named passed, but" not in done.stdout


def test_the_command_line_overrides_the_ini_bound_and_zero_turns_it_off(tmp_path):
    past = run_inner(tmp_path, "--test-seconds-bound=1e-9")
    assert "2 failed, 1 passed" in closing_line(past), past.stdout
    off = run_inner(tmp_path, "--test-seconds-bound=0", ini_bound="1e-9")
    assert "1 failed, 2 passed" in closing_line(off), off.stdout
    assert "past its bound" not in off.stdout


def test_every_named_exception_says_why_and_allows_more_than_the_default():
    default = 300.0
    for nodeid, allowance in EXCEPTIONS.items():
        assert nodeid.startswith("tests/") and "::" in nodeid, nodeid
        assert Path(TESTS.parent, nodeid.split("::")[0]).is_file(), f"{nodeid}: no such test file"
        assert len(allowance.reason) > 40, f"{nodeid}: say why it needs {allowance.seconds} s"
        assert allowance.seconds > default, nodeid
        assert bound_of(nodeid, default) == (allowance.seconds, allowance.reason)
        assert bound_of(nodeid + "[a-parameter]", default) == (allowance.seconds, allowance.reason)
    assert bound_of("tests/unit/test_x.py::test_y", default) == (default, None)


def test_the_bound_grows_only_with_load_past_the_tests_and_one_hog():
    # 2 cores: the test processes and one hog (load average up to 3) keep the bound as stated
    assert load_scale(0.4, 2) == 1.0 and load_scale(3.0, 2) == 1.0
    # a machine shared by many sessions (load average 12 on 2 cores) allows four times the bound
    assert load_scale(12.0, 2) == 4.0
    assert load_scale(6.0, 0) == 3.0  # an unknown core count counts as one
