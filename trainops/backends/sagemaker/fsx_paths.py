"""How an FSx staging names what it stages: an ``fsx://fs-.../path`` destination, and the S3 prefix it imports.

Pure parsing, no AWS call: the SageMaker backend's `stage` checks both before it creates a data repository
association, so a typo fails before anything is provisioned.
"""

from __future__ import annotations

import re

from trainops.aws.s3 import parse_s3_uri
from trainops.errors import Problem, SpecError

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


def fsx_source(source: str | None, s3_prefix: str | None) -> str:
    """The S3 prefix an FSx stage imports: the source (an ``s3://`` prefix), or ``s3_prefix`` when no source is
    given; both given must agree. Raises `SpecError` naming the field otherwise."""
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
