"""`StageDataOperator`: put training data where the job reads it, through the stage step.

``backend="local"`` copies a local directory, ``file://`` URI or ``s3://`` prefix into a local directory (standing
for the FSx mount); ``backend="sagemaker"`` makes an S3 prefix visible on an FSx for Lustre file system
(``destination="fsx://fs-.../path"``: a data repository association and an import task). Both are
`trainops.steps.stage.stage`, the call the pipeline runner and the KFP component make too. With ``strict`` (default)
any refused or failed file fails the task, naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainops.operators.common import (
    check_backend,
    lazy_aws_client_factory,
    task_logger,
    translated_errors,
    with_retry_defaults,
)
from trainops.operators.compat import BaseOperator
from trainops.operators.lineage import LineageMixin, remember_lineage


class StageDataOperator(LineageMixin, BaseOperator):
    """Stage ``source`` into ``destination``; the XCom value is the stage report (small JSON, lists capped).

    Args:
        source: local path, ``file://`` URI or ``s3://bucket/prefix``.
        destination: local directory (local backend), or ``fsx://fs-0123456789abcdef0/path`` (SageMaker backend).
        backend: ``local`` (default) or ``sagemaker``.
        workers: parallel copies (local backend).
        s3_prefix: FSx staging: the S3 prefix to link, when the source is not already it.
        strict: fail the task when any file was refused (hostile names) or failed.
        aws_conn_id, region_name: the Airflow AWS connection and region (S3 sources, FSx).
        options: further options of the stage step (``delete``, ``paths``, ``report_uri``, ``poll_seconds``,
            ``timeout_seconds``); an unknown one fails the task, named.
    """

    template_fields: Sequence[str] = ("source", "destination", "backend", "workers", "s3_prefix", "aws_conn_id",
                                      "region_name", "options")
    ui_color = "#e3f0d8"

    def __init__(
        self,
        *,
        source: str,
        destination: str,
        backend: str = "local",
        workers: int | None = None,
        s3_prefix: str | None = None,
        strict: bool = True,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.source = source
        self.destination = destination
        self.backend = backend
        self.workers = workers
        self.s3_prefix = s3_prefix
        self.strict = strict
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.options = options

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.steps.stage import stage

        with translated_errors():
            backend = check_backend(self.backend)
            options: dict[str, Any] = dict(self.options or {})
            options["strict"] = self.strict
            if self.workers is not None:
                options["workers"] = self.workers
            if self.s3_prefix:
                options["s3_prefix"] = self.s3_prefix
            # FSx and s3:// sources use clients from the connection; a local copy never reads it.
            options["client_factory"] = lazy_aws_client_factory(self.aws_conn_id, self.region_name)
            report = stage(self.source, self.destination, backend=backend, **options)
        remember_lineage(self, [self.source], [self.destination])
        log = task_logger(self)
        log(f"staged {self.source} -> {self.destination}: "
            + ", ".join(f"{key} {report[key]}" for key in ("files_copied", "files_skipped", "bytes_copied",
                                                            "refused_count", "failed_count", "directory_path")
                        if key in report))
        return report
