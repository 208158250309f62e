"""A virtual environment with Airflow 2.11 and the Amazon provider, built once and cached, for the Airflow 2 tests.

trainops supports Airflow 2.11 through 3.x from one code base (`trainops.operators.compat`). This venv holds what a
platform team on Airflow 2.11 (an MWAA environment on its way to 3) has: ``apache-airflow==2.11.*`` and the Amazon
provider, from PyPI (Airflow's constraints files are not reachable from here; pip resolves the provider that declares
2.11 support), plus what the example pipeline's scripts import (torch, the CPU wheel, numpy, scikit-learn,
matplotlib). It does NOT hold trainops: `install_trainops` puts a wheel built from the checkout into a directory of
its own (non-editable, as a user installs it), which the tests put on ``PYTHONPATH``, so the cached venv is never
changed by a test and always meets today's code.

    python tests/support/airflow2_venv.py          # build (or find) it and print its interpreter

The venv lives under ``$TRAINOPS_AIRFLOW2_CACHE`` (default ``~/.cache/trainops-airflow2``), named by the pinned
versions; a lock keeps two test processes from building it at once, and a stamp written last means a half-built venv
is rebuilt rather than used.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "apache-airflow==2.11.*",
    "apache-airflow-providers-amazon",
    "torch==2.13.0",
    "numpy",
    "scikit-learn>=1.3",
    "matplotlib>=3.7",
    # trainops' own dependencies (pyproject's [project] dependencies and the aws extra)
    "platformdirs>=4",
    "pydantic>=2.6,<3",
    "PyYAML>=6",
    "boto3>=1.34",
)
STAMP = ".trainops-airflow2-ready"


def cache_root() -> Path:
    return Path(os.environ.get("TRAINOPS_AIRFLOW2_CACHE") or Path.home() / ".cache" / "trainops-airflow2")


def venv_dir() -> Path:
    key = hashlib.sha256(f"{sys.version_info[:2]}|{'|'.join(PACKAGES)}".encode()).hexdigest()[:12]
    return cache_root() / f"venv-{key}"


def python_of(directory: Path) -> Path:
    return directory / "bin" / "python"


def clean_environment() -> dict[str, str]:
    """This process's environment without what would point the venv at another Python's packages."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


def build(log=print) -> Path:
    """The venv's interpreter, building the venv first when it is missing or half-built."""
    directory = venv_dir()
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / STAMP).exists():
            return python_of(directory)
        if directory.exists():
            shutil.rmtree(directory)
        log(f"building the Airflow 2.11 venv in {directory} (once; a few minutes)")
        subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
        pip = [str(python_of(directory)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "--upgrade", "pip", "setuptools", "wheel"], check=True, env=clean_environment())
        subprocess.run([*pip, *PACKAGES], check=True, env=clean_environment())
        check = ("import airflow, sys\n"
                 "from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook\n"
                 "assert airflow.__version__.startswith('2.11'), airflow.__version__\n"
                 "import importlib.util\n"
                 "sys.exit(1 if importlib.util.find_spec('trainops') else 0)\n")
        subprocess.run([str(python_of(directory)), "-c", check], check=True, cwd="/", env=clean_environment())
        (directory / STAMP).write_text("\n".join(PACKAGES) + "\n")
        return python_of(directory)


def install_trainops(python: Path, target: Path) -> Path:
    """Build a wheel of the checkout and install it (no dependencies: the venv has them) into ``target``, a
    directory for ``PYTHONPATH``; the wheel's entry points (the Airflow provider) are found there too."""
    wheels = target.parent / f"{target.name}-wheel"
    subprocess.run([str(python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-w", str(wheels), str(REPO)], check=True,
                   env=clean_environment(), cwd="/")
    wheel = next(wheels.glob("trainops-*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    "--target", str(target), str(wheel)], check=True, env=clean_environment(), cwd="/")
    return target


if __name__ == "__main__":
    print(build(log=lambda line: print(line, file=sys.stderr)))
