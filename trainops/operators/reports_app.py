"""The API server's app of evaluation report pages (Airflow 3; see `trainops.operators.reports`), imported by the
API server on the first request under ``/trainops``. Annotations are evaluated (no postponed annotations): FastAPI
reads them to build the route."""

from typing import Annotated

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.models.xcom import XComModel
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse
from sqlalchemy import select

from trainops.operators.reports import HEADERS, REPORT_KEY

app = FastAPI(title="trainops evaluation reports", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/reports/{dag_id}/{run_id}/{task_id}", response_class=HTMLResponse,
         dependencies=[Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM))])
def report(dag_id: str, run_id: str, task_id: str, session: SessionDep,
           map_index: Annotated[int, Query(ge=-1)] = -1) -> HTMLResponse:
    """The report page a task instance kept, to whoever may read the DAG's XComs, sandboxed (`HEADERS`)."""
    row = session.scalars(select(XComModel).where(
        XComModel.dag_id == dag_id, XComModel.run_id == run_id, XComModel.task_id == task_id,
        XComModel.map_index == map_index, XComModel.key == REPORT_KEY)).first()
    if row is None:
        raise HTTPException(404, f"no evaluation report for task {task_id} of {dag_id} / {run_id}")
    page = XComModel.deserialize_value(row)
    if not isinstance(page, str):
        raise HTTPException(404, f"the {REPORT_KEY} XCom of {task_id} is not a page")
    return HTMLResponse(page, headers=HEADERS)
