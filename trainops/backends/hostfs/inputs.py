"""Where a job's code comes from on this machine (its channels: `trainops.backends.hostfs.channels`)."""

from __future__ import annotations

from pathlib import Path

from trainops.errors import Problem, SpecError
from trainops.spec.inputs import local_path
from trainops.spec.job import JobSpec


def resolve_code_dir(spec: JobSpec) -> Path | None:
    """The directory holding the training code (source_dir, else the working directory); None for an s3:// source
    tarball, which the local executor downloads as the job's code channel like SageMaker does."""
    if spec.source_dir:
        if spec.source_dir.startswith("s3://"):
            if not spec.source_dir.endswith(".tar.gz"):
                raise SpecError(Problem("source_dir", f"{spec.source_dir!r}: an s3:// source_dir names a tarball "
                                                      "object (s3://bucket/prefix/sourcedir.tar.gz)"))
            return None
        directory = Path(local_path(spec.source_dir)).expanduser().resolve()
    else:
        directory = Path.cwd()
    if not directory.is_dir():
        raise SpecError(Problem("source_dir", f"{directory} is not a directory: give the directory that holds your "
                                              "code (a relative source_dir is against the job spec file's "
                                              "directory)"))
    if spec.entry_point is not None and not (directory / spec.entry_point).is_file():
        where = "source_dir" if spec.source_dir else "the working directory (no source_dir given)"
        raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {directory}: entry_point is the "
                                               f"script's path relative to {where}; fix the name, or set source_dir "
                                               "to the directory that holds the script"))
    return directory


def evaluation_script(entry_point: str, source_dir: Path | None) -> tuple[Path, Path]:
    """The evaluation script's file and the directory it runs in: ``entry_point`` relative to ``source_dir`` (an
    absolute path; the SDK's rule: a file in it, never outside it), or a path of its own when there is no
    ``source_dir``. The one check of both evaluations: the local one runs the script found here, the SageMaker one
    makes it before it uploads ``source_dir`` or creates the processing job, so a misspelt script costs no job.
    Raises `SpecError` (source ``evaluation``) naming the field that is wrong and what to give."""
    if source_dir is not None:
        if not source_dir.is_dir():
            raise SpecError(Problem("source_dir", f"{source_dir} is not a directory; give the directory holding the "
                                                  "evaluation script"), source="evaluation")
        script = (source_dir / entry_point).resolve()
        if not script.is_relative_to(source_dir):
            raise SpecError(Problem("entry_point", f"{entry_point!r} points outside source_dir; give a path inside "
                                                   f"{source_dir}"), source="evaluation")
        directory = source_dir
    else:
        script = Path(entry_point).expanduser().resolve()
        directory = script.parent
    if not script.is_file():
        raise SpecError(Problem("entry_point", f"{script} does not exist; give the evaluation script's file name "
                                               "(relative to source_dir)"), source="evaluation")
    return script, directory
