"""`LocalBackend`: the `trainops.backends.api.Backend` seam over the local modules (jobs, evaluation, registry,
staging) of this package.

A job submitted to wait on is created here and run by `wait` in the caller's process (its logs stream live, and
`stop` from a signal handler only sets a flag that the run obeys); a detached one (``detached=True``) runs under a
supervisor of its own (`trainops.backends.local.detached`) and `wait` follows its status record. A name that exists
is placed by the one re-attach policy (`trainops.backends.api.place_job`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.api import Evaluation, JobHandle, JobResult, Log, ModelRegistry, RegisteredVersion
from trainops.backends.builtin_kinds import JobKindMethods, MethodEvaluations, MethodRegistry, MethodStaging
from trainops.backends.guards import JobGuards, settle
from trainops.backends.hostfs import paths
from trainops.backends.hostfs.host_logs import read_new_lines
from trainops.backends.hostfs.inputs import resolve_code_dir
from trainops.backends.hostfs.paths import child, job_dir, jobs_root, trainops_home
from trainops.backends.hostfs.staging import stage_tree
from trainops.backends.job_kinds import Evaluations, Registry, Staging, checked_settings
from trainops.backends.local import evaluation_job, status
from trainops.backends.local.control import request_stop, stop_local_job
from trainops.backends.local.detached import submit_detached
from trainops.backends.local.evaluate import (
    LocalEvaluation,
    _check_channels,
    local_path,
    resolve_entry_point,
    run_evaluation,
)
from trainops.backends.local.guarding import LocalGuard
from trainops.backends.local.job import LocalJob, check_local_spec
from trainops.backends.local.job_input import from_spec
from trainops.backends.local.logs import iter_local_logs
from trainops.backends.local.preflight import check_local_run
from trainops.backends.local.registry import LocalRegistry, check_group
from trainops.backends.local.vocabulary import LOCAL
from trainops.backends.options import BackendOptions, LocalOptions
from trainops.backends.polled import Look, PolledBackend, Watch
from trainops.backends.request.api_limits import instance_type_problems
from trainops.backends.request.code import checked_render
from trainops.backends.request.render import masked
from trainops.backends.request.summary import summarize_request
from trainops.backends.states import JobStatus
from trainops.errors import JobFailed, Problem, SpecError

# The watch's modules (paths, status, control, guarding) are imported with this one: a wait builds its watch when
# the process may be out of descriptors (the failed looks it is there to ride out), and an import opens a file.

if TYPE_CHECKING:
    from trainops.backends.hostfs.stage_report import StageReport
    from trainops.backends.local.registry import LocalRegistry
    from trainops.spec.job import JobSpec

#: Keys of a local status record that a `JobResult` carries as details.
DETAILS = ("output_artifact", "job_dir", "checkpoint_dir", "hosts", "processes_left")
REPORT_SUFFIXES = (".html", ".htm", ".md")
PLOT_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg")
#: What a local stage takes beside the source and destination (`stage`).
STAGE_SETTINGS = frozenset({"strict", "workers", "progress", "delete", "s3_prefix"})
#: The longest a poller waits between two looks at a local job: a look reads a file on this machine.
LOOK_SECONDS = 2.0


class LocalBackend(JobKindMethods, PolledBackend[LocalOptions]):
    """Jobs, evaluation, registry and staging on this machine.

    Args:
        workdir: where job state lives (``<workdir>/jobs/<name>``; default ``$TRAINOPS_HOME``).
        registry_dir: the model registry (default ``$TRAINOPS_HOME/registry``).
        client_factory, region: for what a local job reads from S3 (``s3://`` staging sources); default boto3's
            own configuration.
    """

    name = "local"
    vocabulary = LOCAL
    Options = LocalOptions
    CONTEXT = frozenset({"workdir", "registry_dir", "client_factory", "region"})
    RUNS_HERE = True
    EXTRAS = ("torch",)
    WAIT_GRACE_SECONDS = 600.0  # a job of this machine ends with its supervisor: nothing to provision or upload
    poll_seconds = 1.0  # a look reads a file of this machine

    def __init__(self, workdir: str | os.PathLike[str] | None = None,
                 registry_dir: str | os.PathLike[str] | None = None, client_factory: Any = None,
                 region: str | None = None):
        self.workdir = os.fspath(workdir) if workdir else None
        self.registry_dir = registry_dir
        self.client_factory = client_factory
        self.region = region
        self._jobs: dict[str, Any] = {}  # LocalJob objects created by submit, run by wait, in this process

    # --- training jobs -----------------------------------------------------------------------------------------
    def status_of(self, name: str) -> JobStatus | None:
        """The status of the training job called ``name``, or None when there is none (the re-attach policy's look)."""
        if not status.exists(name, self.workdir):
            return None
        return JobStatus.parse(status.read(name, self.workdir)["status"], "local_job")

    def dry_run(self, spec: JobSpec, name: str, options: LocalOptions) -> dict[str, Any]:
        """The CreateTrainingJob request the local job of ``name`` will execute, with this machine's paths (the
        job's directory, the code and runtime channels it will lay out), after what a local run refuses (its code
        directory, an s3:// source that is not a tarball) and what this machine cannot give it
        (`trainops.backends.local.preflight`); nothing is written."""
        check_local_spec(spec)
        request = from_spec(spec, launcher=options.launcher).render(name, job_dir(name, self.workdir), lay_out=False)
        # What this machine must give the run (boto3 and the S3 prefixes, readable channels, room under the process
        # limit): said now, exit 2, not after a detached job has returned 0
        check_local_run(request, overrides=dict(options.channel_overrides or {}),
                        processes_per_host=options.processes_per_host, client_factory=self.client_factory)
        return request

    def create(self, spec: JobSpec, name: str, options: LocalOptions, *, detached: bool, log: Log) -> JobHandle:
        """Start the job under a detached supervisor, or prepare it for `wait` to run in this process."""
        handle = self.handle(name, created=True)
        overrides = dict(options.channel_overrides) if options.channel_overrides else None
        if detached:
            submit_detached(spec, name, workdir=self.workdir, processes_per_host=options.processes_per_host,
                            channel_overrides=overrides, checkpoint_key=options.checkpoint_key,
                            launcher=options.launcher, image_python=options.image_python)
            return handle

        # The spec becomes the CreateTrainingJob request SageMaker would get, and the job runs that request.
        self._jobs[name] = LocalJob(from_spec(spec, options.launcher), name, workdir=self.workdir, log=log,
                                    processes_per_host=options.processes_per_host, channel_overrides=overrides,
                                    checkpoint_key=options.checkpoint_key, image_python=options.image_python,
                                    placed_new=True)
        if options.on_job is not None:
            options.on_job(self._jobs[name])
        return handle

    def location(self) -> dict[str, str]:
        return {"workdir": self.workdir} if self.workdir else {}

    def channel_sources(self) -> dict[str, str]:
        """The local directories given for the spec's channels (``channel_overrides``)."""
        return dict(self.options().channel_overrides or {})

    def where(self) -> str:
        """The directory of this backend's job records."""
        return str(jobs_root(self.workdir))

    def look(self, handle: JobHandle) -> Look:
        """One look at the job's status record (a record that cannot be read for the moment, a busy or remote file
        system, is a failed look: the kit's wait reads again). The guards observe the job themselves (`watch`)."""
        return Look(self._result(status.read(handle.job_name, handle.workdir), handle))

    def wait(self, handle: JobHandle, *, log: Log | None = None, guards: JobGuards | None = None,
             poll_seconds: float | None = None) -> JobResult:
        """Run a job this backend prepared (blocking), or follow another process's job until it ends (the kit's
        wait, `PolledBackend.wait`). ``guards`` are watched beside a job run here by a thread
        (`trainops.backends.local.guarding`), at each look of another's."""
        job = self._jobs.get(handle.job_name)
        if job is None:
            return super().wait(handle, log=log, guards=guards, poll_seconds=poll_seconds)
        guard = self._watch(handle, guards, job.request_stop, log).start() if guards is not None else None
        try:
            result: JobResult = settle(self._result(job.run().to_dict(), handle),
                                       guard.tripped if guard is not None else None)
            return result
        finally:
            if guard is not None:
                guard.close()
            self._jobs.pop(handle.job_name, None)

    # --- the other job kinds: evaluations (started too), staging, a browsable registry directory ---------------
    def evaluations(self) -> Evaluations:
        return MethodEvaluations(self, self.EVALUATION_SETTINGS, starts=True)

    def staging(self) -> Staging:
        return MethodStaging(self, STAGE_SETTINGS)

    def registry(self) -> Registry:
        return MethodRegistry(self, self.REGISTRATION_SETTINGS, browsable=True)

    def status_command(self, handle: JobHandle) -> str:
        """``trainops status NAME`` on the default backend, with the handle's workdir."""
        where = f" --workdir {handle.workdir}" if handle.workdir else ""
        return f"trainops status {handle.job_name}{where}"

    def next_look_seconds(self, handle: JobHandle, result: JobResult, interval: float) -> float:
        """At most `LOOK_SECONDS`: a look reads the job's status record on this machine, so a deferred task ends
        within seconds of its job whatever its check_interval."""
        return min(interval, LOOK_SECONDS)

    def watch(self, handle: JobHandle, guards: JobGuards, *, log: Log | None = None) -> Watch:
        """The job's guards for a poller (the kit's wait, the Airflow trigger): `LocalGuard.look` once a poll; a
        guard that trips asks the job's controller to stop (the stop-request file), whichever process runs it."""
        return self._watch(handle, guards, None, log)

    def _watch(self, handle: JobHandle, guards: JobGuards, stop: Any, log: Log | None) -> LocalGuard:
        job_dir = paths.job_dir(handle.job_name, handle.workdir)
        return LocalGuard(job_dir, guards, stop or (lambda reason: request_stop(job_dir, reason)),
                          read_record=lambda: status.read(handle.job_name, handle.workdir), log=log)

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """Stop the job: a flag for a job this process runs (safe in a signal handler), else `stop_local_job`."""
        job = self._jobs.get(handle.job_name)
        if job is not None:
            job.request_stop(reason)
            return f"{handle.job_name}: stopping ({reason})"
        if not status.exists(handle.job_name, handle.workdir):
            return f"{handle.job_name}: not started"
        return stop_local_job(handle.job_name, handle.workdir)

    def runs_here(self, handle: JobHandle) -> bool:
        """Whether this process runs the job (a stop then only sets a flag, and the wait returns Stopped)."""
        return handle.job_name in self._jobs

    def logs(self, handle: JobHandle, *, follow: bool = False) -> Iterator[str]:
        return iter_local_logs(handle.job_name, handle.workdir, follow=follow)

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """Complete lines written after ``cursor`` (host -> byte offset), at most ``limit``, and the new cursor."""
        lines, after = read_new_lines(handle.job_name, handle.workdir, dict(cursor), limit)
        return lines, dict(after)

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request (masked) a local job executes too (one request, two executors), refused
        as a local run refuses it when the code it names is missing (`checked_render`: source_dir, the entry point in
        it, the dependencies, every problem at once with render's own)."""
        chosen = self.options(options)
        return masked(checked_render(spec, job_name, getattr(chosen, "launcher", None), self.region, self.name))

    def run_request(self, spec: Any, job_name: str, *,
                    options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The request a local run of ``job_name`` executes (masked), with this machine's paths: the job's directory,
        the code and runtime channels it will lay out, each ``channel_overrides`` directory where its channel reads,
        and the placeholders a local run fills in for a spec without them (``RoleArn`` `LOCAL_ROLE`, the output
        under the job's directory). What a local run refuses of the spec is refused; nothing of this machine is
        checked (a pipeline's earlier steps make its channels) and nothing is written. `render` of a spec that
        lacks only SageMaker's account fields (role, region, output_path) shows this one."""
        chosen = self.options(options)
        check_local_spec(spec)
        request = from_spec(spec, launcher=chosen.launcher).render(job_name, job_dir(job_name, self.workdir),
                                                                   lay_out=False)
        for channel in request["InputDataConfig"]:  # where the run reads it (fetch_channels takes the override)
            override = (chosen.channel_overrides or {}).get(channel["ChannelName"])
            source = channel["DataSource"].get("S3DataSource")
            if override and source is not None:
                source["S3Uri"] = override if "://" in override else str(Path(override).expanduser().resolve())
        return masked(request)

    def render_summary(self, rendered: dict[str, Any] | str, spec: Any) -> dict[str, Any]:
        """The request's summary (`trainops.backends.request.summary`)."""
        if not isinstance(rendered, dict):
            return super().render_summary(rendered, spec)
        launcher = getattr(self.options(), "launcher", None) or spec.launcher
        return summarize_request(rendered, self.region, launcher)

    def status_record(self, handle: JobHandle) -> dict[str, Any]:
        """The job's whole status record (``trainops status``), without the spec."""
        record = status.read(handle.job_name, handle.workdir)
        spec = record.pop("spec", None)
        if isinstance(spec, dict):  # what `trainops status` prices an attempt on
            record.setdefault("instance_type", spec.get("instance_type"))
            record.setdefault("instance_count", spec.get("instance_count"))
        return record

    @staticmethod
    def _result(record: dict[str, Any], handle: JobHandle) -> JobResult:
        return JobResult(
            backend="local", job_name=record.get("job_name") or handle.job_name,
            status=JobStatus.parse(record.get("status"), "local_job"),
            secondary_status=record.get("secondary_status"), failure_reason=record.get("failure_reason"),
            model_artifact=record.get("model_artifact"), duration_seconds=record.get("duration_seconds"),
            billable_seconds=None, reattached=not handle.created,
            details={key: record.get(key) for key in DETAILS},
        )

    def check_spec(self, spec: Any, region: str | None = None,
                   options: BackendOptions | Mapping[str, Any] | None = None) -> None:
        """Raise `SpecError` for what a local run of the spec would refuse (its code directory; an ``ml.*`` instance
        type the API does not list, which rendering its request refuses); ``options`` change nothing of it."""
        resolve_code_dir(spec)
        # A pipeline's check (validate, the runner before its first step) asks here: without it an unknown type
        # passed the whole check and failed only when the train step rendered its request.
        problems = instance_type_problems(spec)
        if problems:
            raise SpecError(problems, "job spec for the local backend")

    # --- pipeline defaults ---------------------------------------------------------------------------------------
    def pipeline_settings(self, spec: Any, region: str | None = None) -> dict[str, Any]:
        """Nothing: a local evaluation and registry need no role, image or region (``spec`` is not even read)."""
        return {}

    def evaluation_output(self, workdir: Any, key: str, model_artifact: str | None = None) -> str:
        """``<workdir>/evaluations/<key>`` (the key: the training job's name, or the DAG run's id), wherever the
        model is."""
        return str(child(Path(workdir or trainops_home()) / "evaluations", key, "job_name"))

    # --- evaluation, registry, staging -------------------------------------------------------------------------
    def _evaluate(self, *, entry_point: str, source_dir: Any, model_artifact: Any, channels: dict[str, Any],
                  output_dir: Any, hyperparameters: dict[str, Any] | None = None,
                  environment: dict[str, str] | None = None, timeout: float | None = None,
                  sink: Any = None) -> Evaluation:
        """Run the evaluation script here (`trainops.backends.local.evaluate.run_evaluation`)."""
        run = run_evaluation(entry_point=entry_point, source_dir=source_dir, model_artifact=model_artifact,
                             channels=channels, output_dir=output_dir, hyperparameters=hyperparameters,
                             environment=environment, timeout=timeout, sink=sink)
        return self._evaluation_of(run)

    def start_evaluation(self, *, entry_point: str, source_dir: Any, model_artifact: Any, channels: Any,
                         output_dir: Any, hyperparameters: Any = None, environment: Any = None,
                         timeout: float | None = None, job_name: str | None = None, **settings: Any) -> JobHandle:
        """The evaluation as a detached job of this machine (`trainops.backends.local.evaluation_job`) named
        ``job_name``: a job of that name that runs or completed is re-attached to. Inputs are checked first."""
        checked_settings(settings, self.EVALUATION_SETTINGS, "an evaluation", self.name, "evaluation")
        if not job_name:
            raise SpecError(Problem("job_name", "a local evaluation job needs a name (the task instance's)"))
        check = JobHandle(self.name, job_name, workdir=self.workdir)  # the name checked before it is a path
        resolve_entry_point(entry_point, source_dir)
        _check_channels(channels)
        arguments = {"entry_point": entry_point, "source_dir": os.fspath(source_dir) if source_dir else None,
                     "model_artifact": str(local_path(model_artifact, "model_artifact")),
                     "channels": {name: str(local_path(path, f"channels.{name}")) for name, path in channels.items()},
                     "output_dir": str(local_path(output_dir, "output_dir")),
                     "hyperparameters": dict(hyperparameters or {}), "environment": dict(environment or {}),
                     "timeout": timeout}
        created = evaluation_job.start(check.job_name, self.workdir, arguments)
        return self.handle(job_name, created=created)

    def describe_evaluation(self, handle: JobHandle) -> JobResult:
        """The evaluation job's status record as a result (``local_job`` table); its timeout bounds a wait."""
        record = evaluation_job.read(handle.job_name, handle.workdir)
        if record is None:
            raise JobFailed(f"no local evaluation job {handle.job_name} (in {handle.workdir or 'TRAINOPS_HOME'})")
        started, ended = record.get("written"), record.get("ended")
        return JobResult(backend="local", job_name=handle.job_name,
                         status=JobStatus.parse(record.get("status"), "local_job"),
                         secondary_status=record.get("status"), failure_reason=record.get("failure_reason"),
                         duration_seconds=round(ended - started, 3) if started and ended else None,
                         reattached=not handle.created, details={"max_run_seconds": record.get("timeout")})

    def stop_evaluation(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """SIGTERM the evaluation job's runner (it stops the script's process group)."""
        return f"{handle.job_name}: {evaluation_job.stop(handle.job_name, handle.workdir)}"

    def evaluation_result(self, handle: JobHandle) -> Evaluation:
        """What the completed evaluation job wrote (its metrics checked when it ran)."""
        result = self.describe_evaluation(handle)
        record = evaluation_job.read(handle.job_name, handle.workdir) or {}
        if not result.succeeded or not record.get("result"):
            raise JobFailed(f"local evaluation job {handle.job_name} ended {result.status.value}: "
                            f"{result.failure_reason or 'no result'}")
        return self._evaluation_of(LocalEvaluation(**record["result"]))

    @staticmethod
    def _evaluation_of(run: Any) -> Evaluation:
        output = Path(run.output_dir)
        reports = [name for name in run.files if name.lower().endswith(REPORT_SUFFIXES)]
        # A file called report.* wins over other documents the script may have written.
        reports.sort(key=lambda name: (not Path(name).stem.lower().startswith("report"), name))
        plots = [str(output / name) for name in run.files if name.lower().endswith(PLOT_SUFFIXES)]
        return Evaluation(
            backend="local", metrics=run.metrics, output_dir=run.output_dir,
            metrics_path=run.metrics_path, files=run.files, report=str(output / reports[0]) if reports else None,
            plots=plots, duration_seconds=run.duration_seconds,
        )

    def _registry(self) -> LocalRegistry:
        return LocalRegistry(self.registry_dir)

    def model_registry(self) -> ModelRegistry:
        """The local registry directory (``trainops models``)."""
        return self._registry()

    def _register(self, *, model_artifact: Any, metrics: Any, group: str, approval: str, spec_data: Any = None,
                  description: str = "", job_name: str | None = None) -> RegisteredVersion:
        """A new version in the local registry, or the version this training job already has (once per job)."""
        registry = self._registry()
        # Once per training job (a retried task, a re-run pipeline): the registry decides, under its group lock.
        entry, added = registry.register_once(
            group=group, model_artifact=model_artifact, metrics=metrics, approval=approval, spec=spec_data,
            description=description, job_name=job_name)
        champion = registry.champion(group)
        return RegisteredVersion(
            backend="local", group=entry.group, version=entry.version, approval_status=entry.approval_status,
            model_artifact=entry.model_artifact, metrics=dict(entry.metrics), location=str(entry.path),
            champion=champion is not None and champion.version == entry.version, created=entry.created,
            job_name=entry.job_name, already_registered=not added)

    def champion(self, group: str) -> RegisteredVersion | None:
        entry = self._registry().champion(check_group(group))
        if entry is None:
            return None
        return RegisteredVersion(backend="local", group=entry.group, version=entry.version,
                                 approval_status=entry.approval_status, model_artifact=entry.model_artifact,
                                 metrics=dict(entry.metrics), location=str(entry.path), champion=True,
                                 created=entry.created, job_name=entry.job_name)

    def stage(self, source: str, destination: str, *, strict: bool = True, workers: int | None = None,
              progress: Any = None, delete: bool = False, s3_prefix: str | None = None) -> StageReport:
        """Copy a local tree, ``file://`` or ``s3://`` prefix into a local directory (the stand-in for FSx); with
        ``strict`` a refused or failed file raises `JobFailed` once the rest is copied."""
        if s3_prefix is not None:
            raise SpecError(Problem("s3_prefix", "is for FSx staging (backend 'sagemaker'); with the local backend "
                                                 "put the s3:// URI in the source instead"))
        report = stage_tree(source, destination, delete=delete, workers=workers, progress=progress,
                            client_factory=self.client_factory)
        if strict:
            report.raise_for_problems()
        return report
