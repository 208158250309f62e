"""`RayBackend`: each trainops job is one Ray job of the cluster's Jobs API, its ``submission_id`` the job's name.

The Jobs API refuses a second job of an id, so a retried submit finds the job it made instead of training twice: a
job of that id carrying trainops' token and this owner (its metadata, `submission.TOKEN_KEY`) is followed; any other
(``ray job submit``, another user's) is refused by name and never stopped. The kit's `PolledBackend` gives the wait,
the guards (``max_run`` included: Ray has no deadline of its own), failed looks and ``logs --follow``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.backends.cluster_steps import HereSteps
from trainops.backends.kit import (
    BackendOptions,
    JobHandle,
    JobSpec,
    JobStatus,
    Log,
    Look,
    PolledBackend,
    Problem,
    SpecError,
    trainops_home,
)
from trainops.backends.ray import status as ray_status
from trainops.backends.ray.driver import REQUEST_VARIABLE
from trainops.backends.ray.jobs_api import JobsApi, NameTaken
from trainops.backends.ray.options import RayOptions, RaySettings
from trainops.backends.ray.submission import OWNER_KEY, TOKEN, TOKEN_KEY, check_spec, default_owner, render
from trainops.backends.ray.vocabulary import RAY
from trainops.backends.request.render import masked
from trainops.spec.secrets import masked_environment

PERSON_STOP = "Stopped by the user"


class RayBackend(HereSteps, PolledBackend[RayOptions]):
    """Jobs of the Ray cluster at ``address`` (default ``$RAY_ADDRESS``).

    A pipeline's other steps run where trainops runs (the Airflow worker, the KFP pod), as the local backend runs
    them: staging copies data into a directory (one every node sees, for the training's channels), an evaluation reads
    the model where the job's host 1 packed it (a file:// output), and the model registry is a directory (default
    ``registry/`` of shared_dir, else of the pipeline's workdir, else of trainops' home).

    Args:
        address, token_file, shared_dir: where the cluster is (`RaySettings`).
        poll_seconds: how often a wait asks the Jobs API.
        workdir: where trainops runs a pipeline's other steps (the pipeline's workdir).
        registry_dir: the model registry's directory.
        client_factory: boto3 client factory for s3:// staging sources.
    """

    name = "ray"
    Options = RayOptions
    vocabulary = RAY  # its states, failure rules (Ray's words), no price
    CONTEXT = frozenset({"address", "token_file", "shared_dir", "poll_seconds", "workdir", "registry_dir",
                         "client_factory"})
    EXTRAS = ("ray",)
    WAIT_GRACE_SECONDS = 600.0

    def __init__(self, address: str | None = None, token_file: str | None = None, shared_dir: str | None = None,
                 poll_seconds: float | None = None, workdir: str | os.PathLike[str] | None = None,
                 registry_dir: str | None = None, client_factory: Callable[[str], Any] | None = None):
        self.cluster = RaySettings(address=address, token_file=token_file, shared_dir=shared_dir)
        if poll_seconds is not None:
            self.poll_seconds = float(poll_seconds)
        self.workdir = os.fspath(workdir) if workdir else None
        self.registry_dir, self.client_factory = registry_dir, client_factory
        self.owner = default_owner()
        self._apis: dict[str, JobsApi] = {}

    # --- where jobs live ---------------------------------------------------------------------------------------
    def location(self) -> dict[str, str]:
        return {**self.cluster.given(), "address": self.cluster.resolved_address()}

    def where(self) -> str:
        try:
            return self.cluster.resolved_address()
        except SpecError:
            return "the Ray cluster of $RAY_ADDRESS (not set)"

    def _api(self, handle: JobHandle | None = None) -> JobsApi:
        address = (handle.location.get("address") if handle is not None else None) or self.cluster.resolved_address()
        token_file = (handle.location.get("token_file") if handle is not None else None) or self.cluster.token_file
        key = f"{address} {token_file}"
        if key not in self._apis:
            self._apis[key] = JobsApi(address, token_file)
        return self._apis[key]

    def _stop_record(self, address: str, name: str) -> Path:
        """Where a stop's reason is kept (Ray's stop takes none): under shared_dir when given, else trainops' home."""
        base = Path(self.cluster.shared_dir) if self.cluster.shared_dir else trainops_home()
        cluster = hashlib.sha256(address.encode()).hexdigest()[:12]
        return base / "ray" / "stops" / cluster / name

    def _ours(self, info: Any, name: str) -> Any:
        """``info`` when the job is trainops' and this owner's; else `SpecError` naming whose it is."""
        metadata = dict(getattr(info, "metadata", None) or {})
        if metadata.get(TOKEN_KEY) != TOKEN:
            raise SpecError(Problem("job_name", f"the Ray cluster holds a job {name!r} that trainops did not submit "
                                                "(its metadata has no trainops token): choose another job name; "
                                                "trainops neither follows nor stops it"))
        if metadata.get(OWNER_KEY) != self.owner:
            raise SpecError(Problem("job_name", f"the Ray job {name!r} belongs to {metadata.get(OWNER_KEY)!r}, not "
                                                f"{self.owner!r}: choose another job name; trainops neither follows "
                                                "nor stops it"))
        return info

    # --- training jobs -------------------------------------------------------------------------------------------
    def check_spec(self, spec: Any, region: str | None = None,
                   options: BackendOptions | Mapping[str, Any] | None = None) -> None:
        check_spec(spec)  # options change nothing of it (the base class passes them: issue 43's check_spec)

    def dry_run(self, spec: JobSpec, name: str, options: RayOptions) -> dict[str, Any]:
        submission = render(spec, name, options, owner=self.owner, shared_dir=self.cluster.shared_dir)
        shown_request = masked(submission["request"])
        env_vars = {**masked_environment(submission["runtime_env"]["env_vars"]),
                    REQUEST_VARIABLE: json.dumps(shown_request, sort_keys=True)}  # no secret in what is printed
        submission["runtime_env"] = {**submission["runtime_env"], "env_vars": env_vars}
        try:
            address: str | None = self.cluster.resolved_address()
        except SpecError:
            address = None
        return {**submission, "request": shown_request, "address": address}

    def create(self, spec: JobSpec, name: str, options: RayOptions, *, detached: bool, log: Log) -> JobHandle:
        submission = render(spec, name, options, owner=self.owner, shared_dir=self.cluster.shared_dir)
        api = self._api()
        try:
            api.submit(submission)
        except NameTaken:
            info = api.info(name)  # another caller of the same name was first: follow it only if it is ours
            self._ours(info, name)
            log(f"[ray] job {name} was submitted already: following it")
            return self.handle(name, created=False)
        log(f"[ray] submitted job {name} to {api.address}")
        return self.handle(name, created=True)

    def status_of(self, name: str) -> JobStatus | None:
        info = self._api().info(name)
        if info is None:
            return None
        return ray_status.result(self._ours(info, name), name, reattached=True).status

    def look(self, handle: JobHandle) -> Look:
        api = self._api(handle)
        info = api.info(handle.job_name)
        if info is None:
            raise SpecError(Problem("job_name", f"no Ray job {handle.job_name!r} at {api.address}"))
        self._ours(info, handle.job_name)
        record = self._stop_record(api.address, handle.job_name)
        reason = record.read_text() if record.exists() else None
        failed = ray_status.ray_status(info) == "FAILED"  # its host's failure file is in the job's log
        result = ray_status.result(info, handle.job_name, reattached=not handle.created, stop_reason=reason,
                                   log=api.logs(handle.job_name) if failed else None)
        metadata = dict(getattr(info, "metadata", None) or {})
        max_run = float(metadata["trainops_max_run"]) if metadata.get("trainops_max_run") else None
        return Look(result, ray_status.observation(info, max_run))

    def stop(self, handle: JobHandle, reason: str = PERSON_STOP) -> str:
        api = self._api(handle)
        info = api.info(handle.job_name)
        if info is None:
            raise SpecError(Problem("job_name", f"no Ray job {handle.job_name!r} at {api.address}"))
        self._ours(info, handle.job_name)
        now = ray_status.result(info, handle.job_name, reattached=True)
        if now.status.terminal:
            return f"{handle.job_name}: {now.secondary_status}"
        record = self._stop_record(api.address, handle.job_name)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(reason)
        api.stop(handle.job_name)
        return f"{handle.job_name}: stopping ({reason})"

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """The complete lines after ``cursor["offset"]`` (characters of the job's log, which the Jobs API gives
        whole)."""
        text = self._api(handle).logs(handle.job_name)
        offset = int(cursor.get("offset", 0))
        complete = text[offset: text.rfind("\n") + 1] if text.rfind("\n") >= offset else ""
        lines = complete.splitlines()[:limit]
        used = sum(len(line) + 1 for line in lines)
        return lines, {"offset": offset + used}

    def render_request(self, spec: JobSpec, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.dry_run(spec, job_name, self.options(options))

    # --- a pipeline's other steps: where trainops runs (`HereSteps`) -----------------------------------------------
    def _here_dir(self) -> str | None:
        """shared_dir, else the pipeline's workdir (else the local backend's default: trainops' home)."""
        return self.cluster.shared_dir or self.workdir
