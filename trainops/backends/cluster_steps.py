"""A pipeline's other steps on a cluster engine: where trainops runs, as the local backend runs them (`HereSteps`).

The slurm, kubernetes and ray backends run only training on their cluster. Staging, evaluation and the model registry
need no job there: trainops reaches the directory the cluster's nodes share (it lays every job's files out there), so
they run where trainops runs (a login node or a laptop with the mount, the Airflow worker, the KFP step's pod with the
volume mounted) through the local backend over that directory. Staging copies data into it (where a channel of a
later training job reads it), an evaluation reads the model host 1 packed there, and the registry is a directory
(default ``<directory>/registry``). A cluster-side evaluation would need an image or environment with trainops and
the evaluation's libraries on the nodes, which a retraining pipeline's cheap scoring step does not justify.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from trainops.backends import get_backend
from trainops.backends.builtin_kinds import JobKindMethods, MethodEvaluations, MethodRegistry, MethodStaging
from trainops.backends.job_kinds import Evaluations, Registry, Staging

if TYPE_CHECKING:
    from trainops.backends.local.backend import LocalBackend

#: What a stage where trainops runs takes beside the source and destination (the local backend's copy).
STAGE_SETTINGS = frozenset({"strict", "workers", "progress", "delete"})


class HereSteps(JobKindMethods):
    """Staging, evaluation and the registry of a cluster backend, run by the local backend over ``_here_dir()``.

    A backend mixing this in writes ``_here_dir`` (the directory its nodes share, as trainops sees it; refusing by
    name what is missing) and has ``registry_dir`` and ``client_factory`` (boto3, for s3:// staging sources).
    """

    registry_dir: str | None
    client_factory: Any

    def _here_dir(self) -> str | None:
        """The directory the steps work in, or None where the local backend's own default does (trainops' home)."""
        raise NotImplementedError

    def evaluations(self) -> Evaluations:
        return MethodEvaluations(self, self.EVALUATION_SETTINGS)

    def staging(self) -> Staging:
        return MethodStaging(self, STAGE_SETTINGS)

    def registry(self) -> Registry:
        return MethodRegistry(self, self.REGISTRATION_SETTINGS, browsable=True)

    def _here(self) -> LocalBackend:
        """The local backend over ``_here_dir()`` (through the registry of backends, as any front end gets one)."""
        base = self._here_dir()
        registry = self.registry_dir or (os.path.join(base, "registry") if base else None)
        here = get_backend("local", workdir=base, registry_dir=registry, client_factory=self.client_factory)
        return cast("LocalBackend", here)

    def _evaluate(self, **arguments: Any) -> Any:
        """Run the evaluation script where trainops runs, the model read where host 1 packed it."""
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
        """Copy a local tree, file:// or s3:// prefix into a directory the nodes see, as the local backend stages."""
        return self._here().stage(source, destination, strict=strict, workers=workers, progress=progress,
                                  delete=delete)
