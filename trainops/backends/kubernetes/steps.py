"""A pipeline's other steps on the kubernetes backend: where trainops runs, over the shared volume (`HereSteps`).

trainops reaches the shared volume itself (it lays every job's files out there), so staging, evaluation and the
model registry need no pod: they run where trainops runs (a laptop with the FSx/EFS mount, the Airflow worker, the
KFP step's pod with the claim mounted), as the local backend runs them, over ``shared_dir``. Staging copies data into
the shared volume (where a channel of a later TrainJob reads it), an evaluation reads the model host 1 packed there,
and the registry is a directory (default ``<shared_dir>/registry``). The slurm backend does the same over its shared
directory; a pod-side evaluation would need an image with trainops and the evaluation's libraries, which a
retraining pipeline's cheap scoring step does not justify.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from trainops.backends.builtin_kinds import JobKindMethods, MethodEvaluations, MethodRegistry, MethodStaging
from trainops.backends.job_kinds import Evaluations, Registry, Staging

if TYPE_CHECKING:
    from trainops.backends.kubernetes.settings import KubernetesCluster
    from trainops.backends.local.backend import LocalBackend

#: What a stage into the shared volume takes beside the source and destination.
STAGE_SETTINGS = frozenset({"strict", "workers", "progress", "delete"})


class HereSteps(JobKindMethods):
    """Staging, evaluation and the registry of a backend whose ``cluster`` has a shared volume trainops sees."""

    cluster: KubernetesCluster
    registry_dir: str | None
    client_factory: Any

    def evaluations(self) -> Evaluations:
        return MethodEvaluations(self, self.EVALUATION_SETTINGS)

    def staging(self) -> Staging:
        return MethodStaging(self, STAGE_SETTINGS)

    def registry(self) -> Registry:
        return MethodRegistry(self, self.REGISTRATION_SETTINGS, browsable=True)

    def _here(self) -> LocalBackend:
        """The local backend over the shared volume (through the registry of backends)."""
        from trainops.backends import get_backend

        self.cluster.check_shared()
        shared = os.path.expanduser(str(self.cluster.shared_dir))
        here = get_backend("local", workdir=shared, registry_dir=self.registry_dir or os.path.join(shared, "registry"),
                           client_factory=self.client_factory)
        return cast("LocalBackend", here)

    def _evaluate(self, **arguments: Any) -> Any:
        """Run the evaluation script where trainops runs, the model read from the shared volume."""
        return self._here().evaluate(**arguments)

    def evaluation_output(self, workdir: Any, key: str, model_artifact: str | None = None) -> str:
        return self._here().evaluation_output(workdir, key, model_artifact)

    def _register(self, **arguments: Any) -> Any:
        """A version in the registry directory (once per training job)."""
        return self._here().register(**arguments)

    def champion(self, group: str) -> Any:
        return self._here().champion(group)

    def model_registry(self) -> Any:
        return self._here().model_registry()

    def stage(self, source: str, destination: str, *, strict: bool = True, workers: int | None = None,
              progress: Any = None, delete: bool = False) -> Any:
        """Copy a local tree, file:// or s3:// prefix into a directory of the shared volume, as the local backend
        stages."""
        return self._here().stage(source, destination, strict=strict, workers=workers, progress=progress,
                                  delete=delete)
