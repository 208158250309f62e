"""`SageMakerBackend`: the `trainops.backends.api.Backend` seam over the SageMaker service modules of this package.

It binds a region and a client factory, and holds the SageMaker halves of the steps: render + preflight + upload +
CreateTrainingJob (`submit`), StopTrainingJob, the evaluation processing job, the Model Registry. Every method calls
the module function of the same purpose (``training``, ``processing``, ``registry``, ``fsx``, ``logs``), which stay
usable on their own with a rendered request.

A training job is followed as the kit's `PolledBackend` follows any job: this backend writes `look`
(DescribeTrainingJob -> the job's result and what the guards observe, `activity.observe`), `stop` and `read_logs`
(CloudWatch, with its cursor); the wait, the guards, failed looks and ``logs --follow`` are the kit's.

Nothing here imports boto3 at module level (DAG files reach this module through the operators).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from trainops.aws.clients import ClientFactory, default_client_factory, missing_region, region_note, resolve_region
from trainops.aws.s3 import join_uri, parse_s3_uri, put_bytes
from trainops.backends.api import Evaluation, JobHandle, JobResult, Log, Placement, RegisteredVersion
from trainops.backends.builtin_kinds import JobKindMethods, MethodEvaluations, MethodRegistry, MethodStaging
from trainops.backends.failures import status_walk
from trainops.backends.guards import JobGuards
from trainops.backends.hostfs.inputs import evaluation_script
from trainops.backends.job_kinds import Evaluations, Registry, Staging, checked_settings
from trainops.backends.model_extract import LIMIT_VARIABLE
from trainops.backends.model_rules import check_group, check_metrics, script_arguments, validate_metrics
from trainops.backends.options import BackendOptions, SageMakerOptions
from trainops.backends.polled import Look, PolledBackend
from trainops.backends.request.code import checked_render
from trainops.backends.request.render import masked, render, training_image
from trainops.backends.request.summary import summarize_request
from trainops.backends.sagemaker import cost as costs
from trainops.backends.sagemaker import fsx, processing, registry, training, uploads
from trainops.backends.sagemaker import logs as log_reading
from trainops.backends.sagemaker import preflight as checks
from trainops.backends.sagemaker.activity import TrainingJobWatch, observe
from trainops.backends.sagemaker.channel_uploads import upload_local_channels
from trainops.backends.sagemaker.console import links
from trainops.backends.sagemaker.evaluation_bootstrap import BOOTSTRAP_NAME, bootstrap_source
from trainops.backends.sagemaker.fsx_paths import fsx_source, parse_fsx_destination
from trainops.backends.sagemaker.job_request import default_region, given_clients_region
from trainops.backends.sagemaker.locations import job_locations
from trainops.backends.sagemaker.training import final_metrics
from trainops.backends.sagemaker.uploads import upload_source_dir
from trainops.backends.sagemaker.vocabulary import SAGEMAKER
from trainops.backends.states import JobStatus, classify
from trainops.errors import Problem, SpecError
from trainops.spec.names import check_job_name, deterministic_job_name

logger = logging.getLogger(__name__)

#: Where the register step writes the metrics JSON it links from the model package, beside the model artifact.
METRICS_NAME = "model-metrics.json"
#: The pause between two looks at a training job (each is an API call) and at a processing job, unless the backend
#: is given its own.
TRAINING_POLL_SECONDS = 30.0
EVALUATION_POLL_SECONDS = 15.0
#: The pause between two reads of ``trainops logs --follow`` (a DescribeTrainingJob, a DescribeLogStreams and a
#: GetLogEvents a host), unless the backend is given its own poll.
FOLLOW_SECONDS = 5.0
#: How old a `describe` answer may be for the job's watch to use it instead of describing again: a poller looks
#: right after it describes, and each answer is used once, so a look never judges the previous poll's answer.
RECENT_SECONDS = 5.0
#: Secondary statuses after which a training job ends within a minute or so (its model uploads, or it stops), and
#: the pause between two looks then: a deferred task ends within seconds of its job, not a check_interval later.
ENDING = frozenset({"Uploading", "Stopping", "MaxRuntimeExceeded", "MaxWaitTimeExceeded", "Interrupted"})
ENDING_LOOK_SECONDS = 5.0


#: What an FSx stage takes beside the source and destination (`stage`).
STAGE_SETTINGS = frozenset({"s3_prefix", "paths", "report_uri", "poll_seconds", "timeout_seconds", "strict", "workers"})


def evaluation_prefix(model_artifact: str) -> str:
    """Where a SageMaker evaluation writes by default: ``.../<job>/evaluation`` beside the job's
    ``output/model.tar.gz`` (the ``evaluation_prefix`` of `render.artifact_locations`)."""
    head = model_artifact.rsplit("/", 1)[0]
    if head.endswith("/output"):
        head = head[: -len("/output")]
    return f"{head}/evaluation"


def _model_size_limit() -> dict[str, str]:
    """``TRAINOPS_MAX_MODEL_BYTES`` of this process for the evaluation container: the largest model archive it will
    extract is then the same locally and on SageMaker (the bootstrap's default, 64 GiB, otherwise)."""
    value = os.environ.get(LIMIT_VARIABLE, "").strip()
    return {LIMIT_VARIABLE: value} if value else {}


class SageMakerBackend(JobKindMethods, PolledBackend[SageMakerOptions]):
    """The SageMaker backend bound to a region and a client factory.

    Args:
        region: the AWS region (None: the spec's, else boto3's own configuration).
        client_factory: service name -> boto3 client (for example one built from Airflow's ``AwsBaseHook``
            session with `trainops.aws.clients.client_factory_from_session`). Default:
            `default_client_factory(region)`, built on first use so creating the backend costs nothing.
        poll_seconds: pause between describe calls of a wait (default: 30 s for training, 15 s for processing) and
            between the reads of ``logs --follow`` (default 5 s).
    """

    name = "sagemaker"
    vocabulary = SAGEMAKER
    Options = SageMakerOptions
    EXTRAS = ("aws",)
    EVALUATION_SETTINGS = frozenset({"role", "image_uri", "instance_type", "job_name", "code_uri", "poll_seconds",
                                     "sleep"})
    REGISTRATION_SETTINGS = frozenset({"image_uri", "metrics_uri"})
    CONTEXT = frozenset({"region", "client_factory", "poll_seconds"})
    # Every call names a region, found by the backend itself (`job_region`, `clients`): the spec's wins, which a
    # front end cannot see, then -o region, AWS_REGION / AWS_DEFAULT_REGION, the profile's; none: exit 2 naming them.
    NEEDS: ClassVar[Mapping[str, str]] = {}
    WAIT_GRACE_SECONDS = 3600.0  # provisioning, the image download and the model upload are outside max_run

    def __init__(self, region: str | None = None, client_factory: ClientFactory | None = None,
                 poll_seconds: float | None = None):
        self.region = region
        self._factory = client_factory
        self.poll_seconds = TRAINING_POLL_SECONDS if poll_seconds is None else poll_seconds
        self.evaluation_poll_seconds = EVALUATION_POLL_SECONDS if poll_seconds is None else poll_seconds
        self.follow_seconds = FOLLOW_SECONDS if poll_seconds is None else poll_seconds
        # job name -> (monotonic time, DescribeTrainingJob answer) of the last `describe`: a poller that describes
        # and then looks with the job's watch (the Airflow trigger, the worker's poll) pays one call, not two.
        self._described: dict[str, tuple[float, dict[str, Any]]] = {}

    @property
    def clients(self) -> ClientFactory:
        """The client factory in use (without a region anywhere: `trainops.aws.clients.missing_region`, exit 2)."""
        if self._factory is None:
            self.region = resolve_region(self.region)
            if not self.region:
                raise missing_region()
            self._factory = default_client_factory(region=self.region)
        return self._factory

    def job_region(self, spec: Any) -> str | None:
        """The region a job of ``spec`` runs in, binding this backend's clients to it: the spec's, else the
        backend's, else that of the client factory it was given (an Airflow connection's), else boto3's
        configuration (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile). A spec whose region is not the one of
        a given factory is refused: the job would be created in another region than its image's."""
        wanted = getattr(spec, "region", None)
        if self._factory is None:
            if wanted and wanted != self.region:
                self._say_region(spec)
                self.region = wanted  # the default clients are built for the job's region on first use
            return self.region or resolve_region()
        return given_clients_region(wanted, self.region, self._factory) or resolve_region()

    def _say_region(self, spec: Any) -> None:
        """Say, once, on stderr (render's stdout is the request), that the spec's region overrides this backend's."""
        note = region_note(getattr(spec, "region", None), self.region, self.named_as)
        said = self.__dict__.setdefault("_regions_said", set())
        if note and note not in said:
            said.add(note)
            print(note, file=sys.stderr, flush=True)

    # --- training jobs -----------------------------------------------------------------------------------------
    def status_of(self, name: str) -> JobStatus | None:
        """The status of the training job called ``name``, or None when there is none (the re-attach policy's look)."""
        clients = self.clients  # no region: that error, not "no such job"
        try:
            return JobStatus.parse(training.describe(clients, name).status)
        except SpecError:  # no job of that name
            return None

    @property
    def label(self) -> str:
        return "SageMaker training"

    def dry_run(self, spec: Any, name: str, options: SageMakerOptions) -> dict[str, Any]:
        """The CreateTrainingJob request for ``name`` (every input problem raised before any AWS call)."""
        return checked_render(spec, name, options.launcher or spec.launcher, self.job_region(spec), self.name)

    def create(self, spec: Any, name: str, options: SageMakerOptions, *, detached: bool, log: Log) -> JobHandle:
        """Preflight, upload the code, create the job (a SageMaker job never depends on this process: ``detached``
        changes nothing)."""
        request = self.dry_run(spec, name, options)
        if options.preflight:
            checks.preflight(self.clients, request)
        self._upload_code(spec, request, name, options.launcher or spec.launcher)
        return self._send(spec, request, log)

    def reattach(self, spec: Any, placement: Placement, options: SageMakerOptions, log: Log) -> JobHandle:
        return self._send(spec, self.dry_run(spec, placement.job_name, options), log)

    def _send(self, spec: Any, request: dict[str, Any], log: Log) -> JobHandle:
        submitted = training.submit(self.clients, request, if_exists="reattach")  # also covers a lost create race
        logger.info("[trainops] %s SageMaker training job %s", "created" if submitted.created else "re-attached to",
                    submitted.job_name)
        return JobHandle("sagemaker", submitted.job_name, region=self.job_region(spec),
                         created=submitted.created)

    # --- the other job kinds: processing jobs (started too), FSx imports (started too), the Model Registry -----
    def evaluations(self) -> Evaluations:
        return MethodEvaluations(self, self.EVALUATION_SETTINGS, starts=True)

    def staging(self) -> Staging:
        return MethodStaging(self, STAGE_SETTINGS, starts=True)

    def registry(self) -> Registry:
        return MethodRegistry(self, self.REGISTRATION_SETTINGS)

    def location(self) -> dict[str, str]:
        """The region this backend's jobs are in: its own, else that of the clients it was given (an Airflow
        connection's), so a handle found again and the trigger's event say it."""
        region = self.region
        if region is None and self._factory is not None:
            try:
                region = given_clients_region(None, None, self._factory)
            except Exception:  # noqa: BLE001 - clients that cannot be built say nothing of a region
                region = None
        return {"region": region} if region else {}

    def links(self, kind: str, name: str, location: Mapping[str, str] | None = None) -> dict[str, str]:
        """The AWS console pages of the job (`trainops.backends.sagemaker.console`)."""
        return links(kind, name, (location or {}).get("region") or self.region)

    def _upload_code(self, spec: Any, request: dict[str, Any], name: str, launcher: str) -> None:
        # An s3:// source tarball is used as given; the trainops runtime is uploaded in every case (issue 13); the
        # code goes under code_location when the spec sets it (issue 25).
        uploads.upload_job_code(self.clients, spec, job_locations(spec, name), launcher)
        if spec.sdk == "v3":  # v3 uploads a channel given as a local path (request.local_channels)

            upload_local_channels(self.clients, spec, spec.output_path, name)

    def look(self, handle: JobHandle) -> Look:
        """One DescribeTrainingJob: where the job stands (`describe`; ``details`` add its final ``metrics`` and its
        own limits, ``max_run_seconds`` and ``max_wait_seconds`` for spot, which bound a wait on a re-attached job)
        and what the guards observe (`activity.observe`). The answer is kept a moment for the job's watch."""
        response = training.describe_response(self.clients, handle.job_name)
        self._described[handle.job_name] = (time.monotonic(), response)
        return self._look_of(response, handle)

    def _look_of(self, response: dict[str, Any], handle: JobHandle) -> Look:
        result = self._result(training.summarize(response), handle)
        stopping = response.get("StoppingCondition") or {}
        result.details.update(metrics=final_metrics(response), max_run_seconds=stopping.get("MaxRuntimeInSeconds"),
                              max_wait_seconds=stopping.get("MaxWaitTimeInSeconds")
                              if response.get("EnableManagedSpotTraining") else None)
        return Look(result, observe(response, self.now()))

    def metrics(self, handle: JobHandle) -> dict[str, float]:
        """The job's final metrics as SageMaker reports them (FinalMetricDataList: the spec's metric_definitions)."""
        return final_metrics(training.describe_response(self.clients, handle.job_name))

    def next_look_seconds(self, handle: JobHandle, result: JobResult, interval: float) -> float:
        """The caller's interval (each look is an API call), but `ENDING_LOOK_SECONDS` once the job is ending
        (Stopping, or a secondary status of `ENDING`)."""
        if result.status.value == "Stopping" or result.secondary_status in ENDING:
            return min(interval, ENDING_LOOK_SECONDS)
        return interval

    def watch(self, handle: JobHandle, guards: JobGuards, *, log: Log | None = None) -> TrainingJobWatch:
        """The kit's watch with SageMaker's additions (`activity.TrainingJobWatch`: the describe a poller has just
        made, the log activity a stall guard needs, the guard tagged on the job it stops)."""
        return TrainingJobWatch(self, handle, guards, log)

    def recent_look(self, handle: JobHandle) -> Look | None:
        """The look of this backend's last describe of the job if it is under `RECENT_SECONDS` old (used once)."""
        described = self._described.pop(handle.job_name, None)
        if described is None or time.monotonic() - described[0] > RECENT_SECONDS:
            return None
        return self._look_of(described[1], handle)

    def stop(self, handle: JobHandle, reason: str = "") -> str:
        """StopTrainingJob; the job's status afterwards (stopping a finished job is not an error)."""
        return f"{handle.job_name}: {training.stop(self.clients, handle.job_name)}"

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """CloudWatch lines of every host after ``cursor`` (stream -> forward token), at most ``limit``, merged by
        time (`logs.read_new_lines`)."""
        return log_reading.read_lines(self.clients, handle.job_name, cursor, limit)

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request, secrets masked; nothing is called."""
        chosen = self.options(options)
        self._say_region(spec)
        return masked(checked_render(spec, job_name, getattr(chosen, "launcher", None),
                                      default_region(spec, self.region), self.name))

    def render_summary(self, rendered: dict[str, Any] | str, spec: Any) -> dict[str, Any]:
        """The request's summary (`trainops.backends.request.summary`)."""
        if not isinstance(rendered, dict):
            return super().render_summary(rendered, spec)
        launcher = getattr(self.options(), "launcher", None) or spec.launcher
        return summarize_request(rendered, default_region(spec, self.region), launcher)

    def status_record(self, handle: JobHandle) -> dict[str, Any]:
        """The job's whole summary (``trainops status``)."""
        return training.describe(self.clients, handle.job_name).to_dict()

    def cost(self, job_name: str) -> costs.CostEstimate:
        """An estimate of what the job cost (and saved, for spot), from the instance catalog's prices."""
        return costs.estimate_cost(training.describe(self.clients, job_name), region=self.region)

    def _result(self, summary: training.JobSummary, handle: JobHandle) -> JobResult:
        details: dict[str, Any] = {}
        if summary.billable_seconds is not None:
            details["cost"] = costs.estimate_cost(summary, region=handle.region or self.region).to_dict()
        # The failure classifier reads the whole walk (a spot interruption shows only in the transitions).
        details["secondary_statuses"] = status_walk(summary.secondary_status_history)
        if summary.guard:
            details["guard"] = summary.guard  # a trainops guard stopped it (trainops.backends.guards)
        return JobResult(
            backend="sagemaker", job_name=summary.job_name, status=JobStatus.parse(summary.status),
            secondary_status=summary.secondary_status, failure_reason=summary.failure_reason,
            model_artifact=summary.model_artifact_uri, duration_seconds=summary.training_seconds,
            billable_seconds=summary.billable_seconds, reattached=not handle.created, details=details,
        )

    def check_spec(self, spec: Any, region: str | None = None,
                   options: BackendOptions | Mapping[str, Any] | None = None) -> None:
        """Raise `SpecError` listing everything SageMaker needs and the spec lacks with ``options`` (its launcher;
        the request is rendered, for a placeholder job name; nothing is called)."""
        render(spec, job_name="check", launcher=getattr(self.options(options), "launcher", None) or spec.launcher,
               region=getattr(spec, "region", None) or region or self.job_region(spec))

    # --- pipeline defaults ---------------------------------------------------------------------------------------
    def pipeline_settings(self, spec: Any, region: str | None = None) -> dict[str, Any]:
        """What the evaluate and register steps of a pipeline take from its training spec: the training job's role
        and image (the image has the framework the evaluation script needs; the model package serves from it) and
        the region. Every front end (runner, DAG, KFP) asks here, so their defaults cannot drift. ``spec`` may be a
        function returning it (read only by the backends that need it)."""
        spec = spec() if callable(spec) else spec
        region = default_region(spec, region)
        return {"role": spec.role, "image_uri": training_image(spec, region or ""), "region": region}

    def evaluation_output(self, workdir: Any, key: str, model_artifact: str | None = None) -> str:
        """Where a pipeline's evaluation writes: beside the model in S3 (`evaluation_prefix`); empty without the
        model, meaning the evaluation derives it when it runs."""
        return evaluation_prefix(model_artifact) if model_artifact else ""

    # --- evaluation ----------------------------------------------------------------------------------------------
    def _evaluate(self, *, poll_seconds: float | None = None, sleep: Callable[[float], None] = time.sleep,
                  sink: Any = None, **arguments: Any) -> Evaluation:
        """The evaluation's processing job (`_evaluation_request`), waited for here, its metrics read back.
        ``sink`` is for a local run's output lines: a processing job's are in CloudWatch."""
        request = self._evaluation_request(**arguments)
        poll = self.evaluation_poll_seconds if poll_seconds is None else poll_seconds
        outcome = processing.evaluate(self.clients, request, poll_seconds=poll, sleep=sleep)
        metrics = validate_metrics(outcome.metrics, outcome.metrics_uri)
        return Evaluation(backend="sagemaker", metrics=metrics, output_dir=processing.output_uri_of(request),
                          metrics_path=outcome.metrics_uri, job_name=outcome.job_name)

    def start_evaluation(self, *, entry_point: str, source_dir: Any, model_artifact: Any,
                         channels: Mapping[str, Any], output_dir: Any, hyperparameters: Mapping[str, Any] | None = None,
                         environment: Mapping[str, str] | None = None, timeout: float | None = None,
                         **settings: Any) -> JobHandle:
        """The processing job `evaluate` would run, created (or re-attached to: the same derived name) and not
        waited for."""
        chosen = checked_settings(settings, self.EVALUATION_SETTINGS - {"poll_seconds", "sleep"}, "an evaluation",
                                  self.name, "evaluation")
        request = self._evaluation_request(entry_point=entry_point, source_dir=source_dir,
                                           model_artifact=model_artifact, channels=channels, output_dir=output_dir,
                                           hyperparameters=hyperparameters, environment=environment, timeout=timeout,
                                           **chosen)
        created = processing.submit_evaluation(self.clients, request)
        name = request["ProcessingJobName"]
        logger.info("[trainops] %s SageMaker processing job %s", "created" if created else "re-attached to", name)
        return JobHandle("sagemaker", name, region=self.region, created=created)

    def describe_evaluation(self, handle: JobHandle) -> JobResult:
        """The processing job's status (``processing_job`` table); ``details``: its own limit and its output."""
        response = processing.describe_processing(self.clients, handle.job_name)
        started, ended = response.get("ProcessingStartTime"), response.get("ProcessingEndTime")
        duration = (ended - started).total_seconds() if started is not None and ended is not None else None
        return JobResult(
            backend="sagemaker", job_name=handle.job_name,
            status=JobStatus.parse(response.get("ProcessingJobStatus"), "processing_job"),
            secondary_status=response.get("ProcessingJobStatus"),
            failure_reason=response.get("FailureReason") or response.get("ExitMessage"),
            duration_seconds=duration, reattached=not handle.created,
            details={"max_run_seconds": (response.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")})

    def stop_evaluation(self, handle: JobHandle, reason: str = "") -> str:
        """StopProcessingJob; the status it was in (stopping an ended job is not an error)."""
        return f"{handle.job_name}: {processing.stop_processing(self.clients, handle.job_name)}"

    def evaluation_result(self, handle: JobHandle) -> Evaluation:
        """The completed processing job's metrics, read back from its output and checked."""
        response = processing.describe_processing(self.clients, handle.job_name)
        outcome = processing.outcome_of(self.clients, response, handle.created)
        return Evaluation(backend="sagemaker", metrics=validate_metrics(outcome.metrics, outcome.metrics_uri),
                          output_dir=processing.output_uri_of(response), metrics_path=outcome.metrics_uri,
                          job_name=outcome.job_name)

    def _evaluation_request(self, *, entry_point: str, source_dir: Any, model_artifact: Any,
                            channels: Mapping[str, Any], output_dir: Any,
                            hyperparameters: Mapping[str, Any] | None = None,
                            environment: Mapping[str, str] | None = None, timeout: float | None = None,
                            role: str | None = None, image_uri: str | None = None,
                            instance_type: str = "ml.m5.xlarge", job_name: str | None = None,
                            code_uri: str | None = None) -> dict[str, Any]:
        """Upload ``source_dir`` (and the contract bootstrap) to ``code_uri`` (default ``<output_dir>/code``) for a
        processing job on ``image_uri`` (the training image) with ``role``, writing ``metrics.json`` under
        ``output_dir`` (an S3 prefix; empty: `evaluation_prefix` of the model). ``job_name`` defaults to a name
        derived from the model, output and script, so a retried task re-attaches to the processing job its first
        attempt started. Returns the CreateProcessingJob request (the code is uploaded; nothing is created)."""
        from pathlib import Path


        problems = []
        model_uri = os.fspath(model_artifact)
        output_uri = os.fspath(output_dir) if output_dir else evaluation_prefix(model_uri)
        if not role:
            problems.append(Problem("role", "the SageMaker backend needs an execution role ARN for the processing "
                                            "job (the training spec's role)"))
        if not image_uri:
            problems.append(Problem("image_uri", "give the image to evaluate in (normally the training image)"))
        if source_dir is None:
            problems.append(Problem("source_dir", "give the directory holding the evaluation script; it is uploaded"))
        else:  # the script a file in it, as the local evaluation requires: checked before anything is uploaded
            try:
                evaluation_script(entry_point, Path(os.fspath(source_dir)).expanduser().resolve())
            except SpecError as error:
                problems += error.problems
        if not model_uri.startswith("s3://"):
            problems.append(Problem("model_artifact", f"{model_uri!r} is not an s3:// model artifact; a processing "
                                                      "job reads the training job's model.tar.gz from S3"))
        if not output_uri.startswith("s3://"):
            problems.append(Problem("output_dir", f"{output_uri!r} is not an s3:// prefix; a processing job writes "
                                                  "its metrics to S3"))
        if len(channels) != 1:
            listed = ", ".join(sorted(channels)) or "none"
            problems.append(Problem("channels", f"a SageMaker evaluation takes exactly one data channel (an S3 "
                                                f"prefix), got {len(channels)}: {listed}"))
        if problems:
            raise SpecError(problems, source="evaluation")
        (channel_name, test_uri), = channels.items()
        user_arguments = script_arguments(hyperparameters)
        name = check_job_name(job_name) if job_name else \
            deterministic_job_name("evaluate", model_uri, output_uri, entry_point, *user_arguments)
        code_prefix = code_uri or join_uri(output_uri, "code")
        assert role is not None and image_uri is not None  # the problems above said so otherwise
        request = processing.build_evaluation_request(
            job_name=name, role_arn=role, image_uri=image_uri, model_uri=model_uri,
            test_data_uri=os.fspath(test_uri), code_uri=code_prefix, script=BOOTSTRAP_NAME, output_uri=output_uri,
            instance_type=instance_type, max_runtime_seconds=int(timeout or 3600), arguments=user_arguments,
            environment={**_model_size_limit(), **(environment or {}),
                         "TRAINOPS_EVALUATION_ENTRY_POINT": entry_point, "TRAINOPS_EVALUATION_CHANNEL": channel_name},
        )
        upload_source_dir(self.clients, source_dir, code_prefix)
        put_bytes(self.clients, join_uri(code_prefix, BOOTSTRAP_NAME), bootstrap_source().encode("utf-8"),
                  "text/x-python")
        return request

    # --- registry ------------------------------------------------------------------------------------------------
    def _register(self, *, model_artifact: Any, metrics: Mapping[str, Any], group: str, approval: str,
                 spec_data: dict[str, Any] | None = None, description: str = "", job_name: str | None = None,
                 image_uri: str | None = None, metrics_uri: str | None = None) -> RegisteredVersion:
        """A model package in the SageMaker Model Registry; the spec goes in as its hash (metadata values are
        short strings)."""
        model_artifact = os.fspath(model_artifact)
        problems = []
        if not image_uri:
            problems.append(Problem("image_uri", "a SageMaker model package needs the inference image URI (normally "
                                                 "the training image)"))
        if not model_artifact.startswith("s3://"):
            problems.append(Problem("model_artifact", f"{model_artifact!r} is not an s3:// URI; the SageMaker "
                                                      f"registry refers to the training job's model.tar.gz in S3"))
        if problems:
            raise SpecError(problems, source="registry")
        check_group(group)
        checked = check_metrics(metrics)
        bucket, key = parse_s3_uri(model_artifact, "model_artifact")
        directory = key.rsplit("/", 1)[0] if "/" in key else ""
        metrics_location = metrics_uri or f"s3://{bucket}/{directory + '/' if directory else ''}{METRICS_NAME}"
        metadata = {}
        if job_name:
            metadata["trainops:job_name"] = job_name
        if spec_data is not None:
            canonical = json.dumps(spec_data, sort_keys=True, separators=(",", ":")).encode("utf-8")
            metadata["trainops:spec_sha256"] = hashlib.sha256(canonical).hexdigest()
        assert image_uri is not None  # the problems above said so otherwise
        package = registry.register(
            self.clients, group=group, image_uri=image_uri, model_artifact_uri=model_artifact, metrics=checked,
            metrics_uri=metrics_location, approval=approval, description=description, metadata=metadata,
        )
        return RegisteredVersion(
            backend="sagemaker", group=package.group, version=package.version,
            approval_status=package.approval_status, model_artifact=package.model_artifact_uri or model_artifact,
            metrics=dict(package.metrics or checked), location=package.arn,
            champion=package.approval_status == "Approved", job_name=job_name)

    def champion(self, group: str) -> RegisteredVersion | None:
        """The latest Approved model package of a group, or None."""
        package = registry.champion(self.clients, group)
        if package is None:
            return None
        return RegisteredVersion(backend="sagemaker", group=package.group, version=package.version,
                                 approval_status=package.approval_status, model_artifact=package.model_artifact_uri,
                                 metrics=dict(package.metrics or {}), location=package.arn, champion=True)

    # --- staging -------------------------------------------------------------------------------------------------
    def stage(self, source: str | None, destination: str, *, s3_prefix: str | None = None,
              paths: Any = None, report_uri: str | None = None, poll_seconds: float | None = None,
              timeout_seconds: float | None = None, strict: bool = True, workers: Any = None) -> fsx.StagingReport:
        """Make an S3 prefix visible on an FSx for Lustre file system: ``destination`` is
        ``fsx://fs-.../path``, ``source`` the S3 prefix. ``workers`` is accepted and unused (the import runs inside
        FSx); ``strict`` needs no check here (`fsx.stage` raises when any file failed)."""
        file_system_id, file_system_path = parse_fsx_destination(destination)
        timing: dict[str, float] = {key: value for key, value in (("poll_seconds", poll_seconds),
                                                                   ("timeout_seconds", timeout_seconds))
                                    if value is not None}
        return fsx.stage(self.clients, file_system_id=file_system_id, s3_uri=fsx_source(source, s3_prefix),
                         file_system_path=file_system_path, paths=paths, report_uri=report_uri,
                         **timing)  # type: ignore[arg-type]  # only the two float settings, each when given

    def start_stage(self, source: str | None, destination: str, *, s3_prefix: str | None = None,
                    paths: Any = None, report_uri: str | None = None, poll_seconds: float | None = None,
                    timeout_seconds: float | None = None, strict: bool = True, workers: Any = None) -> JobHandle:
        """`stage` up to the import task, which is left running: the handle names the task (its id is the job
        name) and carries what its report needs (`fsx.StagingStart`) in its location, beside the region."""
        file_system_id, file_system_path = parse_fsx_destination(destination)
        timing: dict[str, float] = {key: value for key, value in (("poll_seconds", poll_seconds),
                                                                   ("timeout_seconds", timeout_seconds))
                                    if value is not None}
        started = fsx.start_stage(self.clients, file_system_id=file_system_id, s3_uri=fsx_source(source, s3_prefix),
                                  file_system_path=file_system_path, paths=paths, report_uri=report_uri,
                                  **timing)  # type: ignore[arg-type]  # only the two float settings, each when given
        where = {key: ("true" if value is True else "false" if value is False else value)
                 for key, value in started.to_dict().items() if key != "task_id" and value is not None}
        if timeout_seconds is not None:
            where["max_run_seconds"] = str(timeout_seconds)
        logger.info("[trainops] started FSx import task %s on %s", started.task_id, file_system_id)
        return JobHandle("sagemaker", started.task_id, region=self.region, location=where)

    def describe_stage(self, handle: JobHandle) -> JobResult:
        """The import task's lifecycle as a job status (``fsx_task`` table: SUCCEEDED is Completed unless files
        failed, which makes it Failed with the count and the report's place; CANCELED is Stopped)."""
        task = fsx.describe_task(self.clients, handle.job_name)
        lifecycle = str(task.get("Lifecycle"))
        outcome = classify("fsx_task", lifecycle)
        status = JobStatus.COMPLETED if outcome == "success" else JobStatus.IN_PROGRESS
        reason = None
        if outcome == "failure" or (outcome == "success" and (task.get("Status") or {}).get("FailedCount")):
            status = JobStatus.STOPPED if lifecycle == "CANCELED" else JobStatus.FAILED
            reason = fsx.task_failure(task, fsx.report_of(self._stage_started(handle), task))
        elif lifecycle == "CANCELING":
            status = JobStatus.STOPPING
        bound = handle.location.get("max_run_seconds")
        return JobResult(backend="sagemaker", job_name=handle.job_name, status=status, secondary_status=lifecycle,
                         failure_reason=reason, reattached=not handle.created,
                         details={"max_run_seconds": float(bound) if bound else 6 * 3600.0})

    def stop_stage(self, handle: JobHandle, reason: str = "") -> str:
        """CancelDataRepositoryTask; the lifecycle it was in (cancelling an ended task is not an error)."""
        return f"{handle.job_name}: {fsx.cancel_task(self.clients, handle.job_name)}"

    def stage_result(self, handle: JobHandle) -> fsx.StagingReport:
        """The report `stage` returns, for the ended import task of ``handle`` (`fsx.staging_report`)."""
        return fsx.staging_report(self._stage_started(handle), fsx.describe_task(self.clients, handle.job_name))

    @staticmethod
    def _stage_started(handle: JobHandle) -> fsx.StagingStart:
        where = handle.location
        return fsx.StagingStart(
            file_system_id=where["file_system_id"], mount_name=where["mount_name"], s3_uri=where["s3_uri"],
            file_system_path=where["file_system_path"], association_id=where.get("association_id"),
            association_created=where.get("association_created") == "true", task_id=handle.job_name,
            report_path=where["report_path"])
