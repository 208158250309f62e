"""Virtual environments the tests build once and reuse: an image stand-in, Airflow 2.11, the SDK oracles.

Each is named by the Python version and its pinned packages, so a change of pins is a new venv and a fresh clone
builds each once. A lock keeps two test processes from building one at once, and a stamp written last means a
half-built venv (a build killed midway) is rebuilt, never used. None of them holds trainops: a check run from ``/``
with no ``PYTHONPATH`` proves it, so a job run with one of them can only use trainops the way production does.

Byte code: pip compiles every module it installs (torch alone has 2,285 files), though the tests' processes import a
fraction of them. So the packages go in with ``--no-compile`` and ``warm`` (the modules the tests' processes import)
runs once with byte code written, leaving their ``.pyc`` where pip would have put them. Whole builds, CPU s (user +
system) on a busy 2-core machine: the image venv 77 before, 47 after; the Airflow 2.11 venv 120 before, 70 after. A
module nobody warmed is compiled when imported, as in any venv (from source each time where
``PYTHONDONTWRITEBYTECODE`` is set, as on this project's machines).
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


#: What a rank of the examples' jobs imports of torch (the digits script, torchrun's launcher): every venv that runs
#: jobs warms these.
TORCH_JOB_MODULES = ("torch", "torch.distributed", "torch.distributed.run", "torch.nn.parallel", "torch.utils.data",
                     "torch.utils.data.distributed", "numpy")


def warm_imports(*modules: str, compile_packages: Sequence[str] = ()) -> str:
    """Source for `CachedVenv.warm`: import each module (one that does not import is said, not fatal: warming only
    saves time) and byte-compile the whole of each of ``compile_packages`` (for packages whose modules are loaded
    from files rather than imported, as Airflow's database migrations are)."""
    return (f"import compileall, importlib, importlib.util, sys\n"
            f"for name in {list(modules)!r}:\n"
            f"    try:\n"
            f"        importlib.import_module(name)\n"
            f"    except Exception as error:\n"
            f"        print(f'warming the venv: {{name}} did not import ({{error}})', file=sys.stderr)\n"
            f"for name in {list(compile_packages)!r}:\n"
            f"    spec = importlib.util.find_spec(name)\n"
            f"    if spec is not None and spec.submodule_search_locations:\n"
            f"        for location in spec.submodule_search_locations:\n"
            f"            compileall.compile_dir(location, quiet=1)\n")


def warm(python: Path, source: str, timeout: float | None = None) -> None:
    """Run ``source`` (`warm_imports`) with ``python`` once with byte code written (this machine's shells say
    ``PYTHONDONTWRITEBYTECODE``), from ``/`` with no ``PYTHONPATH``: the venv's own modules get their ``.pyc``."""
    writing = {key: value for key, value in clean_environment().items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([str(python), "-c", source], cwd="/", env=writing, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"warming {python} failed:\n{done.stderr[-3000:]}"


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
    # Python source run once after the install with byte code written (the module docstring says why); the check's
    # imports when empty. `warm_imports` writes one that imports module names and tolerates a missing one.
    warm: str = ""

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
            subprocess.run([*pip, "--no-compile", *self.packages], check=True, env=environment)
            if self.no_deps:
                subprocess.run([*pip, "--no-compile", "--no-deps", *self.no_deps], check=True, env=environment)
            warm(python_of(directory), self.warm or self.check)
            no_trainops = "\nimport importlib.util, sys\nsys.exit(1 if importlib.util.find_spec('trainops') else 0)\n"
            # From / with no PYTHONPATH: a checkout's trainops/ in the working directory would be found otherwise.
            subprocess.run([str(python_of(directory)), "-c", self.check + no_trainops], check=True, cwd="/",
                           env=environment)
            (directory / self.stamp).write_text("\n".join([*self.packages, *self.no_deps]) + "\n")
            return python_of(directory)

    def main(self) -> None:
        """``python <module>.py``: build (or find) the venv and print its interpreter."""
        print(self.build(log=lambda line: print(line, file=sys.stderr)))
