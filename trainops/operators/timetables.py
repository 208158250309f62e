"""`TickOnlyCronTimetable`: a cron schedule whose runs start at their tick, never because the DAG was unpaused.

With ``catchup=False`` Airflow's cron timetables (2.11 and 3.x alike) still schedule the latest tick that has
passed: the next run is the later of "the last run's next tick" and "the latest tick before now". So unpausing a DAG
on a Wednesday starts Monday's run at once, as does a scheduler that was down across a tick; for a DAG whose runs
train on paid instances that is a run nobody asked for. This timetable keeps everything of
``CronTriggerTimetable`` (cron, time zone, data interval, serialization) except that choice: with ``catchup=False``
a tick older than a small grace (`grace_for`: a tenth of the time between ticks, at most `MAX_GRACE`) is skipped
and the next one is scheduled instead. The grace keeps the tick that has just passed: the DAG processor recomputes
the next run at every parse, and one parse may land between a tick and the scheduler creating its run. The choice
is made at a parse, so a tick stays due until the first parse after its grace: a DAG unpaused within one parse
interval of that still gets the tick's run (the scheduler creates runs from the stored next run).

With ``catchup=True`` nothing changes. Runs an asset event starts (``AssetOrTimeSchedule``) and runs triggered by
hand are not the timetable's and start as always.

Airflow only deserializes timetables it knows: trainops registers this one through its Airflow plugin
(`trainops.operators.plugin`, the ``airflow.plugins`` entry point), so every component that reads the DAG (DAG
processor, scheduler, API server) finds it. Importing this module imports Airflow's core timetables only (cheap:
the DAG processor has loaded them already).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.timetables import trigger as _core
from airflow.timetables.base import DagRunInfo

#: The longest a passed tick stays due: a scheduler that is down longer than this across a tick skips that run.
MAX_GRACE = timedelta(minutes=10)


class TickOnlyCronTimetable(_core.CronTriggerTimetable):
    """``CronTriggerTimetable`` whose runs, with ``catchup=False``, start only at their tick (within `grace_for`),
    never for a tick missed while the DAG was paused or the scheduler down."""

    def grace_for(self, now: Any) -> timedelta:
        """How long after its tick a run is still started: a tenth of the time between the ticks around ``now``,
        at most `MAX_GRACE` (10 minutes for a weekly schedule, 6 s for one that ticks every minute)."""
        previous, upcoming = self._align_to_prev(now), self._align_to_next(now)
        if upcoming == previous:  # now is a tick
            upcoming = self._get_next(now)
        return min(MAX_GRACE, (upcoming - previous) / 10)

    def next_dagrun_info(self, *, last_automated_data_interval: Any, restriction: Any) -> DagRunInfo | None:
        info = super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval,
                                        restriction=restriction)
        if info is None or restriction.catchup:
            return info
        now = _core.coerce_datetime(_core.utcnow())
        if info.run_after >= now - self.grace_for(now):
            return info  # the tick is ahead, or has only just passed
        upcoming = self._align_to_next(now)
        if restriction.latest is not None and restriction.latest < upcoming:
            return None
        return DagRunInfo.interval(upcoming - self._interval, upcoming)  # type: ignore[arg-type]

    @property
    def summary(self) -> str:
        return f"{super().summary} (at its tick only)"
