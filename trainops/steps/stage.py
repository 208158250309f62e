"""The stage step: put training data where the training job reads it, and return a JSON-able report.

Used alike by the pipeline runner, the Airflow operator and the KFP component, so all three stage the same way:

- ``backend="local"``: copy a local directory, ``file://`` URI or ``s3://`` prefix into a local directory that stands
  for the FSx mount (`trainops.backends.local.staging.stage_tree`). Options: ``workers``, ``progress``, ``delete``,
  ``client_factory``.
- ``backend="sagemaker"``: make an S3 prefix visible on an FSx for Lustre file system
  (`trainops.backends.sagemaker.fsx.stage`: a data repository association and an import task). The destination is
  spelled ``fsx://fs-0123456789abcdef0/path/in/filesystem``; the source is the S3 prefix (``s3://bucket/prefix``),
  also accepted as the ``s3_prefix`` option. Options: ``s3_prefix``, ``client_factory``, ``region``, ``profile``,
  ``paths``, ``report_uri``, ``poll_seconds``, ``timeout_seconds``; ``workers`` is accepted and unused (the import
  runs inside FSx).

With ``strict=True`` (the default) a stage that refused or failed any file raises `JobFailed` after it finishes,
so hostile or broken input can never pass a pipeline silently. Unknown options raise `SpecError` naming them.
"""

from __future__ import annotations

import re
from typing import Any

from trainops.errors import Problem, SpecError

BACKENDS = ("local", "sagemaker")
LOCAL_OPTIONS = frozenset({"workers", "progress", "delete", "client_factory", "strict"})
SAGEMAKER_OPTIONS = frozenset({"s3_prefix", "client_factory", "region", "profile", "paths", "report_uri",
                               "poll_seconds", "timeout_seconds", "workers", "strict"})

#: FSx file system ids: ``fs-`` and 17 hexadecimal digits (8 for the oldest ones), in lower case.
_FILE_SYSTEM_ID = re.compile(r"fs-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
FSX_EXAMPLE = "fsx://fs-0123456789abcdef0/path/in/filesystem"


def parse_fsx_destination(destination: str) -> tuple[str, str]:
    """Split ``fsx://fs-0123456789abcdef0/data/train`` into ``("fs-0123456789abcdef0", "/data/train")``.

    The path is where the data appears on the file system, from its root (without the mount name); ``fsx://fs-...``
    alone or with ``/`` means the root. Raises `SpecError` naming ``destination`` and the fix for anything else.
    """
    def problem(message: str) -> SpecError:
        return SpecError(Problem("destination", f"{destination!r}: {message}; write it like {FSX_EXAMPLE}"))

    if not isinstance(destination, str) or not destination.startswith("fsx://"):
        raise problem("not an fsx:// destination")
    remainder = destination[len("fsx://"):]
    if _CONTROL.search(remainder):
        raise problem("contains a control character")
    if "?" in remainder or "#" in remainder:
        raise problem("fsx:// destinations take no query or fragment")
    file_system_id, slash, path = remainder.partition("/")
    if not file_system_id:
        raise problem("no file system id")
    if _FILE_SYSTEM_ID.fullmatch(file_system_id.lower()) and file_system_id != file_system_id.lower():
        raise problem(f"file system ids are lower case ({file_system_id.lower()})")
    if not _FILE_SYSTEM_ID.fullmatch(file_system_id):
        raise problem(f"{file_system_id!r} is not an FSx file system id (fs- and 17 hexadecimal digits)")
    segments = path.rstrip("/").split("/") if path.strip("/") else []
    for segment in segments:
        if segment in ("", ".", ".."):
            raise problem("the path must be a plain absolute path (no '//', '.' or '..' segments)")
    return file_system_id, "/" + "/".join(segments)


def _check_options(options: dict[str, Any], allowed: frozenset[str], backend: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError([Problem(name, f"is not an option of the {backend} stage step; use one of "
                                       f"{', '.join(sorted(allowed))}") for name in unknown])


def stage(source: str, destination: str, *, backend: str = "local", **options: Any) -> dict[str, Any]:
    """Stage ``source`` into ``destination`` with ``backend`` and return the report as a JSON-able dict.

    Local: `trainops.backends.local.staging.StageReport.to_dict` (``files_copied``, ``bytes_copied``,
    ``files_skipped``, ``refused``, ``failed``, ``stale``, ``seconds``, ``megabytes_per_second``, ...).
    SageMaker: `trainops.backends.sagemaker.fsx.StagingReport.to_dict` (``directory_path`` is what a training
    channel's ``FileSystemDataSource.DirectoryPath`` should be).

    Raises `SpecError` for bad input (unknown backend or option, malformed source or destination) and `JobFailed`
    when staging fails, or (``strict``, the default) when any file was refused or failed.
    """
    if backend not in BACKENDS:
        raise SpecError(Problem("backend", f"{backend!r} is not a backend; use one of {', '.join(BACKENDS)}"))
    if backend == "local":
        return _stage_local(source, destination, options)
    return _stage_fsx(source, destination, options)


def _stage_local(source: str, destination: str, options: dict[str, Any]) -> dict[str, Any]:
    from trainops.backends.local.staging import stage_tree

    if "s3_prefix" in options:
        raise SpecError(Problem("s3_prefix", "is for FSx staging (backend 'sagemaker'); with the local backend "
                                             "put the s3:// URI in the source instead"))
    _check_options(options, LOCAL_OPTIONS, "local")
    strict = options.pop("strict", True)
    report = stage_tree(source, destination, **options)
    if strict:
        report.raise_for_problems()
    return report.to_dict()


def _s3_prefix(source: str | None, s3_prefix: str | None) -> str:
    from trainops.backends.sagemaker.s3 import parse_s3_uri

    if s3_prefix is not None:
        parse_s3_uri(s3_prefix, "s3_prefix")
    if source and source.startswith("s3://"):
        parse_s3_uri(source, "source")
        if s3_prefix is not None and s3_prefix.rstrip("/") != source.rstrip("/"):
            raise SpecError(Problem("s3_prefix", f"{s3_prefix} differs from the source {source}; FSx imports the "
                                                 "source prefix, so give it once (as the source)"))
        return source
    if source:
        raise SpecError(Problem("source", f"{source!r} is not an S3 prefix; FSx for Lustre imports from S3, so upload "
                                          "the data first (for example `aws s3 sync DIR s3://bucket/prefix`) and "
                                          "stage s3://bucket/prefix"))
    if s3_prefix is None:
        raise SpecError(Problem("source", "no source given; pass the S3 prefix to import (s3://bucket/prefix)"))
    return s3_prefix


def _stage_fsx(source: str, destination: str, options: dict[str, Any]) -> dict[str, Any]:
    from trainops.backends.sagemaker import fsx
    from trainops.backends.sagemaker.clients import default_client_factory

    _check_options(options, SAGEMAKER_OPTIONS, "sagemaker")
    file_system_id, file_system_path = parse_fsx_destination(destination)
    s3_uri = _s3_prefix(source, options.get("s3_prefix"))
    factory = options.get("client_factory") or default_client_factory(options.get("region"), options.get("profile"))
    timing = {key: options[key] for key in ("poll_seconds", "timeout_seconds") if options.get(key) is not None}
    report = fsx.stage(factory, file_system_id=file_system_id, s3_uri=s3_uri, file_system_path=file_system_path,
                       paths=options.get("paths"), report_uri=options.get("report_uri"), **timing)
    # fsx.stage raises JobFailed itself when any file failed to import, so strict needs no check here.
    return report.to_dict()
