"""A virtual environment with SageMaker HyperPod's CLI and SDK (PyPI ``sagemaker-hyperpod`` 3.12.0), built once and
cached (`cached_venv`): the oracle the kubernetes backend's HyperPodPyTorchJob is checked against.

The package cannot share trainops' venv: it pins its own pytest, ruff, click and requests and needs a newer official
``kubernetes`` client (>= 33.1). trainops never imports it; `k8s_hyperpod_oracle` runs in this venv's interpreter on
a rendered object (JSON on stdin) and answers what the HyperPod SDK makes of it.

    python tests/support/k8s_hyperpod_venv.py          # build (or find) it and print its interpreter

The venv lives under ``$TRAINOPS_HYPERPOD_ORACLE_CACHE`` (default ``~/.cache/trainops-oracle-hyperpod``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `support` importable

from support.cached_venv import CachedVenv  # noqa: E402

HYPERPOD = CachedVenv(
    label="SageMaker HyperPod oracle",
    # Its models need only these; the package's own pins (awscli, hydra, hera, pytest, ruff, tox...) are a CLI's and
    # cost minutes, so it is installed without them and the `check` proves the models import.
    packages=("kubernetes==37.0.3", "pydantic==2.14.4", "PyYAML==6.0.4", "boto3==1.44.18", "click==8.5.1"),
    no_deps=("sagemaker-hyperpod==3.12.0",),
    cache_variable="TRAINOPS_HYPERPOD_ORACLE_CACHE", default_cache="trainops-oracle-hyperpod", prefix="venv",
    stamp=".trainops-hyperpod-ready",
    check=("from sagemaker.hyperpod.training.hyperpod_pytorch_job import HyperPodPytorchJob\n"
           "from importlib.metadata import version\n"
           "assert version('sagemaker-hyperpod') == '3.12.0', version('sagemaker-hyperpod')"),
)
build = HYPERPOD.build
venv_dir = HYPERPOD.venv_dir

if __name__ == "__main__":
    HYPERPOD.main()
