"""Processes and job state of local jobs (issue 15 items 1-5, issue 16 item 2): recorded pids are never trusted, a
controller killed outright takes its job with it, helpers that shed the job's marker are still stopped, losing log
lines never stops a job, output without newlines costs bounded memory, progress bars are live, and detached jobs
work end to end.

Each test runs one scenario of `process_scenarios.py` (shared with bench/reliability.py, section `processes`) and
asserts it broke no promise; the scenario's own figures are in the assertion message when one did.
"""

from __future__ import annotations

from pathlib import Path

import process_scenarios as scenarios
import pytest


def _check(figures: dict) -> None:
    assert figures["problems"] == [], figures


def test_recorded_pids_are_never_trusted(tmp_path: Path):
    """A live unrelated pid, pid 1, -1, 0, a text pid and a list: status honest, stop signals nothing, exit 2."""
    _check(scenarios.untrusted_records(tmp_path))


@pytest.mark.parametrize("mechanism", ["namespace", "process-tree"])
def test_kill_9_of_the_controller_stops_the_job_and_keeps_checkpoints_locked(tmp_path: Path, mechanism: str):
    """kill -9 of `trainops run`: rank, launcher and a marker-less helper die; the checkpoint lock is held while any
    lives; the status says Failed with the cause. With each host's PID namespace (the default) and with the
    process tree alone (no PID namespace)."""
    _check(scenarios.controller_killed(tmp_path, mechanism))


@pytest.mark.parametrize("mechanism", ["namespace", "process-tree"])
def test_helper_that_sheds_the_marker_is_stopped_with_the_job(tmp_path: Path, mechanism: str):
    _check(scenarios.helper_outlives_job(tmp_path, mechanism))


def test_a_log_file_that_cannot_be_written_never_stops_the_job(tmp_path: Path):
    _check(scenarios.log_sink_fails(tmp_path))


def test_the_runtime_relay_survives_an_exception(tmp_path: Path):
    _check(scenarios.relay_survives(tmp_path))


def test_300_mib_without_a_newline_keeps_the_controller_under_100_mb(tmp_path: Path):
    _check(scenarios.no_newline_output(tmp_path, megabytes=300))


def test_carriage_return_progress_reaches_the_console_live(tmp_path: Path):
    _check(scenarios.progress_bar_live(tmp_path))


def test_detached_job_submit_resubmit_follow_and_stop(tmp_path: Path):
    _check(scenarios.detached_job(tmp_path))


def test_a_full_job_disk_is_named_in_the_status_and_the_failure_file(tmp_path: Path):
    figures = scenarios.disk_fills(tmp_path)
    if "skipped" in figures:
        pytest.skip(figures["skipped"])
    _check(figures)


def test_a_failure_with_no_stderr_tail_carries_what_the_host_printed_last(tmp_path: Path):
    """A rank whose stderr tail is empty (as when a full disk lost it, which `disk_fills` meets only sometimes):
    the status and the job's failure file still end with the host's last lines, as the controller saw them."""
    spec = scenarios.write_job(tmp_path, {"MODE": "stdout_error"})
    workdir = tmp_path / "work"
    result = scenarios.cli("run", str(spec), "--workdir", str(workdir), "--job-name", "quiet")
    assert result.returncode == 1, result.stderr
    final = scenarios.status_json("quiet", workdir)
    failure = (workdir / "jobs" / "quiet" / "failure").read_text()
    for text in (final["failure_reason"], failure):
        assert text.startswith("rank 0 on host algo-1 exited with code 3"), text
        heading, _, tail = text.partition("--- last lines of the host's output, as trainops saw them ---\n")
        assert heading and "shard 7 could not be read: the evidence only stdout holds" in tail, text
        assert "--- last lines of stderr ---" not in text, text
