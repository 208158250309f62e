"""`StageDataOperator`: put training data where the job reads it, through the stage step.

What staging is, the backend says: the default one copies a local directory, ``file://`` URI or ``s3://`` prefix into
a local directory (standing for the FSx mount); SageMaker makes an S3 prefix visible on an FSx for Lustre file system
(``destination="fsx://fs-.../path"``: a data repository association and an import task). Both are
`trainops.steps.stage.stage`, the call the pipeline runner and the KFP component make too. With ``strict`` (default)
any refused or failed file fails the task, naming it.

Waiting (`trainops.operators.deferral`): a backend that can start a stage without waiting for it (capability
``start_stage``: SageMaker's FSx import task) has the task start it and record it (``on_kill`` cancels that task),
then defer on it through the one trigger (``deferrable=True``, default ``[operators] default_deferrable``) or look at
it from the worker. A backend that cannot (the local copy, made by this worker's own processes) runs it in the
worker, and with ``deferrable=True`` the task log says so; killing the task ends the copy with it. Both paths push the
same XCom value (the stage report). Nothing here names a backend.

Function-local imports (DAG-parse path): a DAG file imports this operator (bench/dag_parse.py measures the
parse); the stage step and the backend's staging load when its task runs.
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
from trainops.operators.deferral import StartedJobMixin
from trainops.operators.lineage import LineageMixin, remember_lineage


class StageDataOperator(StartedJobMixin, LineageMixin, BaseOperator):
    """Stage ``source`` into ``destination``; the XCom value is the stage report (small JSON, lists capped).

    Args:
        source: local path, ``file://`` URI or ``s3://bucket/prefix``.
        destination: local directory (local backend), or ``fsx://fs-0123456789abcdef0/path`` (SageMaker backend).
        backend: a registered or named backend (default: the registry's default); ``backend_options``: its one
            mapping of settings (templated); ``backend_conn_id``: an Airflow connection holding them (see
            `trainops.operators.backend_choice`).
        workers: parallel copies (local backend).
        s3_prefix: FSx staging: the S3 prefix to link, when the source is not already it.
        strict: fail the task when any file was refused (hostile names) or failed.
        aws_conn_id, region_name: the Airflow AWS connection (S3 sources, FSx) and the region (the deployment's
            context, handed to any backend).
        options: further options of the stage step (``delete``, ``paths``, ``report_uri``, ``poll_seconds``,
            ``timeout_seconds``); an unknown one fails the task, named.
        deferrable: wait for the FSx import task in the triggerer (default ``[operators] default_deferrable``;
            a local copy always runs in the worker).
        check_interval: seconds between two looks at the import task.
    """

    template_fields: Sequence[str] = ("source", "destination", "backend", "workers", "s3_prefix", "aws_conn_id",
                                      "region_name", "options", "backend_options", "backend_conn_id")
    ui_color = "#e3f0d8"

    def __init__(
        self,
        *,
        source: str,
        destination: str,
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        backend_conn_id: str | None = None,
        workers: int | None = None,
        s3_prefix: str | None = None,
        strict: bool = True,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        options: dict[str, Any] | None = None,
        deferrable: bool | None = None,
        check_interval: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self._waiting_settings(deferrable, check_interval)
        self.source = source
        self.destination = destination
        self.backend = backend
        self.backend_options = backend_options
        self.backend_conn_id = backend_conn_id
        self.workers = workers
        self.s3_prefix = s3_prefix
        self.strict = strict
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.options = options

    job_kind = "stage"
    capability = "start_stage"
    #: Added to the import's timeout for the wait's bound.
    GRACE_SECONDS = 600.0
    #: The FSx import's own default timeout (`trainops.backends.sagemaker.fsx.stage`).
    DEFAULT_TIMEOUT_SECONDS = 6 * 3600.0

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.steps.stage import CONTEXT_OPTIONS, stage, stage_options

        self._begin_try(context)
        with translated_errors():
            check_backend(self.backend)
            options: dict[str, Any] = dict(self.options or {})
            options["strict"] = self.strict
            if self.workers is not None:
                options["workers"] = self.workers
            if self.s3_prefix:
                options["s3_prefix"] = self.s3_prefix
            # FSx and s3:// sources use clients from the connection; a backend that never calls AWS never reads it.
            choice = self._choice()  # one choice per execute: the connection (backend_conn_id) is read once
            chosen = choice.open()
            # Options the step takes as context (a profile...) or refuses (unknown: its message names them) go to it.
            plain = set(options) <= stage_options(chosen) and not set(options) & CONTEXT_OPTIONS
            if plain and self._starts_jobs(chosen):
                from trainops.backends.job_kinds import StageRequest, started_staging  # not at DAG parse

                handle = started_staging(chosen).start(StageRequest(self.source, self.destination, options))
                timeout = float(options.get("timeout_seconds") or self.DEFAULT_TIMEOUT_SECONDS)
                return self._follow(chosen, handle, max_run=timeout, grace=self.GRACE_SECONDS)
            if not plain:  # the step opens the backend with that context, or refuses what it does not take
                name, settings = choice.settings()
                options.setdefault("client_factory", lazy_aws_client_factory(self.aws_conn_id, self.region_name))
                report = stage(self.source, self.destination, backend=name, backend_options=settings, **options)
            else:
                report = stage(self.source, self.destination, backend=chosen, **options)
        return self._report(report)

    def _why_not_deferred(self, backend: Any) -> str:
        return "a local stage is a copy made by this worker's processes; it ends with the task"

    def _finish(self, backend: Any, handle: Any) -> dict[str, Any]:
        """The ended import task's report (a failed file fails the task, naming the report's place)."""
        from trainops.backends.job_kinds import started_staging

        report: dict[str, Any] = started_staging(backend).result(handle).to_dict()
        return self._report(report)

    def _report(self, report: dict[str, Any]) -> dict[str, Any]:
        remember_lineage(self, [self.source], [self.destination])
        log = task_logger(self)
        log(f"staged {self.source} -> {self.destination}: "
            + ", ".join(f"{key} {report[key]}" for key in ("files_copied", "files_skipped", "bytes_copied",
                                                            "refused_count", "failed_count", "directory_path")
                        if key in report))
        return report
