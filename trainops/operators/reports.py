"""The evaluation report in Airflow's UI (Airflow 3): the evaluate task's *Evaluation report* link opens the page.

The evaluate task renders the report KFP shows too (`trainops.steps.report`: the gate's verdict, every metric, the
loss curve and the script's other plots inlined, the script's ``report.md`` rendered as HTML by the one Markdown
renderer, `trainops.steps.markdown`, which escapes every character of it: no raw HTML of the report passes) and
keeps it as an XCom of the task instance (`REPORT_KEY`), so it lives in Airflow's database whichever worker ran the
evaluation (its files stay on that worker, or in S3). trainops' Airflow plugin mounts a small app on the API server
(`URL_PREFIX`) that serves it at ``/trainops/reports/<dag_id>/<run_id>/<task_id>?map_index=N`` to whoever may read
the DAG's XComs (Airflow's own authorization: the UI's session cookie or a bearer token), under a sandboxing
Content-Security-Policy: the page is the evaluation script's output, so it runs no script and reaches nothing,
whatever it holds.

Nothing heavy is imported at parse time: the app (FastAPI, the API server's security) is imported on its first
request.
Airflow 2.11 has no FastAPI plugins: there the link is empty and the report stays an XCom.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

#: The XCom key of the report page (HTML text).
REPORT_KEY = "trainops_evaluation_report"
URL_PREFIX = "/trainops"
#: A report larger than this is kept without its plots (a line names each): XComs live in Airflow's database.
MAX_REPORT_BYTES = 2 * 1024 * 1024
#: The page runs no script, loads nothing but its own inline images and styles, and is its own origin.
HEADERS = {"Content-Security-Policy": "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def report_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The page's path on the API server."""
    return (f"{URL_PREFIX}/reports/{quote(dag_id, safe='')}/{quote(run_id, safe='')}/{quote(task_id, safe='')}"
            f"?map_index={map_index}")


def report_page(evaluation: dict[str, Any], title: str) -> str:
    """The report page of an evaluation result, within `MAX_REPORT_BYTES` (its plots dropped when too large)."""
    from trainops.steps.report import render_report

    page = render_report(evaluation, title=title)
    if len(page.encode("utf-8")) > MAX_REPORT_BYTES:
        page = render_report(evaluation, title=title, embed=False).replace(
            "<h2>Metrics</h2>", "<p>plots not embedded (the page would exceed "
            f"{MAX_REPORT_BYTES // (1024 * 1024)} MiB): see the evaluation output</p><h2>Metrics</h2>", 1)
    return page
