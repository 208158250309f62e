"""A virtual environment standing for a SageMaker PyTorch training image, built once and cached (`cached_venv`).

It holds what the Deep Learning Container's Python has for a PyTorch job: torch (the CPU wheel), numpy, AWS's training
toolkit (`sagemaker-training`, which compiles a small C extension: gcc and the Python headers are needed) and its
PyTorch part (`sagemaker-pytorch-training`), and NOT trainops: a job run with it as `--image-python` can only use
trainops through the runtime channel, as in the real container.

    python tests/support/image_venv.py          # build (or find) it and print its interpreter

The venv lives under ``$TRAINOPS_IMAGE_VENV_CACHE`` (default ``~/.cache/trainops-test``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `support` importable

from support.cached_venv import TORCH_JOB_MODULES, CachedVenv, warm_imports  # noqa: E402

IMAGE = CachedVenv(
    label="training-image stand-in",
    packages=("torch==2.13.0", "numpy", "sagemaker-training==5.1.4", "sagemaker-pytorch-training==3.0.0"),
    cache_variable="TRAINOPS_IMAGE_VENV_CACHE", default_cache="trainops-test", prefix="image-venv",
    stamp=".trainops-image-ready",
    check="import torch, numpy, sagemaker_training, sagemaker_pytorch_container",
    # What the jobs run with it import: the ranks (torch's distributed and data parts, the examples' scripts), the
    # torchrun launcher, and AWS's `train` command with its PyTorch part.
    warm=warm_imports(*TORCH_JOB_MODULES, "torch.nn.functional", "torch.optim", "torch.distributed.tensor",
                      "torch.distributed.fsdp", "sagemaker_training.cli.train", "sagemaker_pytorch_container.training"),
)
PACKAGES = IMAGE.packages
build = IMAGE.build
venv_dir = IMAGE.venv_dir

if __name__ == "__main__":
    IMAGE.main()
