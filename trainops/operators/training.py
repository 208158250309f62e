"""`DistributedTrainingOperator`: one typed job spec, trained on the local backend or on SageMaker, never twice.

The operator calls the train step (`trainops.steps.train.train`) and translates: the job name comes from the task
instance (DAG id, task id, run id, map index; not the try number), so a retried or cleared task re-attaches to the job
its first try created; SpecError text (every problem with its field) becomes the task's failure; the XCom value is
small JSON.

Waiting, SageMaker: ``deferrable=True`` hands the wait to `SageMakerTrainingTrigger` (no worker slot held);
otherwise the worker waits through the backend's bounded wait while a thread streams the logs of every host from
CloudWatch into the task log. Both are bounded by the job's ``max_run`` (+ ``max_wait``), not by an attempt count.
Local: with ``deferrable=True`` the job is submitted to a detached supervisor (`trainops.backends.local.detached`:
the job belongs to neither the worker nor the triggerer) and `LocalTrainingTrigger` waits on its status record;
the hosts' last log lines go to the task log when it ends. Without it, the job runs in the task's process and its
hosts' logs stream into the task log. Either way a retry re-attaches to the task instance's job.

``on_kill`` stops the job: the SageMaker job (StopTrainingJob) or every process of the local job.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from trainops.operators.common import (
    aws_client_factory,
    check_backend,
    task_job_name,
    task_logger,
    translated_errors,
    with_retry_defaults,
)
from trainops.operators.lineage import LineageMixin, remember_lineage, training_datasets
from trainops.operators.links import SageMakerTrainingJobLink, remember_console_job

IF_JOB_EXISTS = ("reattach", "fail", "new")
#: Extra time given to Airflow's own deferral timeout beyond the trigger's bound: the trigger should always be the one
#: to report a timeout, because its message says what to do.
DEFERRAL_MARGIN_SECONDS = 600
#: Logs read after a deferred job ended are cut to the last lines (a days-long job may have written millions).
LOG_LINES_AFTER_DEFERRAL = 500
#: Attempts per failure class within one try of a train task (`trainops.backends.failures.RetryBudgets`).
DEFAULT_BUDGETS = {"infrastructure": 2, "user": 0}
XCOM_KEYS = ("backend", "job_name", "status", "secondary_status", "failure_reason", "model_artifact",
             "billable_seconds", "duration_seconds", "metrics", "reattached", "region", "cost")


def xcom_result(result: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The XCom value of a training task: a fixed set of small JSON keys, whatever the backend returned."""
    merged = {**result, **extra}
    value = {key: merged.get(key) for key in XCOM_KEYS}
    value["metrics"] = dict(value["metrics"] or {})
    return value


class DistributedTrainingOperator(LineageMixin, BaseOperator):
    """Train a job spec on the local backend or on Amazon SageMaker, re-attaching instead of duplicating on retry.

    Args:
        spec: the job spec: a mapping (templated, key by key), a YAML/JSON file path, or a ``JobSpec``.
        backend: ``local`` (default: simulated hosts on the worker) or ``sagemaker``.
        job_name: the base of the job's name (default: the spec's name, else the task id). The name is
            ``<base>-<hash of dag id, task id, run id, map index>``, within 63 characters.
        if_job_exists: ``reattach`` (default: follow the job of that name; a failed one is retried under a suffixed
            name), ``fail``, or ``new`` (a suffixed copy).
        wait_for_completion: SageMaker: wait for the job to end (default) or return after submitting it.
        deferrable: wait in the triggerer instead of the worker (local: the job runs under a detached supervisor).
        check_interval: seconds between two status checks on SageMaker.
        aws_conn_id, region_name: SageMaker: the Airflow AWS connection and the region (default: the spec's, else
            the connection's).
        launcher, preflight: SageMaker: ``trainops`` or ``toolkit`` launcher; check FSx/VPC settings first.
        workdir, processes_per_host, channel_overrides: local backend: state directory (default
            ``$TRAINOPS_HOME``), ranks per simulated host, channel -> local path.
        stream_logs: put the hosts' logs into the task log (SageMaker: from CloudWatch).
        retry_budgets: attempts per failure class within one try of the task (`trainops.backends.failures`;
            default ``{"infrastructure": 2, "user": 0}``): an infrastructure failure starts ``<name>-2`` from the
            checkpoint, in the worker or from the deferral. A user error, a time limit or a stop fails the task with
            `AirflowFailException`, so Airflow's own ``retries`` are not spent on it.

    Returns (XCom): ``{backend, job_name, status, secondary_status, failure_reason, model_artifact,
    billable_seconds, duration_seconds, metrics, reattached, region}``.
    """

    template_fields: Sequence[str] = (
        "spec", "job_name", "backend", "aws_conn_id", "region_name", "workdir", "channel_overrides",
        "processes_per_host", "if_job_exists", "retry_budgets",
    )
    template_fields_renderers = {"spec": "json", "channel_overrides": "json"}
    operator_extra_links = (SageMakerTrainingJobLink(),)
    ui_color = "#d5e8f7"

    def __init__(
        self,
        *,
        spec: Any,
        backend: str = "local",
        job_name: str | None = None,
        if_job_exists: str = "reattach",
        wait_for_completion: bool = True,
        deferrable: bool = False,
        check_interval: float = 30.0,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        launcher: str | None = None,
        preflight: bool = True,
        workdir: str | None = None,
        processes_per_host: int | None = None,
        channel_overrides: dict[str, str] | None = None,
        stream_logs: bool = True,
        retry_budgets: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**with_retry_defaults(kwargs))
        self.retry_budgets = retry_budgets
        self.spec = spec
        self.backend = backend
        self.job_name = job_name
        self.if_job_exists = if_job_exists
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.check_interval = check_interval
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.launcher = launcher
        self.preflight = preflight
        self.workdir = workdir
        self.processes_per_host = processes_per_host
        self.channel_overrides = channel_overrides
        self.stream_logs = stream_logs

    # --- execute ----------------------------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:
        import os

        from trainops.spec.secrets import restore_masked
        from trainops.steps.train import check_choice, load_spec

        self._running_job_name: str | None = None
        self._local_job = None
        self._client_factory = None
        self._held: tuple[Any, Any] | None = None  # (backend, JobHandle) of the job this try placed: on_kill stops it
        with translated_errors():
            backend = check_backend(self.backend)
            check_choice(self.if_job_exists, IF_JOB_EXISTS, "if_job_exists")
            # A spec from XCom (the prepare task's) carries secrets masked: the worker's environment holds them.
            spec = load_spec(restore_masked(self.spec, os.environ))  # every problem of the spec at once, with its field
            name = task_job_name(context, self.job_name or spec.name)
            # A job on this machine runs in the worker (or a detached supervisor); a remote one is submitted and
            # waited for (in the worker or the triggerer), with the service's logs and metrics.
            if self._backend().remote:
                return self._train_on_sagemaker(spec, name)
            return self._train_locally(spec, name)

    def _backend(self, name: str | None = None) -> Any:
        """The backend of this task (or of ``name``, a trigger event's), for what it says about its jobs."""
        from trainops.backends.api import get_backend

        return get_backend(name or self.backend, workdir=self.workdir)

    def _train_locally(self, spec: Any, name: str) -> dict[str, Any]:
        from trainops.steps.train import train

        if self.deferrable:
            return self._train_locally_detached(spec, name)
        self._running_job_name = name
        log = task_logger(self) if self.stream_logs else (lambda line: None)
        result = self._run_step(train, spec, backend="local", job_name=name, if_exists=self.if_job_exists, log=log,
                                workdir=self.workdir, processes_per_host=self.processes_per_host,
                                channel_overrides=self.channel_overrides, on_job=self._remember_local_job,
                                on_handle=self._hold, retries=self._budgets(),
                                checkpoint_key=name)  # a retry of this task resumes from its own checkpoints
        self._remember_lineage(spec, result.get("model_artifact"))
        return xcom_result(result, metrics={})

    def _train_locally_detached(self, spec: Any, name: str) -> dict[str, Any]:
        """Submit the job to a detached supervisor (or re-attach to it) and defer on its status record."""
        from trainops.backends.local.status import ACTIVE
        from trainops.operators.triggers import LocalTrainingTrigger, local_event

        name, record, reattached = self._local_job_to_follow(spec, name)
        self._running_job_name = name
        if record.get("status") not in ACTIVE:  # a retry after the job ended: its result, without waiting
            return self.execute_complete({}, local_event(record), reattached=reattached)
        trigger = LocalTrainingTrigger(name, workdir=self.workdir, poll_seconds=min(self.check_interval, 5.0),
                                       max_run=spec.max_run, reattached=reattached)
        self.log.info("deferring: the triggerer waits for local training job %s (%s); `trainops logs %s --follow` "
                      "shows its hosts' logs", name, "re-attached" if reattached else "submitted", name)
        self.defer(trigger=trigger, method_name="execute_complete", kwargs={"reattached": reattached,
                                                                   "budget_used": getattr(self, "_budget_used", {})},
                   timeout=timedelta(seconds=(spec.max_run or 86400) + trigger.grace_seconds
                                     + DEFERRAL_MARGIN_SECONDS))
        raise AssertionError("unreachable: defer() raises TaskDeferred")

    def _local_job_to_follow(self, spec: Any, name: str) -> tuple[str, dict[str, Any], bool]:
        """(name, status record, re-attached) of the local job this try follows, placed by the one re-attach policy
        (`trainops.backends.api.place_job`): the job of the task instance's name when it runs or completed
        (``reattach``), else a new detached job, under a suffixed name when that name is taken by a failed job (or
        with ``new``). A name is never submitted twice."""
        from trainops.backends.api import get_backend

        backend = get_backend(self.backend, workdir=self.workdir)
        handle = backend.submit(spec, name, if_exists=self.if_job_exists, log=self.log.info, detached=True,
                                processes_per_host=self.processes_per_host, channel_overrides=self.channel_overrides,
                                checkpoint_key=name)  # every try of this task resumes its checkpoints
        self._hold(backend, handle)
        return handle.job_name, backend.status_record(handle), not handle.created

    def _hold(self, backend: Any, handle: Any) -> None:
        self._held = (backend, handle)

    def _remember_lineage(self, spec: Any, model_artifact: str | None) -> None:
        # Channel overrides are paths on this machine: they are the inputs only of a job that runs here.
        datasets = training_datasets(spec, None if self._backend().remote else self.channel_overrides,
                                     model_artifact)
        remember_lineage(self, datasets["inputs"], datasets["outputs"])

    def _remember_local_job(self, job: Any) -> None:
        self._local_job = job

    def _run_step(self, step: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Call a step; a job that ran and failed carries its result, whose reason becomes the task's message."""
        from trainops.errors import JobFailed

        try:
            return step(*args, **kwargs)
        except JobFailed as error:
            result = getattr(error, "result", None)
            if result:
                self.log.error("training job %s ended %s: %s", result.get("job_name"), result.get("status"),
                               result.get("failure_reason"))
            raise

    def _train_on_sagemaker(self, spec: Any, name: str) -> dict[str, Any]:
        from trainops.steps.train import train

        factory, region = aws_client_factory(self.aws_conn_id, spec.region or self.region_name)
        region = spec.region or region
        self._client_factory = factory
        remember_console_job(self, name, region)
        # wait=False: the step submits (or re-attaches) and returns at once; waiting is this operator's business,
        # in the worker (with logs) or in the triggerer.
        submitted = self._run_step(train, spec, backend="sagemaker", job_name=name, if_exists=self.if_job_exists,
                                   wait=False, log=task_logger(self), region=region, launcher=self.launcher,
                                   client_factory=factory, poll_seconds=self.check_interval, preflight=self.preflight,
                                   on_handle=self._hold)
        name = submitted["job_name"]  # a failed job of that name is retried under a suffixed one
        self._running_job_name = name
        remember_console_job(self, name, region)
        if submitted["status"] != "InProgress" or not self.wait_for_completion:
            self._remember_lineage(spec, submitted.get("model_artifact"))
            # A re-attached job that already ended has its final metrics too: the same XCom as after a wait.
            metrics = self._final_metrics(name) if submitted["status"] == "Completed" else {}
            return xcom_result(submitted, region=region, metrics=metrics)
        if self.deferrable:
            self._defer(spec, name, region, reattached=bool(submitted.get("reattached")))
        return self._wait_in_worker(spec, name, region, submitted)

    def _final_metrics(self, name: str) -> dict[str, float]:
        from trainops.operators.triggers import final_metrics

        try:
            return final_metrics(self._client_factory("sagemaker").describe_training_job(TrainingJobName=name))
        except Exception as error:  # noqa: BLE001 - metrics are a report; the job's outcome is already known
            self.log.warning("could not read the final metrics of %s: %s", name, error)
            return {}

    def _defer(self, spec: Any, name: str, region: str | None, *, reattached: bool) -> None:
        from trainops.backends.states import wait_bound_seconds
        from trainops.operators.triggers import SageMakerTrainingTrigger

        trigger = SageMakerTrainingTrigger(job_name=name, aws_conn_id=self.aws_conn_id, region_name=region,
                                           poll_seconds=self.check_interval, max_run=spec.max_run,
                                           max_wait=spec.max_wait, reattached=reattached)
        bound = wait_bound_seconds(spec.max_run, spec.max_wait, trigger.grace_seconds)
        self.log.info("deferring: the triggerer waits for training job %s (at most %.0f s)", name, bound)
        self.defer(trigger=trigger, method_name="execute_complete", kwargs={"reattached": reattached,
                                                                   "budget_used": getattr(self, "_budget_used", {})},
                   timeout=timedelta(seconds=bound + DEFERRAL_MARGIN_SECONDS))

    def _wait_in_worker(self, spec: Any, name: str, region: str | None, submitted: dict[str, Any]) -> dict[str, Any]:
        from trainops.backends.sagemaker import training
        from trainops.operators.log_follower import LogFollower
        from trainops.operators.triggers import final_metrics

        factory = self._client_factory
        follower = None
        if self.stream_logs:
            follower = LogFollower(factory, name, task_logger(self), poll_seconds=max(5.0, self.check_interval),
                                   warn=self.log.warning).start()

        def on_update(summary: Any) -> None:
            if follower is not None:
                follower.observe(summary.status)
            self.log.info("training job %s: %s / %s (%s)", name, summary.status, summary.secondary_status,
                          summary.explanation)

        try:
            summary = training.wait(factory, name, max_run=spec.max_run, max_wait=spec.max_wait,
                                    poll_seconds=self.check_interval, on_update=on_update)
        finally:
            if follower is not None:
                follower.finish()
        response = factory("sagemaker").describe_training_job(TrainingJobName=name)  # for FinalMetricDataList
        self._remember_lineage(spec, summary.model_artifact_uri)
        return xcom_result(submitted, region=region, status=summary.status,
                           secondary_status=summary.secondary_status, model_artifact=summary.model_artifact_uri,
                           billable_seconds=summary.billable_seconds, duration_seconds=summary.training_seconds,
                           metrics=final_metrics(response))

    # --- after deferral -----------------------------------------------------------------------------------------
    def execute_complete(self, context: Any, event: dict[str, Any] | None = None,
                         reattached: bool | None = None, budget_used: dict[str, int] | None = None
                         ) -> dict[str, Any]:
        """Resume after the trigger: raise on anything but success (with the reason), else return the XCom.

        ``reattached`` is the deferral's own keyword argument; Airflow's triggerer merges it with the event, while
        ``dag.test()`` (Airflow 3.3) passes the event alone, and it is then None.
        """
        from airflow.sdk.exceptions import AirflowException

        if not event:
            raise AirflowException("the training trigger ended without an event: the job's outcome is unknown")
        backend = event.get("backend") or "sagemaker"  # SageMaker events predate the key
        remote = self._backend(backend).remote
        if event.get("job_name") and remote:
            remember_console_job(self, event["job_name"], event.get("region"))
        if self.stream_logs and event.get("job_name") and event.get("status") in ("success", "failed", "stopped"):
            if remote:
                self._print_logs_after(event["job_name"], event.get("region"))
            else:
                self._print_local_logs_after(event["job_name"])
        if event.get("status") != "success":
            return self._next_attempt_or_fail(context, event, budget_used)
        self.log.info("%s", event.get("message"))
        self._lineage_after_deferral(event.get("model_artifact"))
        if reattached is None:
            reattached = event.get("reattached")  # the triggers echo it (dag.test() passes the event alone)
        return xcom_result({**event, "status": event.get("job_status")}, backend=backend, reattached=reattached,
                           cost=self._cost_after_deferral(context, backend, event))

    def _cost_after_deferral(self, context: Any, backend: str, event: dict[str, Any]) -> dict[str, Any] | None:
        """What the training of this task cost over every attempt of its job name (the XCom's ``cost``)."""
        import os

        from trainops.spec.secrets import restore_masked
        from trainops.steps.attempts import attempts_report
        from trainops.steps.train import load_spec

        try:
            spec = load_spec(restore_masked(self.spec, os.environ))
            base = task_job_name(context, self.job_name or spec.name)
            record = {**event, "status": event.get("job_status"), "instance_type": spec.instance_type,
                      "instance_count": spec.instance_count}
            chosen = self._backend(backend)
            if chosen.remote:  # the connection's clients, as the task's own calls use
                from trainops.backends.api import get_backend

                factory, region = aws_client_factory(self.aws_conn_id, event.get("region") or self.region_name)
                chosen = get_backend(backend, region=region, client_factory=factory)
            return attempts_report(chosen, base, record)["cost"]
        except Exception as error:  # noqa: BLE001 - the cost is a report; the job's outcome is already known
            self.log.warning("could not add up the cost of the attempts: %s", error)
            return None

    def _budgets(self) -> Any:
        from trainops.backends.failures import RetryBudgets

        return RetryBudgets.parse(self.retry_budgets if self.retry_budgets is not None else DEFAULT_BUDGETS,
                                  "retry_budgets")

    def _next_attempt_or_fail(self, context: Any, event: dict[str, Any], budget_used: dict[str, int] | None
                              ) -> dict[str, Any]:
        """A deferred job failed: start the next attempt (and defer on it) when its failure class has budget left,
        else fail the task (`failure_exception`: without Airflow's retries when a retry cannot help)."""
        from airflow.sdk.exceptions import AirflowException

        from trainops.backends.failures import classify_result
        from trainops.operators.common import failure_exception
        from trainops.spec.secrets import restore_masked
        from trainops.steps.train import load_spec

        message = event.get("message") or f"training job {event.get('job_name')} did not succeed"
        if event.get("status") not in ("failed", "stopped"):  # the wait itself failed: the job's outcome is unknown
            raise AirflowException(message)
        result = {"status": event.get("job_status") or "Failed",
                  "failure_reason": event.get("failure_reason") or event.get("message"),
                  "secondary_status": event.get("secondary_status"),
                  "secondary_statuses": event.get("secondary_statuses") or ()}
        verdict = classify_result(result)
        budgets = self._budgets()
        budgets.used = dict(budget_used or {})
        if verdict is None or not budgets.allows(verdict):
            raise failure_exception(message, result)
        budgets.spend(verdict)  # no backoff sleep here: the task is between two deferrals, holding a worker
        self.log.warning("%s [%s]; starting the next attempt on the %s budget (%d of %d)", message,
                         verdict.describe(), verdict.failure_class, budgets.used[verdict.failure_class],
                         getattr(budgets, verdict.failure_class))
        self._budget_used = dict(budgets.used)
        import os

        spec = load_spec(restore_masked(self.spec, os.environ))
        name = task_job_name(context, self.job_name or spec.name)
        with translated_errors():  # the next attempt is placed by the re-attach policy: <name>-N after the failures
            if self._backend().remote:
                return self._train_on_sagemaker(spec, name)
            return self._train_locally_detached(spec, name)

    def _lineage_after_deferral(self, model_artifact: str | None) -> None:
        from trainops.steps.train import load_spec

        try:
            self._remember_lineage(load_spec(self.spec), model_artifact)
        except Exception as error:  # noqa: BLE001 - lineage must never fail a finished job
            self.log.warning("no lineage for this task: %s", error)

    def _print_logs_after(self, name: str, region: str | None) -> None:
        from collections import deque

        from trainops.backends.sagemaker.logs import iter_log_lines

        try:
            factory, _ = aws_client_factory(self.aws_conn_id, region or self.region_name)
            tail = deque((line.render() for line in iter_log_lines(factory, name)), maxlen=LOG_LINES_AFTER_DEFERRAL)
        except Exception as error:  # noqa: BLE001 - logs are a convenience; the event decides the outcome
            self.log.warning("could not read the logs of %s: %s", name, error)
            return
        self.log.info("last %d log lines of every host of %s:", len(tail), name)
        for line in tail:
            self.log.info("%s", line)

    def _print_local_logs_after(self, name: str) -> None:
        from collections import deque

        from trainops.backends.local import paths

        logs = paths.job_dir(name, self.workdir) / "logs"
        for path in sorted(logs.glob("algo-*.log")) if logs.is_dir() else []:
            with open(path, encoding="utf-8", errors="replace") as handle:
                tail = deque(handle, maxlen=LOG_LINES_AFTER_DEFERRAL)
            self.log.info("last %d log lines of host %s of %s:", len(tail), path.stem, name)
            for line in tail:
                line = line.rstrip("\n")
                self.log.info("%s", line if line.startswith("[algo-") else f"[{path.stem}] {line}")

    # --- kill -------------------------------------------------------------------------------------------------
    def on_kill(self) -> None:
        """Stop what this task started, whatever the backend: ``backend.stop(handle)`` (a local job this worker
        runs stops every host; a detached or SageMaker job is asked to stop)."""
        held = getattr(self, "_held", None)
        if held is not None:
            backend, handle = held
            self.log.info("task killed: %s", backend.stop(handle, "the Airflow task was killed"))
