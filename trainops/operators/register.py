"""`RegisterModelOperator`: record the trained, evaluated model as a new version of a model group.

`trainops.steps.register.register` on the task's backend's registry: the local one (a directory, default
``$TRAINOPS_HOME/registry``), the SageMaker Model Registry (a model package), or another backend's. Approval is
SageMaker's vocabulary (Approved, Rejected, PendingManualApproval); the latest Approved version is the group's
champion, which champion gates compare with.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainops.operators.common import check_backend, translated_errors, with_retry_defaults, with_shorthands
from trainops.operators.compat import BaseOperator
from trainops.operators.lineage import LineageMixin, remember_lineage
from trainops.operators.links import ModelVersionLink, remember_links


class RegisterModelOperator(LineageMixin, BaseOperator):
    """Register a model version; the XCom value is the step's small JSON.

    Args:
        model_artifact: the training job's ``model.tar.gz`` (local path, or ``s3://`` for SageMaker).
        metrics: the evaluation's metrics (``evaluate.output["metrics"]`` with ``multiple_outputs``).
        group: the model group.
        approval: ``Approved`` (default), ``Rejected`` or ``PendingManualApproval``.
        spec: the job spec that produced the model (stored locally; its hash on SageMaker).
        backend: a registered or named backend (default: the registry's default); ``backend_options``: its one
            mapping of settings (templated); ``backend_conn_id``: an Airflow connection holding them (see
            `trainops.operators.backend_choice`).
        registry_dir: local registry directory.
        job_name: the training job that produced the model.
        description: as for the register step.
        registration_settings: the registration's settings on its backend (templated;
            `Registry.SETTINGS`: another refuses them, naming them); image_uri, metrics_uri: shorthands
            for those of that name.
        aws_conn_id, region_name: the Airflow AWS connection and the region (the deployment's context, handed to
            any backend).

    Returns (XCom): ``{backend, group, version, approval_status, model_artifact, metrics, champion, created,
    job_name, location}``.
    """

    template_fields: Sequence[str] = ("model_artifact", "metrics", "group", "approval", "spec", "backend",
                                      "registry_dir", "job_name", "description", "image_uri", "metrics_uri",
                                      "aws_conn_id", "region_name", "backend_options", "backend_conn_id",
                                      "registration_settings")
    template_fields_renderers = {"metrics": "json", "spec": "json", "backend_options": "json"}
    operator_extra_links = (ModelVersionLink(),)
    ui_color = "#e8dcf2"

    def __init__(
        self,
        *,
        model_artifact: str,
        metrics: dict[str, Any],
        group: str,
        approval: str = "Approved",
        spec: Any = None,
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        backend_conn_id: str | None = None,
        registry_dir: str | None = None,
        job_name: str | None = None,
        description: str = "",
        image_uri: str | None = None,
        metrics_uri: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        registration_settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.registration_settings = registration_settings
        self.model_artifact = model_artifact
        self.metrics = metrics
        self.group = group
        self.approval = approval
        self.spec = spec
        self.backend = backend
        self.backend_options = backend_options
        self.backend_conn_id = backend_conn_id
        self.registry_dir = registry_dir
        self.job_name = job_name
        self.description = description
        self.image_uri = image_uri
        self.metrics_uri = metrics_uri
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.operators.backend_choice import BackendChoice
        from trainops.steps.register import register

        with translated_errors():
            check_backend(self.backend)
            # The AWS connection's clients reach a backend that calls AWS; one that does not never reads it.
            chosen = BackendChoice.of_task(self).open(registry_dir=self.registry_dir)
            entry = register(model_artifact=self.model_artifact, metrics=self.metrics or {}, group=self.group,
                             spec=self.spec, approval=self.approval, backend=chosen, job_name=self.job_name,
                             description=self.description or "",
                             **with_shorthands(self.registration_settings, "registration_settings",
                                               image_uri=self.image_uri, metrics_uri=self.metrics_uri))
        remember_lineage(self, [self.model_artifact], [entry.get("location")])
        remember_links(self, chosen, "model", str(entry.get("location") or ""))
        self.log.info("registered %s version %s (%s)%s", entry["group"], entry["version"], entry["approval_status"],
                      ", now the champion" if entry.get("champion") else "")
        return entry
