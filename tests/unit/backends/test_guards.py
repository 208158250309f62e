"""The guards of a wait (trainops.backends.guards) and the local watch over them (backends.local.guarding), on a fake
clock: the budget, the stall watchdog and the wait bound counted from the job's own start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainops.backends.guards import BUDGET, STALLED, WAIT_BOUND, JobGuards, Observation, Watchdog, cost_so_far
from trainops.backends.local.guarding import LocalGuard
from trainops.backends.vocabulary import classify_result
from trainops.spec.job import JobSpec

START = 1_800_000_000.0


def test_budget_trips_when_the_billable_cost_reaches_what_is_left():
    guards = JobGuards(budget_usd=1.0, hourly_usd=36.0)  # $0.01 a second
    watchdog = Watchdog(guards)
    assert watchdog.check(Observation(now=START + 99, started=START, billable_seconds=99)) is None
    assert watchdog.spent == pytest.approx(0.99)
    tripped = watchdog.check(Observation(now=START + 100, started=START, billable_seconds=100))
    assert tripped is not None and tripped.kind == BUDGET
    assert "max_cost_usd" in tripped.message and tripped.message.startswith("budget:")
    # Once tripped, a later look reports nothing new (the job is stopped once, for one reason).
    assert watchdog.check(Observation(now=START + 200, started=START, billable_seconds=200)) is None
    assert watchdog.tripped == tripped


def test_no_price_means_no_budget_guard():
    assert cost_so_far(JobGuards(budget_usd=1.0), 10_000) is None
    assert Watchdog(JobGuards(budget_usd=1.0)).check(Observation(now=START, started=START,
                                                                 billable_seconds=10_000)) is None


def test_stall_counts_from_the_last_activity_and_only_while_the_script_runs():
    watchdog = Watchdog(JobGuards(stall_timeout=600))
    # Provisioning for an hour prints nothing: no stall before the job runs its script.
    assert watchdog.check(Observation(now=START + 3600, started=START, running_since=None)) is None
    # Running since START+3600, a line at +3900: quiet 599 s at +4499, 600 s at +4500.
    assert watchdog.check(Observation(now=START + 4499, started=START, running_since=START + 3600,
                                      last_activity=START + 3900)) is None
    tripped = watchdog.check(Observation(now=START + 4500, started=START, running_since=START + 3600,
                                         last_activity=START + 3900))
    assert tripped is not None and tripped.kind == STALLED and "600 s" in tripped.message


def test_the_stall_watchdog_is_off_by_default():
    spec = JobSpec(entry_point="train.py", instance_type="ml.p4d.24xlarge")
    assert spec.stall_timeout is None
    watchdog = Watchdog(JobGuards.from_spec(spec))
    assert watchdog.check(Observation(now=START + 80_000, started=START, running_since=START)) is None


def test_the_wait_bound_counts_from_the_jobs_own_start_not_from_the_wait():
    guards = JobGuards(max_run=7200, grace_seconds=600)
    # A first caller waits from the start; a second (an Airflow retry) attaches 7000 s later: both give up at
    # START + 7800, not the second at 7000 + 7800.
    first, second = Watchdog(guards), Watchdog(guards)
    assert first.check(Observation(now=START + 7799, started=START)) is None
    assert second.remaining(Observation(now=START + 7000, started=START)) == pytest.approx(800)
    tripped = second.check(Observation(now=START + 7800, started=START))
    assert tripped is not None and tripped.kind == WAIT_BOUND and "(7800 s)" in tripped.message


def test_the_bound_adds_max_wait_for_spot_and_reads_the_jobs_limits_when_the_spec_has_none():
    spot = JobSpec(entry_point="t.py", instance_type="ml.g5.xlarge", use_spot_instances=True, max_run=3600,
                   max_wait=7200, wait_grace_seconds=60)
    assert JobGuards.from_spec(spot).bound_seconds() == 3600 + 7200 + 60
    assert JobGuards().bound_seconds(max_run=100, max_wait=50) == 100 + 50 + 3600


def test_a_bound_that_only_stops_waiting_says_the_job_is_left_running():
    watchdog = Watchdog(JobGuards(max_run=10, grace_seconds=0, stop_at_bound=False))
    tripped = watchdog.check(Observation(now=START + 10, started=START))
    assert tripped is not None and "left running" in tripped.message


def test_guards_travel_as_json_and_come_from_the_spec():
    spec = JobSpec(entry_point="t.py", instance_type="ml.g5.xlarge", stall_timeout=900, wait_grace_seconds=120,
                   stop_at_wait_bound=False, max_run=3600)
    guards = JobGuards.from_spec(spec, budget_usd=12.5, hourly_usd=1.5)
    assert JobGuards.from_dict(json.loads(json.dumps(guards.to_dict()))) == guards
    assert (guards.stall_timeout, guards.grace_seconds, guards.stop_at_bound, guards.max_run) == (900, 120, False, 3600)


@pytest.mark.parametrize(("kind", "message", "expected"), [
    (BUDGET, "budget: the job's billable cost reached $1.00", "budget"),
    (STALLED, "stalled: no new log line or metric for 600 s", "infrastructure"),
    (WAIT_BOUND, "wait bound: the job ran 9000 s since its start", "timeout"),
])
def test_a_job_a_guard_stopped_is_classified_by_the_guard_not_as_a_stop(kind, message, expected):
    verdict = classify_result({"status": "Stopped", "failure_reason": message, "stop_requested": True,
                               "guard": {"kind": kind, "message": message}})
    assert verdict is not None and verdict.failure_class == expected and verdict.source == "guard"
    assert verdict.reason == message.split(":")[0].replace(" ", "_")


# --- the local watch -------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _job(tmp_path: Path, **spec) -> tuple[Path, dict]:
    job_dir = tmp_path / "job"
    (job_dir / "logs").mkdir(parents=True)
    record = {"started": START, "status": "InProgress", "spec": {"max_run": 3600, **spec}}
    return job_dir, record


def test_local_watch_stops_a_job_whose_logs_stop_growing(tmp_path):
    job_dir, record = _job(tmp_path)
    clock, stops = Clock(), []
    guard = LocalGuard(job_dir, JobGuards(stall_timeout=30), stops.append, read_record=lambda: record, now=clock)
    log = job_dir / "logs" / "algo-1.log"
    log.write_text("step 1\n")
    assert guard.look() is None  # the log directory is seen: the hosts are starting
    for _ in range(5):  # growing every 20 s: never 30 s quiet
        clock.now += 20
        log.write_text(log.read_text() + "step\n")
        assert guard.look() is None
    clock.now += 29
    assert guard.look() is None and stops == []
    clock.now += 1
    tripped = guard.look()
    assert tripped is not None and tripped.kind == STALLED and stops == [tripped.message]


def test_local_watch_prices_wall_time_and_stops_at_the_budget(tmp_path):
    job_dir, record = _job(tmp_path)
    clock, stops = Clock(), []
    # 2 x ml.m5.large at $0.115/h = $0.23/h; a budget of $0.023 lasts 360 s of wall time.
    guard = LocalGuard(job_dir, JobGuards(budget_usd=0.023, hourly_usd=0.23), stops.append,
                       read_record=lambda: record, now=clock)
    clock.now = START + 359
    assert guard.look() is None
    clock.now = START + 360
    tripped = guard.look()
    assert tripped is not None and tripped.kind == BUDGET and stops == [tripped.message]


def test_local_watch_waits_for_the_record_and_stops_at_the_bound_from_the_records_start(tmp_path):
    job_dir, record = _job(tmp_path)
    clock, stops = Clock(), []
    records = iter([FileNotFoundError("no record yet")])

    def read() -> dict:
        for error in records:
            raise error
        return record

    guard = LocalGuard(job_dir, JobGuards(grace_seconds=60), stops.append, read_record=read, now=clock)
    assert guard.look() is None  # no record yet: nothing known, nothing stopped
    clock.now = START + 3600 + 60
    tripped = guard.look()
    assert tripped is not None and tripped.kind == WAIT_BOUND and len(stops) == 1


def test_local_watch_leaves_the_job_when_the_bound_only_stops_waiting(tmp_path):
    job_dir, record = _job(tmp_path)
    clock, stops = Clock(), []
    guard = LocalGuard(job_dir, JobGuards(grace_seconds=0, stop_at_bound=False), stops.append,
                       read_record=lambda: record, now=clock)
    clock.now = START + 3600
    assert guard.look() is not None and stops == []


def test_the_one_deadline_formula_serves_the_watchdog():
    from trainops.backends.states import job_deadline

    guards = JobGuards(grace_seconds=300)
    seen = Observation(now=START + 10, started=START, max_run=3600, max_wait=None)
    assert Watchdog(guards).deadline(seen) == job_deadline(START, 3600, None, 300) == START + 3900


def test_a_stopped_jobs_record_read_back_later_is_classified_by_its_guard_reason():
    # `trainops status` reads a local record: no `guard` key, but the stop reason the guard gave.
    stalled = classify_result({"status": "Stopped", "failure_reason": "stalled: no new log line or metric for 9 s"})
    assert stalled.failure_class == "infrastructure" and stalled.reason == "stalled"
    assert classify_result({"status": "Stopped", "failure_reason": "budget: billable cost $1.00 reached"}
                           ).failure_class == "budget"
    # A failed script that happens to print such words is not a guard's stop.
    assert classify_result({"status": "Failed", "failure_reason": "stalled: my own message\nexit_code: 1"}
                           ).failure_class == "user"
    assert classify_result({"status": "Stopped", "failure_reason": "Stopped by trainops stop"}
                           ).failure_class == "stopped"
