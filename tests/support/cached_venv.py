"""Virtual environments the tests build once and reuse: an image stand-in, Airflow 2.11, the SDK oracles.

Each is named by the Python version and its pinned packages, so a change of pins is a new venv and a fresh clone
builds each once. A lock keeps two test processes from building one at once, and a stamp written last means a
half-built venv (a build killed midway) is rebuilt, never used. None of them holds trainops: a check run from ``/``
with no ``PYTHONPATH`` proves it, so a job run with one of them can only use trainops the way production does.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def clean_environment() -> dict[str, str]:
    """This process's environment without what would point a venv at another Python's packages."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}


def python_of(directory: Path) -> Path:
    return directory / "bin" / "python"


@dataclass(frozen=True)
class CachedVenv:
    """One cached venv: ``packages`` installed into ``<cache>/<prefix>-<key>``, then ``check`` (Python source run
    by the venv's interpreter) must pass. ``cache_variable`` names the environment variable that moves the cache
    from ``~/.cache/<default_cache>``."""

    label: str
    packages: Sequence[str]
    cache_variable: str
    default_cache: str
    prefix: str
    stamp: str
    check: str
    # Installed after ``packages`` without their dependencies (a toolkit whose pins the others would break).
    no_deps: Sequence[str] = field(default_factory=tuple)

    def cache_root(self) -> Path:
        return Path(os.environ.get(self.cache_variable) or Path.home() / ".cache" / self.default_cache)

    def venv_dir(self) -> Path:
        pins = [*self.packages, *self.no_deps]
        key = hashlib.sha256(f"{sys.version_info[:2]}|{'|'.join(pins)}".encode()).hexdigest()[:12]
        return self.cache_root() / f"{self.prefix}-{key}"

    def build(self, log: Callable[[str], None] = print) -> Path:
        """The venv's interpreter, building the venv first when it is missing or half-built."""
        directory = self.venv_dir()
        directory.parent.mkdir(parents=True, exist_ok=True)
        with open(directory.parent / f".{directory.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (directory / self.stamp).exists():
                return python_of(directory)
            if directory.exists():
                shutil.rmtree(directory)
            log(f"building the {self.label} venv in {directory}: {', '.join([*self.packages, *self.no_deps])} "
                "(once, a few minutes: the downloads and any C extension to compile; pip is quiet until done)")
            subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True)
            pip = [str(python_of(directory)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            environment = clean_environment()
            # setuptools/wheel: sagemaker-training is an sdist with a C extension (gcc and the Python headers).
            subprocess.run([*pip, "--upgrade", "pip", "setuptools", "wheel"], check=True, env=environment)
            subprocess.run([*pip, *self.packages], check=True, env=environment)
            if self.no_deps:
                subprocess.run([*pip, "--no-deps", *self.no_deps], check=True, env=environment)
            no_trainops = "\nimport importlib.util, sys\nsys.exit(1 if importlib.util.find_spec('trainops') else 0)\n"
            # From / with no PYTHONPATH: a checkout's trainops/ in the working directory would be found otherwise.
            subprocess.run([str(python_of(directory)), "-c", self.check + no_trainops], check=True, cwd="/",
                           env=environment)
            (directory / self.stamp).write_text("\n".join([*self.packages, *self.no_deps]) + "\n")
            return python_of(directory)

    def main(self) -> None:
        """``python <module>.py``: build (or find) the venv and print its interpreter."""
        print(self.build(log=lambda line: print(line, file=sys.stderr)))
