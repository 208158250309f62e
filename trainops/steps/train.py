"""The train step: one job spec, run on the local backend or on SageMaker, with re-attach instead of duplicates.

Used by `trainops run`, the pipeline runner, the Airflow operator and the KFP component. It returns a small JSON-able
dict (never a whole describe response): backend, job name, status, model artifact, failure reason, durations.

Re-attach (`if_exists="reattach"`, the default) follows a job of the same name that is running or finished instead of
creating a second one; a job of that name that failed or was stopped is retried under a suffixed name (a retry is
meant to run again, and SageMaker job names can never be reused).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from trainops.errors import JobFailed, Problem, SpecError

BACKENDS = ("local", "sagemaker")
IF_EXISTS = ("reattach", "fail", "new")
Log = Callable[[str], None]


def check_choice(value: str, choices: tuple[str, ...], field: str) -> str:
    """Refuse a value outside `choices` with a message naming the field."""
    if value not in choices:
        raise SpecError(Problem(field, f"{value!r} is not one of {', '.join(choices)}"))
    return value


def default_job_name(spec) -> str:
    """<name>-<timestamp>, as the SDK names jobs when none is given."""
    from trainops.backends.sagemaker.names import timestamped_job_name

    return timestamped_job_name(spec.name or "trainops")


def load_spec(spec: Any, base_dir: str | os.PathLike | None = None):
    """A JobSpec from a JobSpec, a mapping or a YAML/JSON path; relative paths resolve against the file's directory
    (or `base_dir`, else the working directory, for mappings)."""
    from trainops.spec.job import JobSpec
    from trainops.spec.loader import load_job_spec, parse_job_spec, resolve_relative_paths

    if isinstance(spec, (str, os.PathLike)) and not isinstance(spec, dict):
        return load_job_spec(spec)
    parsed = spec if isinstance(spec, JobSpec) else parse_job_spec(spec)
    return resolve_relative_paths(parsed, Path(base_dir or os.getcwd()).resolve())


def train(
    spec: Any,
    *,
    backend: str = "local",
    job_name: str | None = None,
    if_exists: str = "reattach",
    wait: bool = True,
    log: Log | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run (or re-attach to) a training job and return its outcome as a dict; raises `JobFailed` when it failed.

    Local options: workdir, processes_per_host, channel_overrides, on_job (called with the `LocalJob` before it runs,
    so a signal handler can stop it), checkpoint_key (which checkpoints a re-run resumes from: see `LocalJob`). SageMaker options: region, launcher, client_factory, poll_seconds, preflight.
    """
    check_choice(backend, BACKENDS, "backend")
    check_choice(if_exists, IF_EXISTS, "if_exists")
    spec = load_spec(spec, options.pop("base_dir", None))
    job_name = job_name or default_job_name(spec)
    log = log or (lambda line: print(line, flush=True))
    if backend == "local":
        result = _train_locally(spec, job_name, if_exists, log, wait=wait, **options)
    else:
        result = _train_on_sagemaker(spec, job_name, if_exists, wait, log, **options)
    if result["status"] not in ("Completed", "InProgress"):
        error = JobFailed(f"training job {result['job_name']} ended {result['status']}: "
                          f"{result.get('failure_reason') or 'no reason given'}")
        error.result = result  # type: ignore[attr-defined]
        raise error
    return result


def _train_locally(spec, job_name: str, if_exists: str, log: Log, *, workdir=None, processes_per_host=None,
                   channel_overrides=None, on_job=None, checkpoint_key=None, wait: bool = True) -> dict[str, Any]:
    from trainops.backends.local import status
    from trainops.backends.local.job import LocalJob
    from trainops.backends.sagemaker.names import with_suffix

    name = job_name
    for attempt in range(2, 100):
        if not status.exists(name, workdir):
            break
        record = status.read(name, workdir)
        if if_exists == "fail":
            raise SpecError(Problem("job_name", f"a local job named {name!r} exists (status {record['status']}): "
                                                "choose another name or if_exists=reattach/new"))
        if if_exists == "reattach" and record["status"] in ("Completed", "InProgress"):
            log(f"[trainops] re-attaching to local job {name} ({record['status']})")
            return _local_summary(_wait_local(name, workdir, record) if wait else record, reattached=True)
        name = with_suffix(job_name, str(attempt))
    if not wait:  # detached: a supervisor process runs the job (trainops.backends.local.detached)
        from trainops.backends.local.detached import submit_detached

        record = submit_detached(spec, name, workdir=workdir, processes_per_host=processes_per_host,
                                 channel_overrides=channel_overrides, checkpoint_key=checkpoint_key)
        return _local_summary(record, reattached=False)
    job = LocalJob(spec, name, workdir=workdir, processes_per_host=processes_per_host,
                   channel_overrides=channel_overrides, log=log, checkpoint_key=checkpoint_key)
    if on_job:
        on_job(job)
    outcome = job.run()
    return _local_summary(outcome.to_dict(), reattached=False)


def _wait_local(name: str, workdir, record: dict) -> dict:
    from trainops.backends.local import status

    while record["status"] in status.ACTIVE:
        time.sleep(1.0)
        record = status.read(name, workdir)
    return record


def _local_summary(record: dict, *, reattached: bool) -> dict[str, Any]:
    keys = ("job_name", "status", "secondary_status", "failure_reason", "model_artifact", "output_artifact",
            "duration_seconds", "job_dir", "checkpoint_dir", "hosts", "processes_left")
    summary = {key: record.get(key) for key in keys}
    summary.update(backend="local", reattached=reattached, billable_seconds=None)
    return summary


def _train_on_sagemaker(spec, job_name: str, if_exists: str, wait: bool, log: Log, *, region=None, launcher=None,
                        client_factory=None, poll_seconds: float = 30.0, preflight: bool = True) -> dict[str, Any]:
    from trainops.backends.sagemaker import training, uploads
    from trainops.backends.sagemaker.clients import default_client_factory
    from trainops.backends.sagemaker.cost import estimate_cost
    from trainops.backends.sagemaker.preflight import preflight as run_preflight
    from trainops.backends.sagemaker.render import artifact_locations, render

    region = spec.region or region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    launcher = launcher or spec.launcher
    request = render(spec, job_name=job_name, launcher=launcher, region=region)  # bad input fails before any call
    factory = client_factory or default_client_factory(region)
    name, existing = job_name, _existing_job(factory, job_name)
    if existing is not None:
        if if_exists == "fail":
            raise SpecError(Problem("job_name", f"a training job named {name!r} exists (status {existing.status})"))
        if if_exists == "new" or existing.outcome == "failure":
            # A failed job is retried and "new" asks for a copy: both under the first free suffixed name.
            name, existing = _free_name(factory, job_name), None
            request = render(spec, job_name=name, launcher=launcher, region=region)
    if existing is None:
        if preflight:
            run_preflight(factory, request)
        _upload_code(factory, spec, uploads, artifact_locations(spec.output_path, name), launcher)
    submitted = training.submit(factory, request, if_exists="reattach")  # reattach also covers a lost create race
    name = submitted.job_name
    log(f"[trainops] {'created' if submitted.created else 're-attached to'} SageMaker training job {name}")
    if not wait:
        summary = training.describe(factory, name)
    else:
        try:
            summary = training.wait(factory, name, max_run=spec.max_run, max_wait=spec.max_wait,
                                    poll_seconds=poll_seconds,
                                    on_update=lambda s: log(f"[trainops] {name}: {s.status} / {s.secondary_status}"))
        except training.TrainingJobFailed as error:
            summary = error.summary
    result = {
        "backend": "sagemaker",
        "job_name": name,
        "status": summary.status,
        "secondary_status": summary.secondary_status,
        "failure_reason": summary.failure_reason,
        "model_artifact": summary.model_artifact_uri,
        "billable_seconds": summary.billable_seconds,
        "duration_seconds": summary.training_seconds,
        "reattached": not submitted.created,
    }
    if summary.billable_seconds is not None:
        result["cost"] = estimate_cost(summary, region=region).to_dict()
    return result


def _existing_job(factory, job_name: str):
    from trainops.backends.sagemaker import training

    try:
        return training.describe(factory, job_name)
    except SpecError:
        return None


def _free_name(factory, base: str) -> str:
    from trainops.backends.sagemaker.names import with_suffix

    for attempt in range(2, 100):
        candidate = with_suffix(base, str(attempt))
        if _existing_job(factory, candidate) is None:
            return candidate
    raise JobFailed(f"no free job name found for copies of {base!r}: choose another name")


def _upload_code(factory, spec, uploads, locations, launcher: str) -> None:
    if not spec.source_dir or spec.source_dir.startswith("s3://"):
        return
    if launcher == "trainops":
        uploads.upload_source_dir(factory, spec.source_dir, locations.code_prefix)
        uploads.upload_runtime(factory, locations.runtime_prefix)
    else:
        uploads.upload_source_tarball(factory, spec.source_dir, locations.source_tarball)
