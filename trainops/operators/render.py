"""`RenderTrainingJobOperator`: the dry run as a task. Shows exactly what the backend would create (local and
SageMaker: the CreateTrainingJob request), calls nothing.

It renders the spec with the same job name the training task of the same DAG run will use (pass that task's
``job_name`` base and ``task_id`` as ``for_task_id``), so what the log shows is, byte for byte, what
``DistributedTrainingOperator`` would have its backend create (`Backend.render_request`). Secret-looking
environment values are masked. Put it before the training task to review requests in the UI, or run it alone on a
machine with no access to the backend.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainops.operators.common import task_identity, translated_errors, with_shorthands
from trainops.operators.compat import BaseOperator


class RenderTrainingJobOperator(BaseOperator):
    """Render a job spec to what its backend would create and log it (masked); nothing is called.

    Args:
        spec: the job spec (mapping, YAML/JSON path or ``JobSpec``).
        job_name: the base of the job name, as given to the training task.
        for_task_id: the training task whose job name to show (default: this task's id).
        backend: the training task's backend (a registered or named one; default: the registry's default).
        backend_options: the training task's backend settings (templated), one mapping.
        launcher: shorthand for ``backend_options`` ``launcher``; region_name: the region when the spec has none (the
            deployment's context, handed to any backend).

    Returns (XCom): the backend's summary (`Backend.render_summary`; local and SageMaker: ``{job_name, region,
    training_image, instance_type, instance_count, instance_groups, distribution, launcher, channels,
    max_run_seconds, max_wait_seconds, spot, vpc}``); the whole request is in the task log.
    """

    template_fields: Sequence[str] = ("spec", "job_name", "for_task_id", "launcher", "region_name", "backend",
                                      "backend_options")
    template_fields_renderers = {"spec": "json", "backend_options": "json"}
    ui_color = "#eeeeee"

    def __init__(
        self,
        *,
        spec: Any,
        job_name: str | None = None,
        for_task_id: str | None = None,
        launcher: str | None = None,
        region_name: str | None = None,
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.backend = backend
        self.backend_options = backend_options
        self.spec = spec
        self.job_name = job_name
        self.for_task_id = for_task_id
        self.launcher = launcher
        self.region_name = region_name

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.backends.api import get_backend
        from trainops.spec.names import deterministic_job_name
        from trainops.steps.train import load_spec

        with translated_errors():
            spec = load_spec(self.spec, backend=self.backend)  # by the spec rules its backend binds
            dag_id, task_id, run_id, map_index = task_identity(context)
            target = self.for_task_id or task_id
            # The same parts as trainops.operators.common.task_job_name, for the training task's id.
            name = deterministic_job_name(self.job_name or spec.name or target, dag_id, target, run_id, map_index)
            # The region is the deployment's context (any backend is handed it); the launcher a job option.
            options = with_shorthands(self.backend_options, launcher=self.launcher)
            backend = get_backend(self.backend, options=options, source="backend_options", region=self.region_name)
            rendered = backend.render_request(spec, name)
            summary = backend.render_summary(rendered, spec)
        shown = rendered if isinstance(rendered, str) else json.dumps(rendered, indent=2)
        self.log.info("what the %s backend would create (dry run, nothing was sent):\n%s", backend.name, shown)
        return summary
