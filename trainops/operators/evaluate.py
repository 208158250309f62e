"""`EvaluateModelOperator` and `QualityGateOperator`: score the model, then let the gate decide what runs next.

The evaluation is `trainops.steps.evaluate.evaluate` (the user's script under the evaluation contract, then the
gates, champion gates included). What a failed gate does is configurable, because teams want different things:

- ``fail`` (default): the task fails with every failed gate's message (metric, value, threshold);
- ``skip_downstream``: the task succeeds and every task downstream of it is skipped (no registration);
- ``continue``: the task succeeds and the result says ``passed: false``; a later `QualityGateOperator` decides.

The retraining DAG evaluates with ``continue`` and decides in a separate ``gate`` task, so the metrics are in XCom
whatever the verdict, and the verdict is its own box in the grid.

Waiting (`trainops.operators.deferral`): a backend that can start an evaluation without waiting for it
(capability ``start_evaluation``) has the task start the job, named from the task instance (a retry re-attaches),
and record it (``on_kill`` stops that job), then defer on it through the one trigger (``deferrable=True``, default
``[operators] default_deferrable``) or look at it from the worker; the gates are checked when it completed, the
champion looked up then. Both paths push the same XCom value, and the report page (the verdict, the metrics, the
loss curve) as the XCom behind the task's *Evaluation report* link (`trainops.operators.reports`). Nothing here
names a backend.

Function-local imports (DAG-parse path): a DAG file imports this operator (bench/dag_parse.py measures the
parse); the evaluate step, its report and the backend's evaluations load when its task runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainops.operators.common import (
    check_backend,
    task_job_name,
    translated_errors,
    with_retry_defaults,
    with_shorthands,
)
from trainops.operators.compat import AirflowException, AirflowFailException, BaseOperator, SkipMixin
from trainops.operators.deferral import StartedJobMixin
from trainops.operators.kills import task_instance_of
from trainops.operators.lineage import LineageMixin, remember_lineage
from trainops.operators.links import REPORT_ATTRIBUTE, EvaluationJobLink, EvaluationReportLink, remember_links

ON_GATE_FAILURE = ("fail", "skip_downstream", "continue")


def apply_gate(operator: Any, context: Any, evaluation: dict[str, Any], on_gate_failure: str,
               result: Any = None) -> None:
    """Act on an evaluation result (``EvaluationResult.to_dict()``) as ``on_gate_failure`` says.

    Skipping downstream ends the task with Airflow's skip signal, which loses the return value: ``result``, when
    given, is pushed as the task's XCom first, so the metrics stay visible.
    """
    if on_gate_failure not in ON_GATE_FAILURE:
        raise AirflowFailException(f"invalid input: 1 problem\n  - on_gate_failure: {on_gate_failure!r} is not one of "
                                   f"{', '.join(ON_GATE_FAILURE)}")
    if not isinstance(evaluation, dict) or "passed" not in evaluation:
        raise AirflowFailException(f"evaluation: expected an evaluation result with 'passed' and 'metrics', got "
                                   f"{type(evaluation).__name__}")
    message = evaluation.get("message") or ("gate passed" if evaluation["passed"] else "gate failed")
    if evaluation["passed"]:
        operator.log.info("%s", message)
        return
    if on_gate_failure == "fail":
        # A failed gate is a verdict on the model, not a flaky step: AirflowException keeps retries possible for
        # users who want them, but the message is the point.
        raise AirflowException(message)
    operator.log.warning("%s", message)
    if on_gate_failure == "skip_downstream":
        downstream = [task for task in context["task"].get_flat_relatives(upstream=False)
                      if not getattr(task, "is_teardown", False)]
        operator.log.warning("skipping downstream tasks: %s", ", ".join(sorted(t.task_id for t in downstream)))
        if result is not None:
            context["ti"].xcom_push(key="return_value", value=result)
        operator.skip(ti=context["ti"], tasks=downstream)


class EvaluateModelOperator(StartedJobMixin, LineageMixin, BaseOperator, SkipMixin):
    """Evaluate a trained model with the user's script and check the quality gate.

    Args:
        entry_point, source_dir: the evaluation script and its directory (docs/contracts.md section 6).
        model_artifact: the training job's ``model.tar.gz`` (local path, or ``s3://`` on SageMaker).
        channels: data by channel name (``{"test": ...}``).
        output_dir: where ``metrics.json`` and the script's other files go (an S3 prefix on SageMaker).
        gate: ``"accuracy >= 0.95"``, a mapping, a list of them, or None; ``... > champion`` compares with the
            latest Approved version of ``champion_group``.
        on_gate_failure: ``fail`` (default), ``skip_downstream`` or ``continue`` (see the module docstring).
        backend: a registered or named backend (default: the registry's default); ``backend_options``: its one
            mapping of settings (templated); ``backend_conn_id``: an Airflow connection holding them (see
            `trainops.operators.backend_choice`).
        hyperparameters, environment: passed to the script.
        timeout: seconds the evaluation may take (templated: the retraining DAG passes the pipeline file's).
        champion_group, registry_dir: where champion gates look up the champion.
        evaluation_settings: the evaluation's settings on its backend (templated; `Evaluations.SETTINGS`:
            another refuses them, naming them), e.g. what `trainops.steps.plan` derives from the training spec.
        role, image_uri, instance_type, code_uri: shorthands for ``evaluation_settings`` of those names.
        aws_conn_id: the Airflow AWS connection (AWS clients, and a region where the backend needs one).
        region_name, workdir: the deployment's context, handed to any backend (the region; where a deferred
            evaluation's job record lives on the local backend, default ``$TRAINOPS_HOME``).
        deferrable: wait for the evaluation job in the triggerer (default ``[operators] default_deferrable``).
        check_interval: seconds between two looks at the job (triggerer or worker).

    Returns (XCom): ``EvaluationResult.to_dict()``: backend, passed, metrics, gate, gates, message, files...
    """

    template_fields: Sequence[str] = (
        "entry_point", "source_dir", "model_artifact", "channels", "output_dir", "gate", "on_gate_failure", "backend",
        "hyperparameters", "environment", "timeout", "champion_group", "registry_dir", "role", "image_uri",
        "code_uri", "aws_conn_id", "region_name", "workdir", "backend_options", "backend_conn_id",
        "evaluation_settings",
    )
    template_fields_renderers = {"channels": "json", "hyperparameters": "json", "gate": "json",
                                 "backend_options": "json"}
    operator_extra_links = (EvaluationJobLink(), EvaluationReportLink())
    ui_color = "#f7ecd5"

    def __init__(
        self,
        *,
        entry_point: str,
        model_artifact: str,
        channels: dict[str, str],
        output_dir: str,
        source_dir: str | None = None,
        gate: Any = None,
        on_gate_failure: str = "fail",
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        backend_conn_id: str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        environment: dict[str, str] | None = None,
        timeout: float | None = None,
        champion_group: str | None = None,
        registry_dir: str | None = None,
        role: str | None = None,
        image_uri: str | None = None,
        instance_type: str | None = None,
        code_uri: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool | None = None,
        check_interval: float = 30.0,
        workdir: str | None = None,
        evaluation_settings: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self._waiting_settings(deferrable, check_interval)
        self.workdir = workdir
        self.evaluation_settings = evaluation_settings
        self.entry_point = entry_point
        self.model_artifact = model_artifact
        self.channels = channels
        self.output_dir = output_dir
        self.source_dir = source_dir
        self.gate = gate
        self.on_gate_failure = on_gate_failure
        self.backend = backend
        self.backend_options = backend_options
        self.backend_conn_id = backend_conn_id
        self.hyperparameters = hyperparameters
        self.environment = environment
        self.timeout = timeout
        self.champion_group = champion_group
        self.registry_dir = registry_dir
        self.role = role
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.code_uri = code_uri
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name

    job_kind = "evaluation"
    capability = "start_evaluation"
    #: Added to the evaluation's timeout for the wait's bound (instance start, image download, the upload after).
    GRACE_SECONDS = 1800.0

    def execute(self, context: Any) -> dict[str, Any]:
        from trainops.steps.evaluate import check_gate_inputs, evaluate

        self._begin_try(context)
        with translated_errors():
            check_backend(self.backend)
            # Settings the DAG author gave go to the backend, which refuses one it does not take (a role given to a
            # local evaluation is a mistake, not a default). The connection's clients are context: a backend that
            # never calls AWS never reads them.
            settings = with_shorthands(self.evaluation_settings, "evaluation_settings", role=self.role,
                                       image_uri=self.image_uri, instance_type=self.instance_type,
                                       code_uri=self.code_uri)
            inputs: dict[str, Any] = dict(
                entry_point=self.entry_point, source_dir=self.source_dir, model_artifact=self.model_artifact,
                channels=dict(self.channels or {}), output_dir=self.output_dir, hyperparameters=self.hyperparameters,
                environment=self.environment, timeout=self._timeout())
            chosen = self._choice().open(**self._backend_context())
            if self._starts_jobs(chosen):
                from trainops.backends.job_kinds import EvaluationRequest, started_evaluations  # not at DAG parse

                check_gate_inputs(self.gate, self.champion_group)  # before the job: a bad gate fails at once
                # Named from the task instance, so a retry or a cleared task re-attaches to the job.
                handle = started_evaluations(chosen).start(EvaluationRequest(**inputs, settings=settings),
                                                           task_job_name(context, "evaluate"))
                remember_links(self, chosen, "evaluation", handle.job_name, handle.location)
                return self._follow(chosen, handle, max_run=inputs["timeout"] or 3600.0, grace=self.GRACE_SECONDS)
            result = evaluate(
                gate=self.gate, backend=chosen, champion_group=self.champion_group,  # opened with the registry
                sink=lambda line, from_stderr: self.log.info("%s", line), **inputs, **settings,
            ).to_dict()
        return self._report(result, chosen)

    def _backend_context(self) -> dict[str, Any]:
        return {"registry_dir": self.registry_dir}

    def _finish(self, backend: Any, handle: Any) -> dict[str, Any]:
        """The completed job's metrics through the gates (the champion looked up now): the step's result."""
        from trainops.backends.job_kinds import started_evaluations
        from trainops.steps.evaluate import judge

        evaluation = started_evaluations(backend).result(handle)
        result = judge(evaluation, gate=self.gate, champion_group=self.champion_group, backend=backend).to_dict()
        remember_links(self, backend, "evaluation", handle.job_name, handle.location)
        return self._report(result, backend)

    def _report(self, result: dict[str, Any], backend: Any = None) -> dict[str, Any]:
        remember_lineage(self, [self.model_artifact, *dict(self.channels or {}).values()], [self.output_dir])
        remember_links(self, backend, "evaluation", result.get("job_name"))
        metrics = ", ".join(f"{name}={value:.4g}" for name, value in result["metrics"].items())
        self.log.info("metrics: %s", metrics)
        self._keep_report(result)
        apply_gate(self, getattr(self, "_context", None) or {}, result, self.on_gate_failure, result=result)
        return result

    def _keep_report(self, result: dict[str, Any]) -> None:
        """The report page as an XCom of this task instance: the *Evaluation report* link shows it
        (`trainops.operators.reports`); the evaluation's own files stay where it wrote them."""
        from trainops.operators.reports import REPORT_KEY, report_page

        ti = task_instance_of(getattr(self, "_context", None))
        if ti is None:
            return
        try:
            ti.xcom_push(key=REPORT_KEY, value=report_page(result, f"Evaluation of {self.task_id}"))
        except Exception as error:  # noqa: BLE001 - the report is a view; the metrics and the gate decide
            self.log.warning("the evaluation report could not be kept for the UI: %s", error)
            return
        setattr(self, REPORT_ATTRIBUTE, True)

    def _timeout(self) -> float | None:
        """The timeout in seconds; a templated value (an XCom, Jinja) may arrive as text or be empty."""
        if self.timeout in (None, ""):
            return None
        try:
            value = float(self.timeout)
        except (TypeError, ValueError):
            value = -1.0
        if value <= 0:
            raise AirflowFailException(f"invalid input: 1 problem\n  - timeout: {self.timeout!r} is not a positive "
                                       "number of seconds")
        return value


class QualityGateOperator(BaseOperator, SkipMixin):
    """The gate as a task of its own: reads an evaluation result (XCom) and fails, skips downstream, or passes.

    Args:
        evaluation: the evaluation task's result (``evaluate.output``), or any mapping with ``passed`` and
            ``message``.
        on_gate_failure: ``fail`` (default), ``skip_downstream`` or ``continue``.

    Returns (XCom): ``{passed, message, metrics}``.
    """

    template_fields: Sequence[str] = ("evaluation", "on_gate_failure")
    ui_color = "#f2d7d5"

    def __init__(self, *, evaluation: Any, on_gate_failure: str = "fail", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.evaluation = evaluation
        self.on_gate_failure = on_gate_failure

    def execute(self, context: Any) -> dict[str, Any] | None:
        verdict = None
        if isinstance(self.evaluation, dict):
            verdict = {"passed": bool(self.evaluation.get("passed")), "message": self.evaluation.get("message"),
                       "metrics": dict(self.evaluation.get("metrics") or {})}
        apply_gate(self, context, self.evaluation, self.on_gate_failure, result=verdict)
        return verdict
