"""The extra links of the operators: where a person follows the job a task created (its page, its logs), the
evaluation's job and the registered model version, as the task's backend declares them (`Backend.links`: on
SageMaker the AWS console pages; a backend whose jobs have no such page declares none, and the link is empty).

Airflow computes extra links in the worker when a try ends (deferred included) and stores the text in XCom; the UI
shows that text later. An operator keeps each link's URL on itself as soon as it knows the job (`remember_links`),
so the link exists while the task is deferred, after it failed, and after it succeeded. Nothing here knows a
backend.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainops.operators.compat import AIRFLOW_2, BaseOperatorLink

#: Attribute of an operator holding ``{"<kind>_<link>": url}`` once the job is known.
LINKS_ATTRIBUTE = "_trainops_links"


def remember_links(operator: Any, backend: Any, kind: str, name: str | None,
                   location: Mapping[str, str] | None = None) -> None:
    """Record the pages ``backend`` declares for its job of ``kind`` called ``name`` (nothing for a backend that
    declares none, or without a name); a link it cannot make now leaves the one recorded before."""
    if not name or backend is None:
        return
    try:
        found = backend.links(kind, name, dict(location or {}))
    except Exception:  # noqa: BLE001 - a link is a convenience: it never fails a task
        return
    if found:
        links = dict(getattr(operator, LINKS_ATTRIBUTE, None) or {})
        links.update({f"{kind}_{link}": url for link, url in found.items() if url})
        setattr(operator, LINKS_ATTRIBUTE, links)


class _JobLink(BaseOperatorLink):
    key = ""

    def get_link(self, operator: Any, *, ti_key: Any = None) -> str:
        return str((getattr(operator, LINKS_ATTRIBUTE, None) or {}).get(self.key) or "")


class TrainingJobLink(_JobLink):
    """"Training job": the page of the job the task created or re-attached to."""

    name = "Training job"
    key = "training_job"


class TrainingLogsLink(_JobLink):
    """"Training logs": the job's logs, every host."""

    name = "Training logs"
    key = "training_logs"


class EvaluationJobLink(_JobLink):
    """"Evaluation job": the page of the evaluation's job."""

    name = "Evaluation job"
    key = "evaluation_job"


class ModelVersionLink(_JobLink):
    """"Model version": the page of the version the task registered."""

    name = "Model version"
    key = "model_job"


#: Attribute of an evaluate operator set once its report page is an XCom (`trainops.operators.reports`).
REPORT_ATTRIBUTE = "_trainops_report"


class EvaluationReportLink(BaseOperatorLink):
    """"Evaluation report": the page of the gate's verdict, the metrics and the loss curve, served by trainops'
    plugin on the API server (Airflow 3; empty on 2.11, and before the evaluation ended)."""

    name = "Evaluation report"

    def get_link(self, operator: Any, *, ti_key: Any = None) -> str:
        if AIRFLOW_2 or ti_key is None or not getattr(operator, REPORT_ATTRIBUTE, False):
            return ""
        from airflow.configuration import conf

        from trainops.operators.reports import report_path

        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        return base + report_path(ti_key.dag_id, ti_key.run_id, ti_key.task_id, getattr(ti_key, "map_index", -1))
