"""`RegisterModelOperator`: record the trained, evaluated model as a new version of a model group.

`trainops.steps.register.register` on the local registry (a directory, default ``$TRAINOPS_HOME/registry``) or the
SageMaker Model Registry (a model package). Approval is SageMaker's vocabulary (Approved, Rejected,
PendingManualApproval); the latest Approved version is the group's champion, which champion gates compare with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainops.operators.common import check_backend, lazy_aws_client_factory, translated_errors, with_retry_defaults
from trainops.operators.compat import BaseOperator
from trainops.operators.lineage import LineageMixin, remember_lineage
from trainops.operators.links import ModelPackageLink, remember_link


class RegisterModelOperator(LineageMixin, BaseOperator):
    """Register a model version; the XCom value is the step's small JSON.

    Args:
        model_artifact: the training job's ``model.tar.gz`` (local path, or ``s3://`` for SageMaker).
        metrics: the evaluation's metrics (``evaluate.output["metrics"]`` with ``multiple_outputs``).
        group: the model group.
        approval: ``Approved`` (default), ``Rejected`` or ``PendingManualApproval``.
        spec: the job spec that produced the model (stored locally; its hash on SageMaker).
        backend: ``local`` (default) or ``sagemaker``.
        registry_dir: local registry directory.
        job_name: the training job that produced the model.
        description, image_uri, metrics_uri, aws_conn_id, region_name: as for the register step (the last four are
            SageMaker only).

    Returns (XCom): ``{backend, group, version, approval_status, model_artifact, metrics, champion, created,
    job_name, location}``.
    """

    template_fields: Sequence[str] = ("model_artifact", "metrics", "group", "approval", "spec", "backend",
                                      "registry_dir", "job_name", "description", "image_uri", "metrics_uri",
                                      "aws_conn_id", "region_name")
    template_fields_renderers = {"metrics": "json", "spec": "json"}
    operator_extra_links = (ModelPackageLink(),)
    ui_color = "#e8dcf2"

    def __init__(
        self,
        *,
        model_artifact: str,
        metrics: dict[str, Any],
        group: str,
        approval: str = "Approved",
        spec: Any = None,
        backend: str = "local",
        registry_dir: str | None = None,
        job_name: str | None = None,
        description: str = "",
        image_uri: str | None = None,
        metrics_uri: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.model_artifact = model_artifact
        self.metrics = metrics
        self.group = group
        self.approval = approval
        self.spec = spec
        self.backend = backend
        self.registry_dir = registry_dir
        self.job_name = job_name
        self.description = description
        self.image_uri = image_uri
        self.metrics_uri = metrics_uri
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.steps.register import register

        with translated_errors():
            backend = check_backend(self.backend)
            # SageMaker's clients come from the connection; the local registry never reads it.
            options: dict[str, Any] = {"client_factory": lazy_aws_client_factory(self.aws_conn_id, self.region_name),
                                       "region": self.region_name}
            entry = register(model_artifact=self.model_artifact, metrics=self.metrics or {}, group=self.group,
                             spec=self.spec, approval=self.approval, backend=backend, registry_dir=self.registry_dir,
                             job_name=self.job_name, description=self.description or "", image_uri=self.image_uri,
                             metrics_uri=self.metrics_uri, **options)
        remember_lineage(self, [self.model_artifact], [entry.get("location")])
        location = str(entry.get("location") or "")
        if location.startswith("arn:"):  # a SageMaker model package: its console page (the region is in the ARN)
            remember_link(self, "model_package", location, location.split(":")[3] or self.region_name)
        self.log.info("registered %s version %s (%s)%s", entry["group"], entry["version"], entry["approval_status"],
                      ", now the champion" if entry.get("champion") else "")
        return entry
