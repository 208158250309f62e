"""TickOnlyCronTimetable: with catchup off, a passed tick older than its grace is never scheduled (Airflow's own cron
timetables schedule the latest passed tick at once: on unpause, after a scheduler outage), the tick that has just
passed still is, and catchup and serialization are Airflow's. The clock is Airflow's (``utcnow`` of its trigger
timetables) set by the test; the real scheduler runs it in tests/system/test_airflow_scheduler_unpause.py (and on
Airflow 2.11 in test_airflow_2_11.py)."""

from __future__ import annotations

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pendulum  # noqa: E402
import pytest  # noqa: E402
from airflow.timetables.base import DataInterval, TimeRestriction  # noqa: E402
from airflow.timetables.trigger import CronTriggerTimetable  # noqa: E402

from trainops.operators.timetables import TickOnlyCronTimetable  # noqa: E402

WEEKLY = "0 3 * * 1"  # the retraining DAG's: Mondays 03:00 UTC
START = pendulum.datetime(2026, 1, 5, tz="UTC")  # a Monday


@pytest.fixture
def clock(monkeypatch):
    now: dict = {}
    monkeypatch.setattr("airflow.timetables.trigger.utcnow", lambda: now["at"])
    return now


def next_run(timetable, clock, at, last_end=None, catchup=False):
    clock["at"] = at
    last = DataInterval(last_end, last_end) if last_end is not None else None
    info = timetable.next_dagrun_info(last_automated_data_interval=last,
                                      restriction=TimeRestriction(earliest=START, latest=None, catchup=catchup))
    return info.run_after if info else None


@pytest.mark.parametrize("last_end", [None, pendulum.datetime(2026, 11, 23, 3, tz="UTC")])
def test_unpausing_days_after_a_tick_schedules_the_next_tick_not_the_missed_one(clock, last_end):
    saturday = pendulum.datetime(2026, 12, 5, 10, tz="UTC")
    monday = pendulum.datetime(2026, 11, 30, 3, tz="UTC")
    # what Airflow's own timetable does with catchup=False: the passed Monday, at once
    assert next_run(CronTriggerTimetable(WEEKLY, timezone="UTC"), clock, saturday, last_end) == monday
    assert next_run(TickOnlyCronTimetable(WEEKLY, timezone="UTC"), clock, saturday, last_end) == monday.add(weeks=1)


def test_the_tick_that_has_just_passed_is_still_run_and_a_late_one_is_not(clock):
    tick = pendulum.datetime(2026, 12, 7, 3, tz="UTC")
    timetable = TickOnlyCronTimetable(WEEKLY, timezone="UTC")
    last = tick.subtract(weeks=1)
    # the DAG processor recomputes the next run between the tick and the scheduler creating its run
    assert next_run(timetable, clock, tick.add(seconds=5), last) == tick
    assert next_run(timetable, clock, tick.add(minutes=9), last) == tick
    # a scheduler down (or the DAG paused) for longer than the grace across the tick: the next Monday
    assert next_run(timetable, clock, tick.add(minutes=11), last) == tick.add(weeks=1)
    # before the tick: the tick
    assert next_run(timetable, clock, tick.subtract(hours=1), last) == tick


def test_the_grace_is_a_tenth_of_the_period_at_most_ten_minutes():
    at = pendulum.datetime(2026, 12, 7, 3, 0, 30, tz="UTC")
    assert TickOnlyCronTimetable(WEEKLY, timezone="UTC").grace_for(at).total_seconds() == 600
    assert TickOnlyCronTimetable("* * * * *", timezone="UTC").grace_for(at).total_seconds() == 6
    assert TickOnlyCronTimetable("0 * * * *", timezone="UTC").grace_for(at.replace(minute=0, second=0)) \
        .total_seconds() == 360


def test_catchup_is_airflows_own(clock):
    saturday = pendulum.datetime(2026, 12, 5, 10, tz="UTC")
    last = pendulum.datetime(2026, 11, 2, 3, tz="UTC")
    assert next_run(TickOnlyCronTimetable(WEEKLY, timezone="UTC"), clock, saturday, last, catchup=True) == \
        next_run(CronTriggerTimetable(WEEKLY, timezone="UTC"), clock, saturday, last, catchup=True) == last.add(weeks=1)


def test_airflow_serializes_it_through_the_trainops_plugin():
    from airflow.serialization.decoders import decode_timetable
    from airflow.serialization.encoders import encode_timetable

    encoded = encode_timetable(TickOnlyCronTimetable(WEEKLY, timezone="UTC"))
    assert encoded["__type"] == "trainops.operators.timetables.TickOnlyCronTimetable"
    decoded = decode_timetable(encoded)
    assert isinstance(decoded, TickOnlyCronTimetable) and decoded.summary == f"{WEEKLY} (at its tick only)"
