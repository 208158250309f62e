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

#: Backend settings (`get_backend`'s context) the stage step accepts besides each backend's own staging options.
CONTEXT_OPTIONS = frozenset({"client_factory", "region", "profile"})

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


def stage(source: str, destination: str, *, backend: str = "local", **options: Any) -> dict[str, Any]:
    """Stage ``source`` into ``destination`` with ``backend`` and return the report as a JSON-able dict.

    Local: `trainops.backends.local.staging.StageReport.to_dict` (``files_copied``, ``bytes_copied``,
    ``files_skipped``, ``refused``, ``failed``, ``stale``, ``seconds``, ``megabytes_per_second``, ...).
    SageMaker: `trainops.backends.sagemaker.fsx.StagingReport.to_dict` (``directory_path`` is what a training
    channel's ``FileSystemDataSource.DirectoryPath`` should be).

    Raises `SpecError` for bad input (unknown backend or option, malformed source or destination) and `JobFailed`
    when staging fails, or (``strict``, the default) when any file was refused or failed.
    """
    from trainops.backends.api import get_backend

    context = {key: options.pop(key) for key in CONTEXT_OPTIONS if key in options}
    profile = context.pop("profile", None)
    if profile and context.get("client_factory") is None:
        from trainops.aws.clients import default_client_factory

        context["client_factory"] = default_client_factory(context.get("region"), profile)
    chosen = get_backend(backend, **context)
    allowed = stage_options(chosen)
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise SpecError([Problem(name, f"is not an option of the {chosen.name} stage step; use one of "
                                       f"{', '.join(sorted(allowed | CONTEXT_OPTIONS))}") for name in unknown])
    return chosen.stage(source, destination, **options).to_dict()


def stage_options(backend: Any) -> frozenset[str]:
    """The keyword options a backend's ``stage`` takes (what it declares after the source and destination)."""
    import inspect

    parameters = inspect.signature(backend.stage).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)


def fsx_source(source: str | None, s3_prefix: str | None) -> str:
    """The S3 prefix an FSx stage imports: the source (an ``s3://`` prefix), or ``s3_prefix`` when no source is
    given; both given must agree. Raises `SpecError` naming the field otherwise."""
    from trainops.aws.s3 import parse_s3_uri

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
