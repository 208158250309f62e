"""A virtual environment standing for a SageMaker PyTorch training image, built once and cached.

It holds what the Deep Learning Container's Python has for a PyTorch job: torch (the CPU wheel), numpy, AWS's training
toolkit (`sagemaker-training`, which compiles a small C extension: gcc and the Python headers are needed) and its
PyTorch part (`sagemaker-pytorch-training`), and NOT trainops: a job run with it as `--image-python` can only use
trainops through the runtime channel, as in the real container.

    python tests/support/image_venv.py          # build (or find) it and print its interpreter

The venv lives under ``$TRAINOPS_IMAGE_VENV_CACHE`` (default ``~/.cache/trainops-test``), named by the pinned versions,
so a fresh clone builds it once and later runs reuse it; a lock keeps two test processes from building it at once, and
a stamp written last means a half-built venv is rebuilt rather than used.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = (
    "torch==2.13.0",
    "numpy",
    "sagemaker-training==5.1.4",
    "sagemaker-pytorch-training==3.0.0",
)
STAMP = ".trainops-image-ready"


def cache_root() -> Path:
    return Path(os.environ.get("TRAINOPS_IMAGE_VENV_CACHE") or Path.home() / ".cache" / "trainops-test")


def venv_dir() -> Path:
    key = hashlib.sha256(f"{sys.version_info[:2]}|{'|'.join(PACKAGES)}".encode()).hexdigest()[:12]
    return cache_root() / f"image-venv-{key}"


def python_of(directory: Path) -> Path:
    return directory / "bin" / "python"


def build(log=print) -> Path:
    """The image venv's interpreter, building the venv first when it is missing or half-built."""
    directory = venv_dir()
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / STAMP).exists():
            return python_of(directory)
        if directory.exists():
            shutil.rmtree(directory)
        log(f"building the training-image stand-in venv in {directory} (once; a few minutes)")
        subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
        pip = [str(python_of(directory)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        # setuptools/wheel: sagemaker-training is an sdist with a C extension, built here.
        subprocess.run([*pip, "--upgrade", "pip", "setuptools", "wheel"], check=True)
        subprocess.run([*pip, *PACKAGES], check=True)
        check = ("import torch, numpy, sagemaker_training, sagemaker_pytorch_container\n"
                 "import importlib.util, sys\n"
                 "sys.exit(1 if importlib.util.find_spec('trainops') else 0)\n")
        # From / with no PYTHONPATH: a checkout's trainops/ in the working directory would be found otherwise.
        environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        subprocess.run([str(python_of(directory)), "-c", check], check=True, cwd="/", env=environment)
        (directory / STAMP).write_text("\n".join(PACKAGES) + "\n")
        return python_of(directory)


if __name__ == "__main__":
    print(build(log=lambda line: print(line, file=sys.stderr)))
