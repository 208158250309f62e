"""trainops' Airflow plugin (entry point ``airflow.plugins``): what Airflow's components must find by name.

- the timetable `trainops.operators.timetables.TickOnlyCronTimetable` (Airflow deserializes a timetable only when a
  plugin registers it);
- Airflow 3: the API server's app of evaluation report pages (`trainops.operators.reports`, behind the evaluate
  task's *Evaluation report* link), built on its first request.

Loading it imports Airflow's core timetables, nothing else.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from typing import Any

from airflow import __version__ as airflow_version
from airflow.plugins_manager import AirflowPlugin

from trainops.operators.reports import URL_PREFIX
from trainops.operators.timetables import TickOnlyCronTimetable


class ReportsApp:
    """An ASGI app that imports the API server's app of report pages (`trainops.operators.reports_app`) on its
    first request: this plugin loads in every component; only the API server ever serves a page."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from trainops.operators.reports_app import app

            self._app = app
        await self._app(scope, receive, send)


class TrainopsPlugin(AirflowPlugin):
    name = "trainops"
    timetables = [TickOnlyCronTimetable]
    if not airflow_version.startswith("2."):
        fastapi_apps = [{"app": ReportsApp(), "url_prefix": URL_PREFIX, "name": "trainops evaluation reports"}]
