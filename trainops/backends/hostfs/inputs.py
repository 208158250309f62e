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
    if not (directory / spec.entry_point).is_file():
        where = "source_dir" if spec.source_dir else "the working directory (no source_dir given)"
        raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {directory}: entry_point is the "
                                               f"script's path relative to {where}; fix the name, or set source_dir "
                                               "to the directory that holds the script"))
    return directory
