"""Unpausing starts no run; the tick and new data do (issue 37 item 2), under the real Airflow components (the
``airflow`` fixture and helpers of test_airflow_scheduler.py: api-server, scheduler, dag-processor on a temporary
home), with the scheduler creating scheduled runs as a deployment's does (``use_job_schedule`` on).

- ``retrain_pipeline`` (weekly, Mondays 03:00 UTC, or on an asset event) is unpaused days after its last Monday:
  no run is created (Airflow's own cron timetables with ``catchup=False`` create that Monday's at once); its next
  run is the coming Monday. An asset event on its training data then starts a run at once.
- A DAG on the same timetable ticking every minute is unpaused well after a tick (the clock's second >= 10), once the
  DAG processor has stored the coming tick as its next run: no run for that missed tick, and a run at a later tick,
  which proves the tick still starts runs with the real scheduler.

The next run is computed when the DAG processor parses the file, so a tick stays due for its grace plus up to one parse
interval (docs/airflow.md says so); the test unpauses after that, as its claim is about the timetable, not the parse.
A tick whose run the scheduler creates later than its grace (6 s here, under load) is skipped by design, so the run
that proves the tick may be the one after next.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from support.airflow_db import answer, coming_tick_stored, utc
from test_airflow_scheduler import airflow, airflow_cli, processes_of, query, rest  # noqa: F401 - the fixture

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(900)]

EVERY_MINUTE = '''
"""The retraining DAG's timetable, ticking every minute: one task that does nothing."""
from datetime import datetime, timezone
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG
from trainops.operators.timetables import TickOnlyCronTimetable

with DAG(dag_id="tick_every_minute", schedule=TickOnlyCronTimetable("* * * * *", timezone="UTC"),
         start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False, is_paused_upon_creation=True):
    EmptyOperator(task_id="nothing")
'''


def runs(database, dag_id: str) -> list[tuple[str, str, datetime]]:
    """(run_id, run_type, run_after) of every run of a DAG, once the database answers (busy is not "no runs")."""
    return [(run_id, run_type, utc(after)) for run_id, run_type, after in
            answer(database, "SELECT run_id, run_type, run_after FROM dag_run WHERE dag_id = ?", dag_id)]


def wait_for(condition, what: str, components, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n" + components.tail()
        time.sleep(0.5)
    return value


def test_unpausing_starts_no_run_but_the_tick_and_new_data_do(airflow):  # noqa: F811
    home, env, components = airflow
    database = home / "airflow.db"
    env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "True"  # the scheduler creates scheduled runs, as deployed
    (home / "dags" / "tick_every_minute.py").write_text(EVERY_MINUTE)
    components.start("api-server", "api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"])
    components.start("dag-processor", "dag-processor")
    components.start("scheduler", "scheduler")
    for dag_id in ("retrain_pipeline", "tick_every_minute"):
        wait_for(lambda dag_id=dag_id: query(database, "SELECT next_dagrun FROM dag WHERE dag_id = ? AND "
                                                       "next_dagrun IS NOT NULL", dag_id), dag_id, components, 240)
    # Unpause well after a minute's tick, so that tick is missed (and the next one at least 20 s away), at a moment
    # when the stored next run is already the coming tick (a parse before the tick stored the missed one).
    wait_for(lambda: coming_tick_stored(database, "tick_every_minute"), "a quiet second with the coming tick stored", components, 180)
    unpaused = datetime.now(timezone.utc)
    for dag_id in ("retrain_pipeline", "tick_every_minute"):
        done = airflow_cli(env, "dags", "unpause", dag_id)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    ticked = wait_for(lambda: runs(database, "tick_every_minute"), "a later tick's run", components, 240)
    assert [kind for _, kind, _ in ticked] == ["scheduled"], (unpaused, ticked)
    [(_, _, after)] = ticked
    assert after > unpaused and (after.second, after.microsecond) == (0, 0), (unpaused, ticked)
    # The scheduler has created runs since both were unpaused: none of the weekly DAG's (its last Monday is days old).
    assert runs(database, "retrain_pipeline") == []
    [(upcoming,)] = answer(database, "SELECT next_dagrun_create_after FROM dag WHERE dag_id = 'retrain_pipeline'")
    assert utc(upcoming) > unpaused and utc(upcoming).weekday() == 0 and utc(upcoming).hour == 3

    # New data: an asset event on the training data starts a run at once.
    [asset] = rest(env, "GET", "/api/v2/assets?uri_pattern=x-trainops://digits/training-data")["assets"]
    rest(env, "POST", "/api/v2/assets/events", {"asset_id": asset["id"], "extra": {"from": "the test"}})
    [(run_id, kind, _)] = wait_for(lambda: runs(database, "retrain_pipeline"), "the asset's run", components, 180)
    assert kind == "asset_triggered"
    rest(env, "PATCH", f"/api/v2/dags/retrain_pipeline/dagRuns/{run_id}", {"state": "failed"})  # no training here

    components.stop_all()
    deadline = time.monotonic() + 30
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(home) == [], "processes of this Airflow home are still running"
