"""`KubernetesBackend`: the seam over a Kubernetes cluster running Kubeflow Trainer (issue 44).

The job's files are laid out on the shared volume as for Slurm (`trainops.backends.slurm.layout`, with trainops'
node script beside Slurm's: `node`), its record there keeps the submission token, and the TrainJob (`render`)
carries the token: a look or a stop refuses a TrainJob of that name that is not this job's. Status comes from the
TrainJob's conditions and its pods (`status`), logs from each host's log on the shared volume, stop records the
reason and deletes the TrainJob in the foreground. A pipeline's other steps (staging, evaluation, the registry) run
where trainops runs, over the shared volume (`steps`).

The ``hyperpod`` flavour makes a HyperPodPyTorchJob instead (`hyperpod`, SageMaker HyperPod's EKS flavour): the
same files, token, looks, logs and stop, over that kind of object (`cluster.KINDS`); the job's record keeps its
flavour, so a later look by name alone finds the right kind.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainops.backends.cluster_steps import HereSteps
from trainops.backends.hostfs import safe_fs
from trainops.backends.hostfs.paths import own_directory
from trainops.backends.kit import (
    BackendOptions,
    JobHandle,
    JobResult,
    JobStatus,
    Log,
    Look,
    Observation,
    PolledBackend,
    Problem,
    SpecError,
)
from trainops.backends.kubernetes import node
from trainops.backends.kubernetes.cluster import KINDS, TrainJobs, open_client, owner
from trainops.backends.kubernetes.hyperpod import hyperpod_job
from trainops.backends.kubernetes.options import KubernetesOptions
from trainops.backends.kubernetes.preflight import notes
from trainops.backends.kubernetes.render import NODE_SCRIPT, TOKEN_ANNOTATION, train_job
from trainops.backends.kubernetes.settings import CLUSTER_SETTINGS, DEFAULT_NAMESPACE, KubernetesCluster
from trainops.backends.kubernetes.status import standing
from trainops.backends.kubernetes.vocabulary import KUBERNETES
from trainops.backends.slurm.layout import check_spec, job_directory, lay_out
from trainops.backends.slurm.options import SlurmOptions

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

#: The job's record on the shared volume (its submission token, its namespace, a stop's reason).
RECORD = "kubernetes.json"
#: The longest a poller (the Airflow trigger) waits between two looks: a look is two reads of the API server (the
#: TrainJob, its pods), so a deferred task ends within seconds of its job whatever its check_interval, and a hundred
#: waiting tasks ask 40 times a second, well within what an API server serves.
LOOK_SECONDS = 5.0


class KubernetesBackend(HereSteps, PolledBackend[KubernetesOptions]):
    """Training jobs as Kubeflow Trainer TrainJobs; the context is where the cluster is (`KubernetesCluster`), how
    often a wait looks (``poll_seconds``), and for a pipeline's other steps (`HereSteps`) the registry's directory
    (``registry_dir``, default ``<shared_dir>/registry``) and a boto3 client factory for s3:// staging sources."""

    name = "kubernetes"
    Options = KubernetesOptions
    CONTEXT = frozenset({*CLUSTER_SETTINGS, "poll_seconds", "client_factory", "registry_dir"})
    EXTRAS = ("kubernetes",)
    vocabulary = KUBERNETES

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None,
                 shared_dir: str | None = None, shared_pvc: str | None = None, poll_seconds: float | None = None,
                 client_factory: Callable[[str], Any] | None = None, registry_dir: str | None = None):
        self.cluster = KubernetesCluster(kubeconfig=kubeconfig, context=context, namespace=namespace,
                                         shared_dir=shared_dir, shared_pvc=shared_pvc)
        if poll_seconds:
            self.poll_seconds = float(poll_seconds)
        self.client_factory = client_factory
        self.registry_dir = registry_dir
        #: One API client per way of reaching a cluster, opened on first use: a command looks, reads the preflight
        #: and creates through one (the kubeconfig read once), and the backends `_of` makes for handles share them.
        self._clients: dict[Any, Any] = {}

    @property
    def label(self) -> str:
        return "Kubernetes"

    def location(self) -> dict[str, str]:
        return self.cluster.given()

    def _here_dir(self) -> str:
        """The shared volume as trainops sees it, where a pipeline's other steps run (`HereSteps`)."""
        self.cluster.check_shared()
        return os.path.expanduser(str(self.cluster.shared_dir))

    def where(self) -> str:
        return f"the TrainJobs of namespace {self.cluster.namespace or '(the context’s)'}"

    def namespace(self) -> str:
        """The namespace the jobs go to: the setting, else the context's or the service account's, else
        ``default`` (rendering needs no cluster)."""
        if self.cluster.namespace:
            return self.cluster.namespace
        try:
            return self.cluster.connection().namespace
        except SpecError:
            return DEFAULT_NAMESPACE

    # --- what a job becomes --------------------------------------------------------------------------------------
    def dry_run(self, spec: JobSpec, name: str, options: KubernetesOptions) -> dict[str, Any]:
        rendered = _render(spec, name, options, self.cluster, self.namespace())
        self._check_layout(spec, options)
        return {"job": rendered}

    def _check_layout(self, spec: JobSpec, options: KubernetesOptions) -> None:
        """What the job's files cannot hold (they are laid out as for Slurm: the trainops launcher, one kind of
        node, the model on the shared volume), refused before anything is written."""
        try:
            check_spec(spec, _layout_options(options), self.cluster.shared_dir)
        except SpecError as error:
            raise SpecError(error.problems, "job spec for the kubernetes backend (its files are laid out on the "
                                            "shared volume as for the slurm backend)") from error

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The TrainJob (or HyperPodPyTorchJob) ``run`` would create (the submission token and secret values
        aside)."""
        rendered: dict[str, Any] = self.dry_run(spec, job_name, self.options(options))["job"]
        return rendered

    # --- the API server --------------------------------------------------------------------------------------------
    def _jobs(self, flavour: str | None = None) -> Any:
        """The jobs of ``flavour`` (default trainer) in the namespace, through the API server."""
        connection = self.cluster.connection()
        key = (connection.source, connection.path, connection.context)
        if key not in self._clients:
            self._clients[key] = open_client(connection)
        return TrainJobs(self._clients[key], self.cluster.namespace or connection.namespace,
                         KINDS[flavour or "trainer"])

    def _jobs_of(self, name: str) -> Any:
        """The jobs of the flavour job ``name`` was submitted as (its record says; a TrainJob when it has none)."""
        try:
            flavour = self._record(name).get("flavour")
        except SpecError:
            flavour = None
        return self._jobs(str(flavour) if flavour in ("trainer", "hyperpod") else None)

    def _job_dir(self, name: str, create: bool = False) -> Path:
        self.cluster.check_shared()
        return job_directory(str(self.cluster.shared_dir), name, create=create)

    def _record(self, name: str) -> dict[str, Any]:
        path = self._job_dir(name) / RECORD
        try:
            found: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return found

    def _write_record(self, name: str, record: dict[str, Any]) -> None:
        safe_fs.write_atomically(self._job_dir(name) / RECORD, json.dumps(record).encode())

    def create(self, spec: JobSpec, name: str, options: KubernetesOptions, *, detached: bool,
               log: Log) -> JobHandle:
        """Lay the job's files out on the shared volume (as for Slurm), keep a submission token (and the flavour) in
        its record, then create the job's object carrying that token (a 409 follows only this submission's
        object)."""
        flavour = options.flavour or "trainer"
        body = self.dry_run(spec, name, options)["job"]  # every problem before anything is made
        jobs = self._jobs(flavour)
        runtime = body["spec"]["runtimeRef"]["name"] if flavour == "trainer" else None
        for note in notes(jobs.custom.api_client, jobs.namespace, runtime, self.cluster.shared_pvc, options.queue,
                          jobs.kind):
            log(f"[trainops] preflight note for {name}: {note}")
        job_dir = self._job_dir(name, create=True)
        own_directory(job_dir, "job_name")
        record = self._record(name)
        token = record.get("token") or uuid.uuid4().hex
        self._write_record(name, {"job_name": name, "token": token, "namespace": body["metadata"]["namespace"],
                                  "flavour": flavour, "submitted": time.time(), "max_run": spec.max_run})
        lay_out(spec, name, _layout_options(options), job_dir,
                str(self.cluster.shared_dir), token=token)
        shutil.copyfile(node.__file__, job_dir / NODE_SCRIPT)
        body = _render(spec, name, options, self.cluster, body["metadata"]["namespace"], token)
        _, created = jobs.create(body, token)
        log(f"[trainops] {'created' if created else 'found this submission’s'} {jobs.kind.kind} {name} in namespace "
            f"{body['metadata']['namespace']} ({spec.host_count()} nodes)")
        return self.handle(name, created=True)

    def _owned(self, name: str, found: Mapping[str, Any]) -> None:
        """Refuse a job object that is not this trainops job's (its token is not the one the record keeps)."""
        token = ((found.get("metadata") or {}).get("annotations") or {}).get(TOKEN_ANNOTATION)
        if not token or token != self._record(name).get("token"):
            kind = str(found.get("kind") or "TrainJob")
            raise SpecError(Problem("job_name", f"a {kind} named {name!r} exists and is not this trainops job's "
                                                f"({owner(dict(found))}); trainops never follows, changes or "
                                                "deletes it: give another job name"), "kubernetes job")

    def status_of(self, name: str) -> JobStatus | None:
        jobs = self._jobs_of(name)
        found = jobs.get(name)
        if found is None:
            return JobStatus.STOPPED if self._stopped(name) else None
        self._owned(name, found)
        return standing(found, jobs.pods(name)).status

    def _stopped(self, name: str) -> str | None:
        """The reason this job was stopped for, when trainops stopped (deleted) it: a stopped TrainJob is gone, its
        record on the shared volume says how it ended."""
        try:
            reason = self._record(name).get("stop_reason")
        except SpecError:
            return None
        return str(reason) if reason else None

    def look(self, handle: JobHandle) -> Look:
        backend = self._of(handle)
        jobs = backend._jobs_of(handle.job_name)
        found = jobs.get(handle.job_name)
        stopped = backend._stopped(handle.job_name)
        if found is None and stopped:
            return Look(JobResult(self.name, handle.job_name, JobStatus.STOPPED, secondary_status="Deleted",
                                  failure_reason=stopped, reattached=not handle.created))
        if found is None:
            raise SpecError(Problem("job_name", f"no {jobs.kind.kind} {handle.job_name!r} in {backend.where()}"))
        backend._owned(handle.job_name, found)
        record = backend._record(handle.job_name)
        now_standing = standing(found, jobs.pods(handle.job_name))
        status, failure = now_standing.status, now_standing.failure_reason
        if stopped:  # asked to stop: the delete is under way (foreground) or the job ended meanwhile
            status = status if status.terminal else JobStatus.STOPPING
            failure = stopped if status is not JobStatus.COMPLETED else failure
        ended = backend._ended(handle.job_name) if status.terminal else {}
        model = ended.get("model_artifact") if status is JobStatus.COMPLETED else None
        if now_standing.secondary_status == "Failed" and ended.get("failure_reason"):
            failure = str(ended["failure_reason"])  # the ranks' root cause, from the runtime's failure files
        result = JobResult(self.name, handle.job_name, status,
                           secondary_status=now_standing.secondary_status, failure_reason=failure,
                           model_artifact=model, reattached=not handle.created,
                           details=dict(now_standing.details))
        started = _timestamp((found.get("metadata") or {}).get("creationTimestamp"))
        if started is None:
            return Look(result)
        now = time.time()
        return Look(result, Observation(now=now, started=started, running_since=started,
                                        billable_seconds=max(0.0, now - started),
                                        last_activity=backend._last_line(handle.job_name),
                                        max_run=record.get("max_run")))

    def next_look_seconds(self, handle: JobHandle, result: JobResult, interval: float) -> float:
        """At most `LOOK_SECONDS` (a look is cheap: two reads of the API server)."""
        return min(interval, LOOK_SECONDS)

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        """The reason recorded, then the TrainJob deleted in the foreground (its pods first); an ended job is left
        as it is."""
        backend = self._of(handle)
        jobs = backend._jobs_of(handle.job_name)
        found = jobs.get(handle.job_name)
        if found is None:
            return f"{handle.job_name}: no {jobs.kind.kind} (already gone)"
        backend._owned(handle.job_name, found)
        if standing(found, jobs.pods(handle.job_name)).status.terminal:
            return f"{handle.job_name}: already ended"
        backend._write_record(handle.job_name, {**backend._record(handle.job_name), "stop_reason": reason})
        jobs.delete(handle.job_name)
        return f"{handle.job_name}: deleted ({reason})"

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """Each host's complete new lines (``logs/algo-N.log`` on the shared volume), host-prefixed; the cursor is
        each host's offset."""
        logs = self._of(handle)._job_dir(handle.job_name) / "logs"
        offsets = {key: int(value) for key, value in cursor.items()}
        lines: list[str] = []
        for path in sorted(logs.glob("algo-*.log")) if logs.is_dir() else []:
            host = path.stem
            with open(path, "rb") as file:
                file.seek(offsets.get(host, 0))
                data = file.read()
            complete = data[: data.rfind(b"\n") + 1].decode(errors="replace").splitlines()
            taken = complete[: max(0, limit - len(lines))]
            offsets[host] = offsets.get(host, 0) + sum(len(line.encode()) + 1 for line in taken)
            lines.extend(f"[{host}] {line}" for line in taken)
        return lines, offsets

    def _ended(self, name: str) -> dict[str, Any]:
        """What host 1 wrote when its part ended (``ended.json``: the model's archive, or the root cause)."""
        try:
            found = json.loads((self._job_dir(name) / "ended.json").read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _last_line(self, name: str) -> float | None:
        logs = self._job_dir(name) / "logs"
        times = [path.stat().st_mtime for path in logs.glob("algo-*.log")] if logs.is_dir() else []
        return max(times) if times else None

    def _of(self, handle: JobHandle) -> KubernetesBackend:
        """This backend with the settings the handle carries (where its job lives)."""
        if not handle.location:
            return self
        settings = {**self.cluster.given(), **{key: value for key, value in handle.location.items()
                                                  if key in CLUSTER_SETTINGS and value}}
        backend = KubernetesBackend(**settings, poll_seconds=self.poll_seconds,
                                    client_factory=self.client_factory, registry_dir=self.registry_dir)
        backend._clients = self._clients
        return backend


def _layout_options(options: KubernetesOptions) -> Any:
    """The options the job's files are laid out with (as for Slurm: `trainops.backends.slurm.layout`)."""
    return SlurmOptions(processes_per_host=options.processes_per_host,
                        channel_overrides=options.channel_overrides, checkpoint_key=options.checkpoint_key)


def _timestamp(text: Any) -> float | None:
    import calendar

    try:
        return float(calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _render(spec: JobSpec, name: str, options: KubernetesOptions, cluster: KubernetesCluster, namespace: str,
            token: str | None = None) -> dict[str, Any]:
    """The object of the job's flavour: a TrainJob (`render`) or a HyperPodPyTorchJob (`hyperpod`)."""
    if options.flavour == "hyperpod":
        return hyperpod_job(spec, name, options, cluster, namespace, token)
    return train_job(spec, name, options, cluster, namespace, token)
