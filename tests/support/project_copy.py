"""A copy of trainops that another user of this machine can run, for the tests that run project code as that user
(`support.other_user`'s rival, user nobody).

The checkout may lie where no other user can reach it (a clone under a 0700 home, a ``mktemp -d`` directory), and so
may its virtual environment: such a test never hands the other user the checkout's own path. It gets a copy, in
the system's temporary directory, readable by everyone: the checkout's ``trainops`` package (the code under test)
and the installed distributions trainops needs to run (its required dependencies and theirs, read from the
installed metadata: pydantic, PyYAML, platformdirs...). Files are copied, not linked: a copy's permissions are its
own (a link would share the checkout's, which may be 0600).
"""

from __future__ import annotations

import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]


def _required(distribution: metadata.Distribution) -> list[str]:
    """The names of the distributions ``distribution`` requires to run (its extras' requirements left out)."""
    from packaging.requirements import Requirement

    names = []
    for text in distribution.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def runtime_distributions(root: str = "trainops") -> list[metadata.Distribution]:
    """The installed distributions ``root`` needs to run, itself excluded: its requirements, and theirs."""
    seen: dict[str, metadata.Distribution] = {}
    waiting = _required(metadata.distribution(root))
    while waiting:
        name = re.sub(r"[-_.]+", "-", waiting.pop()).lower()
        if name in seen:
            continue
        try:
            found = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed for this Python (a marker we did not evaluate): nothing to copy
        seen[name] = found
        waiting += _required(found)
    return list(seen.values())


def _open_to_all(path: Path) -> None:
    """Every directory under ``path`` 0755 and every file 0644 (0755 when executable)."""
    for item in [path, *path.rglob("*")]:
        if item.is_dir():
            item.chmod(0o755)
        else:
            item.chmod(0o755 if item.stat().st_mode & stat.S_IXUSR else 0o644)


def copy_project(destination: Path) -> list[str]:
    """Copy trainops and the distributions it needs into ``destination``; the entries of PYTHONPATH that import
    them."""
    code = destination / "code"
    shutil.copytree(REPOSITORY / "trainops", code / "trainops", ignore=shutil.ignore_patterns("__pycache__"))
    packages = destination / "site-packages"
    packages.mkdir()
    for distribution in runtime_distributions():
        for relative in distribution.files or []:
            if ".." in Path(relative).parts or relative.suffix == ".pyc":
                continue  # a script installed outside site-packages, or bytecode the copy compiles itself
            source = Path(str(distribution.locate_file(relative)))
            if source.is_file():
                target = packages / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    _open_to_all(destination)
    return [str(code), str(packages)]


@contextmanager
def readable_project(prefix: str = "trainops-readable-") -> Iterator[str]:
    """A copy of trainops (`copy_project`) in a new directory of the system's temporary directory that every user
    can read; yields its PYTHONPATH, and removes the copy afterwards."""
    destination = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield ":".join(copy_project(destination))
    finally:
        shutil.rmtree(destination, ignore_errors=True)
