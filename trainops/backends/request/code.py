"""The code a training request carries: the files of a source directory (and the spec's dependencies), the SDK's
``sourcedir.tar.gz`` of them, and the trainops runtime's own files.

Deterministic: the same tree gives the same names and the same bytes (the tarball has fixed times, owners and
order), so a retried submission uploads identical objects and a local run executes what SageMaker would download.
``__pycache__`` and ``.git`` are skipped, and so are links that point outside the directory.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import logging
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import trainops
from trainops.backends.hostfs.inputs import resolve_code_dir
from trainops.backends.request.render import render
from trainops.errors import Problem, SpecError

logger = logging.getLogger(__name__)

#: Directory names never uploaded: caches and version control.
SKIPPED_DIRECTORIES = frozenset({"__pycache__", ".git"})

#: The name of the SDK's script-mode archive, which the toolkit launcher downloads and unpacks into /opt/ml/code.
SOURCE_TARBALL_NAME = "sourcedir.tar.gz"


def is_ignored(name: str, ignore_patterns: list[str] | tuple[str, ...] | None) -> bool:
    """Whether a file or directory called ``name`` stays out of the code: one of ``ignore_patterns`` matches it (as
    ``shutil.ignore_patterns`` matches, on the name alone, the way SDK v3 copies ``SourceCode.ignore_patterns``), or
    with no patterns given it is one of `SKIPPED_DIRECTORIES`."""
    if ignore_patterns is None:
        return name in SKIPPED_DIRECTORIES
    return any(fnmatch.fnmatch(name, pattern) for pattern in ignore_patterns)


def list_files(root: str | os.PathLike[str], field_name: str = "source_dir",
               ignore_patterns: list[str] | tuple[str, ...] | None = None
               ) -> tuple[list[tuple[Path, str]], list[str]]:
    """Every regular file under ``root`` as ``(path, relative posix name)``, sorted by name, and what was skipped.

    Skips what `is_ignored` says (`SKIPPED_DIRECTORIES`, or the spec's ``ignore_patterns``), symbolic links to
    directories (not followed), links that point outside ``root`` and anything that is not a regular file. Raises
    `SpecError` naming ``field_name`` when ``root`` is not a directory.
    """
    base = Path(root)
    if not base.is_dir():
        raise SpecError(Problem(field_name, f"{str(root)!r} is not a directory; give the directory holding your code"))
    resolved_base = base.resolve()
    files: list[tuple[Path, str]] = []
    skipped: list[str] = []
    for directory, subdirectories, names in os.walk(base):
        current = Path(directory)
        kept = []
        for name in subdirectories:
            path = current / name
            if is_ignored(name, ignore_patterns):
                continue
            if path.is_symlink():
                skipped.append(path.relative_to(base).as_posix())
                continue
            kept.append(name)
        subdirectories[:] = sorted(kept)
        for name in names:
            if ignore_patterns is not None and is_ignored(name, ignore_patterns):
                continue
            path = current / name
            relative = path.relative_to(base).as_posix()
            try:
                target = path.resolve()
                outside = path.is_symlink() and not target.is_relative_to(resolved_base)
                regular = target.is_file()
            except (OSError, RuntimeError):  # a link loop, or a file that vanished while we walked
                outside, regular = True, False
            if outside or not regular:
                skipped.append(relative)
                continue
            files.append((path, relative))
    for name in skipped:
        logger.warning("not uploading %s: a link out of the directory or not a regular file", name)
    return sorted(files, key=lambda item: item[1]), sorted(skipped)


def dependency_problems(dependencies: list[str] | tuple[str, ...]) -> list[Problem]:
    """A problem for each of the spec's ``dependencies`` that is not a directory on this machine: the backends' dry
    runs report them before anything is looked up or uploaded (the SDK fails on one only while it packs the code)."""
    return [Problem(f"dependencies.{index}", f"{str(path)!r} is not a directory: each dependency is a local directory "
                                             "copied next to the code (relative paths are against the spec's "
                                             "directory)")
            for index, path in enumerate(dependencies) if not Path(path).is_dir()]


def code_problems(spec: Any) -> list[Problem]:
    """What is missing of the code ``spec`` names on this machine, every problem at once: the code directory and the
    entry point in it (`trainops.backends.hostfs.inputs.resolve_code_dir`, the check the local and slurm backends
    lay the code out with), then each of ``dependencies`` (`dependency_problems`). The SageMaker backend refuses
    these before anything is uploaded or created, as the SDK does (it requires the entry point to be a file in
    source_dir before any request). An ``s3://`` source_dir is an uploaded tarball: nothing local is looked at."""
    problems: list[Problem] = []
    try:
        resolve_code_dir(spec)
    except SpecError as error:
        problems += error.problems
    return problems + dependency_problems(getattr(spec, "dependencies", None) or ())



def checked_render(spec: Any, name: str, launcher: str | None, region: str | None, backend: str) -> dict[str, Any]:
    """`render`, with the code a run of ``backend`` reads from this machine checked too (`code_problems`: source_dir,
    the entry point in it, each dependency), every problem at once, so a job whose script is missing is refused by
    every backend's render as its run refuses it (and as the SDK does, before the preflight, the upload or
    CreateTrainingJob); render's own problem for a field (an ``s3://`` or ``file://`` source_dir) is not repeated."""
    problems = code_problems(spec)
    try:
        request = render(spec, job_name=name, launcher=launcher, region=region)
    except SpecError as error:
        reported = {problem.path for problem in error.problems}
        raise SpecError(error.problems + [problem for problem in problems if problem.path not in reported],
                        error.source) from None
    if problems:
        raise SpecError(problems, f"job spec for the {backend} backend")
    return request

def code_files(source_dir: str | os.PathLike[str], dependencies: list[str] | tuple[str, ...] = (),
               ignore_patterns: list[str] | tuple[str, ...] | None = None) -> list[tuple[Path, str]]:
    """The files of the code: ``source_dir``'s at the root and each of the spec's ``dependencies`` directories under
    its own name, as the SDK packs them (``dependencies=['libs/common']`` -> ``common/...``); ``ignore_patterns``
    (SDK v3's ``SourceCode.ignore_patterns``) leave out the source directory's matching names."""
    files, _ = list_files(source_dir, ignore_patterns=ignore_patterns)
    for index, dependency in enumerate(dependencies):
        name = Path(dependency).name
        extra, _ = list_files(dependency, f"dependencies.{index}")
        files += [(path, f"{name}/{relative}") for path, relative in extra]
    return sorted(files, key=lambda item: item[1])


def source_tarball_bytes(source_dir: str | os.PathLike[str], dependencies: list[str] | tuple[str, ...] = ()
                         ) -> bytes:
    """The ``sourcedir.tar.gz`` of a directory (and the spec's ``dependencies``), byte-for-byte the same for the same
    files.

    Members are at the archive root (as the SDK writes them), sorted, with time 0, owner 0 and modes normalised to
    0644 or 0755 (executable files keep their execute bit). Code that imports trainops gets its runtime beside it
    (`runtime_beside`).
    """
    files = code_files(source_dir, dependencies)
    files = sorted(files + runtime_beside(files), key=lambda item: item[1])
    buffer = io.BytesIO()
    # The gzip header carries a time too: fix it, or two archives of the same tree differ.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed, \
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, relative in files:
            data = path.read_bytes()
            info = tarfile.TarInfo(relative)
            info.size = len(data)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


#: Code that uses the trainops runtime (``import trainops.runtime``, ``from trainops import runtime``).
_USES_TRAINOPS = re.compile(rb"^\s*(?:import trainops\b|from trainops(?:\.runtime)?\s+import\b)", re.MULTILINE)


def runtime_beside(files: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """The trainops runtime's files (`runtime_files`) for a ``sourcedir.tar.gz`` whose Python code imports trainops
    and carries no ``trainops/`` of its own, else none.

    The toolkit launcher runs the script in an image without trainops (the trainops launcher brings the runtime as
    a channel on PYTHONPATH; the toolkit has no such channel): at the archive's root, beside the script, the
    runtime is importable from /opt/ml/code as any of the script's own modules, as a ``dependencies`` entry would
    be. Code that does not import trainops gets the archive the SDK would make."""
    if any(relative == "trainops" or relative.startswith("trainops/") for _, relative in files):
        return []
    for path, relative in files:
        if relative.endswith(".py") and _USES_TRAINOPS.search(path.read_bytes()):
            return runtime_files()
    return []


def runtime_files() -> list[tuple[Path, str]]:
    """The files of the trainops package a training container needs: ``trainops/__init__.py`` and
    ``trainops/runtime/**`` (stdlib-only, so it runs in any image), as ``(path, "trainops/...")`` pairs, sorted."""
    package = Path(trainops.__file__).resolve().parent
    files = [(package / "__init__.py", "trainops/__init__.py")]
    runtime, _ = list_files(package / "runtime", "runtime")
    files += [(path, f"trainops/runtime/{relative}") for path, relative in runtime if not relative.endswith(".pyc")]
    return sorted(files, key=lambda item: item[1])
