"""The one per-poll guard check every wait runs (`guards.act`), and how an ended job is reported with the guard that
stopped it (`stopped_by`, `settle`): a person's stop or the job's own failure keeps its own cause."""

from __future__ import annotations

from trainops.backends.api import JobResult
from trainops.backends.guards import JobGuards, Observation, Tripped, Watchdog, act, settle, stopped_by
from trainops.backends.states import JobStatus


def test_act_stops_the_job_when_a_guard_trips_and_says_so():
    stops: list[str] = []
    lines: list[str] = []
    watchdog = Watchdog(JobGuards(budget_usd=1.0, hourly_usd=3600.0))  # $1 a second
    assert act(watchdog, Observation(now=100.0, started=99.5, billable_seconds=0.5), stops.append, lines.append) \
        is None
    assert act(watchdog, None, stops.append) is None  # nothing to observe yet
    tripped = act(watchdog, Observation(now=101.0, started=99.5, billable_seconds=1.5), stops.append, lines.append)
    assert tripped is not None and tripped.kind == "budget"
    assert stops == [tripped.message] and lines == [f"[trainops] {tripped.message}: stopping the job"]
    assert act(watchdog, Observation(now=102.0, started=99.5, billable_seconds=2.5), stops.append) is None
    assert stops == [tripped.message]  # a job is stopped once, for one reason


def test_a_bound_that_only_ends_the_wait_is_said_and_not_stopped():
    stops: list[str] = []
    lines: list[str] = []
    watchdog = Watchdog(JobGuards(max_run=10, grace_seconds=5, stop_at_bound=False))
    tripped = act(watchdog, Observation(now=20.0, started=0.0), stops.append, lines.append)
    assert tripped is not None and tripped.kind == "wait_bound"
    assert stops == [] and lines == [f"[trainops] {tripped.message}"]


STALL = Tripped("stalled", "stalled: no new log line or metric for 700 s (stall_timeout 600 s)")


def test_an_ended_job_carries_the_guard_only_when_the_guard_stopped_it():
    assert stopped_by(STALL, True, None) is STALL
    assert stopped_by(STALL, True, STALL.message) is STALL
    # the reason a SageMaker tag kept (no parentheses in a tag value): the same guard
    assert stopped_by(STALL, True, "stalled: no new log line or metric for 700 s  stall_timeout 600 s") is STALL
    assert stopped_by(STALL, True, "the Airflow task was killed") is None  # a person stopped it first
    assert stopped_by(STALL, False, None) is None  # it failed on its own meanwhile
    assert stopped_by(None, True, None) is None


def test_settle_adds_the_guard_to_a_stopped_result_and_leaves_others_alone():
    stopped = JobResult("local", "job-1", JobStatus.STOPPED)
    settled = settle(stopped, STALL)
    assert settled.details["guard"] == STALL.to_dict() and settled.failure_reason == STALL.message
    tagged = JobResult("sagemaker", "job-1", JobStatus.STOPPED, failure_reason="budget: ...",
                       details={"guard": {"kind": "budget", "message": "budget: ..."}})
    assert settle(tagged, STALL) is tagged  # the backend knew already (the job's tags)
    failed = JobResult("local", "job-1", JobStatus.FAILED, failure_reason="exit code 1")
    assert settle(failed, STALL) is failed
