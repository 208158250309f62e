"""The settings, job spec and opened backend the kubernetes backend's unit tests render with (the TrainJob's and the
HyperPod flavour's), written once."""

from __future__ import annotations

from trainops.backends import get_backend
from trainops.backends.kubernetes.backend import KubernetesBackend
from trainops.spec.job import JobSpec

SHARED = {"shared_dir": "/fsx/me/trainops", "shared_pvc": "fsx-claim", "namespace": "team-a"}


def spec_of(**fields: object) -> JobSpec:
    """A 2-host p4d job of a given image, with ``fields`` on top."""
    return JobSpec.model_validate({"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
                                   "instance_count": 2, "max_run": 7200, "image_uri": "example.org/train:1",
                                   **fields})


def shared_backend() -> KubernetesBackend:
    """The kubernetes backend opened on `SHARED`."""
    backend = get_backend("kubernetes", options=SHARED)
    assert isinstance(backend, KubernetesBackend)
    return backend
