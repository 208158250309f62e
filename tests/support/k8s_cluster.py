"""An emulated Kubeflow Trainer cluster for the kubernetes backend's system tests and bench: the API emulator
(`k8s_api`) with the stand-in controller (`k8s_trainer`), a shared volume (a directory of this machine, mode 0700)
and the objects the backend's preflight reads (the namespace, the Trainer API, the runtime, the claim Bound, the
Kueue LocalQueue ``team-a``), so a job's log shows only what the job did. Cheap to start (two threads): a test module
holds one for all its tests, each job under its own name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.k8s_api import Store, api_server
from support.k8s_trainer import FakeTrainer

NAMESPACE, CLAIM, QUEUE = "ml", "fsx", "team-a"


def ready(store: Store, namespace: str = NAMESPACE, claim: str = CLAIM, queue: str = QUEUE) -> None:
    """Serve what the preflight reads of a cluster ready for trainops' jobs."""
    store.paths.update({
        f"/api/v1/namespaces/{namespace}": {"kind": "Namespace", "apiVersion": "v1",
                                            "metadata": {"name": namespace}},
        "/apis/trainer.kubeflow.org/v1alpha1": {"kind": "APIResourceList", "groupVersion":
                                                "trainer.kubeflow.org/v1alpha1", "resources": [
            {"name": "trainjobs", "singularName": "trainjob", "namespaced": True, "kind": "TrainJob",
             "verbs": ["create", "get", "list", "delete"]}]},
        "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed": {
            "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}},
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{claim}": {
            "kind": "PersistentVolumeClaim", "metadata": {"name": claim}, "status": {"phase": "Bound"}},
        f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{namespace}/localqueues/{queue}": {
            "kind": "LocalQueue", "metadata": {"name": queue}},
    })


@dataclass(frozen=True)
class EmulatedCluster:
    """The emulator's store, the controller, the kubeconfig and the shared volume's directory."""

    store: Store
    trainer: FakeTrainer
    kubeconfig: Path
    shared: Path

    def settings(self, poll_seconds: float = 0.2) -> dict[str, Any]:
        """The kubernetes backend's settings for this cluster (a pipeline file's ``backend_options``)."""
        return {"kubeconfig": str(self.kubeconfig), "shared_dir": str(self.shared), "shared_pvc": CLAIM,
                "poll_seconds": poll_seconds}

    def backend(self, poll_seconds: float = 0.2) -> Any:
        from trainops.backends import get_backend

        return get_backend("kubernetes", options=self.settings(poll_seconds))

    def env(self, home: Path) -> dict[str, str]:
        """The environment of a ``trainops`` subprocess driving this cluster (its own TRAINOPS_HOME)."""
        return {**os.environ, "TRAINOPS_HOME": str(home), "KUBECONFIG": str(self.kubeconfig)}


@contextmanager
def emulated_cluster(directory: Path) -> Iterator[EmulatedCluster]:
    """An emulated cluster under ``directory`` (its kubeconfig and shared volume), stopped on exit; the pods' Python
    is this interpreter's (the nodes run ``python3``: the controller keeps PATH)."""
    shared = directory / "shared"
    shared.mkdir(mode=0o700, exist_ok=True)
    with api_server(directory) as (store, kubeconfig):
        ready(store)
        trainer = FakeTrainer(store, NAMESPACE)
        try:
            yield EmulatedCluster(store, trainer, kubeconfig, shared)
        finally:
            trainer.close()

