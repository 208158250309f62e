"""The project's own errors. Every user-facing failure is one of these, so the CLI can map it to an exit code
(2 for bad input, 1 for a failure while running) and print it without a traceback."""

from __future__ import annotations

from typing import NamedTuple


# A NamedTuple rather than a dataclass: this module is imported by every command, and `dataclasses` (with `inspect`)
# would add milliseconds to each start of the CLI.
class Problem(NamedTuple):
    """One thing wrong with an input: where (a dotted field path) and what to do about it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


# Defined with the runtime, which travels to the training container without the rest of the package; the same class
# here, so `except TrainopsError` catches the runtime's errors too.
from trainops.runtime.errors import TrainopsError  # noqa: E402


class SpecError(TrainopsError):
    """Invalid input (a spec, a pipeline file, a CLI argument). Carries every problem found, each with its field."""

    exit_code = 2

    def __init__(self, problems: list[Problem] | Problem | str, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        head = f"invalid {self.source}" if self.source else "invalid input"
        count = len(self.problems)
        lines = [f"{head}: {count} problem{'s' if count != 1 else ''}"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


class JobFailed(TrainopsError):
    """A job (or a step of a pipeline) ran and did not succeed."""

    exit_code = 1


class PreflightError(SpecError):
    """A backend check before anything is created (subnet AZ, security group, mount name) failed."""


#: The optional packages trainops imports on demand, and the extra of trainops that installs each (pyproject.toml).
OPTIONAL_PACKAGES = {"boto3": "aws", "botocore": "aws", "s3transfer": "aws", "kfp": "kfp", "airflow": "airflow",
                     "torch": "torch", "numpy": "torch", "sklearn": "examples", "matplotlib": "examples"}


def install_hint(error: BaseException) -> str | None:
    """``pip install 'trainops[EXTRA]'`` when ``error`` is a missing optional package of trainops, else None."""
    name = (getattr(error, "name", None) or "").partition(".")[0]
    extra = OPTIONAL_PACKAGES.get(name) if isinstance(error, ModuleNotFoundError) else None
    if not extra:
        return None
    # From a checkout (an editable install, `make setup`'s), pip finds no 'trainops' on an index: the checkout's
    # own path is what installs the extra there.
    import os

    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        return f"pip install 'trainops[{extra}]' (from this checkout: pip install -e '{checkout}[{extra}]')"
    return f"pip install 'trainops[{extra}]'"


def missing_package(error: BaseException) -> str | None:
    """``needs 'boto3', which is not installed in <prefix>: pip install 'trainops[aws]'`` when ``error`` is a missing
    optional package of trainops (`install_hint`), else None: what a command or a job that needs it says."""
    import sys

    hint = install_hint(error)
    return f"needs {getattr(error, 'name', '')!r}, which is not installed in {sys.prefix}: {hint}" if hint else None
