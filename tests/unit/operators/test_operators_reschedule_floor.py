"""The reschedule mode's shortest pause (issue 26 item 1): a poke asks Airflow for the next look no sooner than
`MIN_RESCHEDULE_SECONDS`, whatever ``check_interval`` says, because Airflow's scheduler fails a rescheduled task
whose previous poke's executor event arrives after it was queued again (apache/airflow#71172; the real-scheduler
test tests/system/test_airflow_scheduler_reschedule.py failed that way with 2 s pokes)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.backends.api import JobHandle, JobResult  # noqa: E402
from trainops.backends.states import JobStatus  # noqa: E402
from trainops.operators.compat import AirflowRescheduleException  # noqa: E402
from trainops.operators.training import MIN_RESCHEDULE_SECONDS, DistributedTrainingOperator  # noqa: E402


@pytest.mark.parametrize(("interval", "expected"), [(2.0, MIN_RESCHEDULE_SECONDS), (120.0, 120.0)])
def test_a_poke_reschedules_no_sooner_than_the_floor(interval, expected):
    operator = DistributedTrainingOperator(task_id="train", spec={}, wait_mode="reschedule", check_interval=interval)
    handle = JobHandle("local", "tiny-0123456789", workdir="/tmp/state")
    running = JobResult(backend="local", job_name=handle.job_name, status=JobStatus.IN_PROGRESS)
    before = datetime.now(timezone.utc)
    with pytest.raises(AirflowRescheduleException) as raised:
        operator._poke(None, None, "tiny", handle, running)
    pause = raised.value.reschedule_date - before
    assert timedelta(seconds=expected) <= pause < timedelta(seconds=expected + 5)
