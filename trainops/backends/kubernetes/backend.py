"""`KubernetesBackend`: the seam over a Kubernetes cluster running Kubeflow Trainer (issue 44).

What is built: the backend's settings (`settings`), a job's options (`options`), the name check and the TrainJob a
job becomes (`render`), which ``trainops render --backend kubernetes`` prints and every dry run checks. Submitting,
looking at, following and stopping a TrainJob through the API server are not built yet: those calls raise a
`TrainopsError` that says so, before anything is made, rather than pretend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from trainops.backends.api import JobHandle, Log
from trainops.backends.kubernetes.options import KubernetesOptions
from trainops.backends.kubernetes.render import train_job
from trainops.backends.kubernetes.settings import CLUSTER_SETTINGS, DEFAULT_NAMESPACE, KubernetesCluster
from trainops.backends.options import BackendOptions
from trainops.backends.polled import Look, PolledBackend
from trainops.backends.states import JobStatus
from trainops.errors import SpecError, TrainopsError

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

NOT_BUILT = ("the kubernetes backend renders its TrainJob (trainops render --backend kubernetes), but submitting, "
             "following and stopping TrainJobs through the API server is not built yet (issue 44); nothing was "
             "created")


class KubernetesBackend(PolledBackend[KubernetesOptions]):
    """Training jobs as Kubeflow Trainer TrainJobs; the context is where the cluster is (`KubernetesCluster`)."""

    name = "kubernetes"
    Options = KubernetesOptions
    CONTEXT = frozenset({*CLUSTER_SETTINGS, "poll_seconds"})
    EXTRAS = ("kubernetes",)

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None,
                 shared_dir: str | None = None, shared_pvc: str | None = None, poll_seconds: float | None = None):
        self.cluster = KubernetesCluster(kubeconfig=kubeconfig, context=context, namespace=namespace,
                                         shared_dir=shared_dir, shared_pvc=shared_pvc)
        if poll_seconds:
            self.poll_seconds = float(poll_seconds)

    @property
    def label(self) -> str:
        return "Kubernetes"

    def location(self) -> dict[str, str]:
        return self.cluster.given()

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
        if (options.flavour or "trainer") != "trainer":
            raise _flavour_not_built(options.flavour)
        return {"train_job": train_job(spec, name, options, self.cluster, self.namespace())}

    def render_request(self, spec: Any, job_name: str, *,
                       options: BackendOptions | Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The TrainJob ``run`` would create (the submission token and secret values aside)."""
        rendered: dict[str, Any] = self.dry_run(spec, job_name, self.options(options))["train_job"]
        return rendered

    # --- the API server: not built yet ----------------------------------------------------------------------------
    def create(self, spec: JobSpec, name: str, options: KubernetesOptions, *, detached: bool,
               log: Log) -> JobHandle:
        _not_built()

    def status_of(self, name: str) -> JobStatus | None:
        _not_built()

    def look(self, handle: JobHandle) -> Look:
        _not_built()

    def stop(self, handle: JobHandle, reason: str = "Stopped by the user") -> str:
        _not_built()


def _not_built() -> NoReturn:
    raise TrainopsError(NOT_BUILT)


def _flavour_not_built(flavour: str | None) -> SpecError:
    from trainops.errors import Problem

    return SpecError(Problem("flavour", f"{flavour!r}: the HyperPodPyTorchJob flavour is not built yet (issue 44); "
                                        "use flavour trainer"), "kubernetes job")
