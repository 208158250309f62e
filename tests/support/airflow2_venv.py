"""A virtual environment with Airflow 2.11 and the Amazon provider, built once and cached, for the Airflow 2 tests.

trainops supports Airflow 2.11 through 3.x from one code base (`trainops.operators.compat`). This venv holds what a
platform team on Airflow 2.11 (an MWAA environment on its way to 3) has: ``apache-airflow==2.11.*`` and the Amazon
provider, from PyPI (Airflow's constraints files are not reachable from here; pip resolves the provider that declares
2.11 support), plus what the example pipeline's scripts import (torch, the CPU wheel, numpy, scikit-learn,
matplotlib). It does NOT hold trainops: `install_trainops` puts a wheel built from the checkout into a directory of
its own (non-editable, as a user installs it), which the tests put on ``PYTHONPATH``, so the cached venv is never
changed by a test and always meets today's code.

    python tests/support/airflow2_venv.py          # build (or find) it and print its interpreter

The venv lives under ``$TRAINOPS_AIRFLOW2_CACHE`` (default ``~/.cache/trainops-airflow2``); `cached_venv` builds
it once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `support` importable

from support.cached_venv import TORCH_JOB_MODULES, CachedVenv, clean_environment, warm_imports  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
AIRFLOW2 = CachedVenv(
    label="Airflow 2.11",
    packages=(
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
    ),
    cache_variable="TRAINOPS_AIRFLOW2_CACHE", default_cache="trainops-airflow2", prefix="venv",
    stamp=".trainops-airflow2-ready",
    check=("import airflow\n"
           "from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook\n"
           "assert airflow.__version__.startswith('2.11'), airflow.__version__"),
    # Airflow whole (its CLI, scheduler, executors and the database migrations alembic loads from files), and what
    # the example pipeline's tasks import of the rest.
    warm=warm_imports("airflow", "airflow.providers.amazon.aws.hooks.base_aws", *TORCH_JOB_MODULES, "sklearn.datasets",
                      "sklearn.model_selection", "matplotlib", "matplotlib.pyplot", "boto3", "pydantic", "yaml",
                      "platformdirs",
                      compile_packages=("airflow", "sqlalchemy", "alembic", "pendulum", "flask")),
)
PACKAGES = AIRFLOW2.packages
build = AIRFLOW2.build
venv_dir = AIRFLOW2.venv_dir
__all__ = ["AIRFLOW2", "build", "clean_environment", "install_trainops", "venv_dir"]


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
    AIRFLOW2.main()
