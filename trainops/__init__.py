"""trainops: distributed training as a typed step of Airflow DAGs, Kubeflow pipelines and scheduled retraining.

The public API, loaded lazily (PEP 562): ``import trainops`` costs nothing, and each name imports its module on
first use, so DAG files that import `trainops.operators` still parse fast.

    import trainops

    spec = trainops.load_job_spec("examples/digits/train.yaml")
    result = trainops.train(spec, backend="local", job_name="digits-1")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "JobSpec": "trainops.spec.job",
    "load_job_spec": "trainops.spec.loader",
    "parse_job_spec": "trainops.spec.loader",
    "train": "trainops.steps.train",
    "evaluate": "trainops.steps.evaluate",
    "register": "trainops.steps.register",
    "stage": "trainops.steps.stage",
    "get_backend": "trainops.backends",
    "Backend": "trainops.backends.api",
    "BackendOptions": "trainops.backends.options",
    "LocalOptions": "trainops.backends.options",
    "SageMakerOptions": "trainops.backends.options",
    "JobHandle": "trainops.backends.api",
    "JobResult": "trainops.backends.api",
    "Evaluation": "trainops.backends.api",
    "RegisteredVersion": "trainops.backends.api",
    "Unsupported": "trainops.backends.api",
    "JobStatus": "trainops.backends.states",
    "Problem": "trainops.errors",
    "SpecError": "trainops.errors",
    "JobFailed": "trainops.errors",
    "TrainopsError": "trainops.errors",
    "PreflightError": "trainops.errors",
}

__all__ = [  # the names of _EXPORTS, written out so that linters and type checkers see them
    "__version__", "JobSpec", "load_job_spec", "parse_job_spec", "train", "evaluate", "register", "stage",
    "get_backend", "Backend", "BackendOptions", "LocalOptions", "SageMakerOptions", "JobHandle", "JobResult",
    "Evaluation", "RegisteredVersion", "Unsupported", "JobStatus", "Problem", "SpecError", "JobFailed",
    "TrainopsError", "PreflightError",
]

if TYPE_CHECKING:
    from trainops.backends import get_backend
    from trainops.backends.api import Backend, Evaluation, JobHandle, JobResult, RegisteredVersion, Unsupported
    from trainops.backends.options import BackendOptions, LocalOptions, SageMakerOptions
    from trainops.backends.states import JobStatus
    from trainops.errors import JobFailed, PreflightError, Problem, SpecError, TrainopsError
    from trainops.spec.job import JobSpec
    from trainops.spec.loader import load_job_spec, parse_job_spec
    from trainops.steps.evaluate import evaluate
    from trainops.steps.register import register
    from trainops.steps.stage import stage
    from trainops.steps.train import train


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trainops' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
