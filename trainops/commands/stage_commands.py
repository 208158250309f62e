"""`trainops stage SRC DST`: copy training data into a directory that stands for the FSx mount.

Function-local imports (CLI start): `trainops --help` imports this module to build its parser; the stage
step and the backend's staging load only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from trainops.commands.backend_args import add_backend_arguments, backend_options, open_backend
from trainops.commands.parsing import add_command
from trainops.errors import Problem, SpecError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the stage command to the command line."""
    stage = add_command(
        subparsers, "stage", stage_command,
        help="copy data (local directory, file:// or s3://) into a local directory standing for FSx",
        description="Copy SRC (a local directory, a file:// URI or s3://bucket/prefix) into the local directory DST, "
                    "skipping files unchanged since the last stage (by size and modification time, or size and ETag "
                    "for S3; manifest DST/.trainops-stage.json); S3 objects are downloaded in parallel by boto3's "
                    "transfer manager. "
                    "Each file is written under a temporary name and renamed, so an interrupted stage leaves no "
                    "partial file; run it again to complete it. Names that would land outside DST ('..', absolute "
                    "paths, links pointing outside SRC, control characters) are refused and printed on stderr. "
                    "Files deleted from SRC since the last stage are left in DST unless --delete is given. "
                    "S3 uses boto3's configuration (credentials, region, AWS_ENDPOINT_URL).",
        epilog="Exit codes: 0 every file staged or unchanged; 1 some files were refused or failed (each is printed); "
               "2 invalid input (missing source, destination inside the source, ...).")
    stage.add_argument("source", metavar="SRC", help="local directory, file:// URI or s3://bucket/prefix")
    stage.add_argument("destination", metavar="DST", help="local directory (created when missing)")

    add_backend_arguments(stage)
    stage.add_argument("--workers", type=int, default=None, metavar="N",
                       help="parallel S3 downloads (default 10, as aws s3 sync); a local tree is copied by one "
                            "process")
    stage.add_argument("--delete", action="store_true",
                       help="remove files an earlier stage wrote that are no longer in SRC (like rsync --delete)")
    stage.add_argument("--quiet", "-q", action="store_true",
                       help="no progress bar, no summary (refused and failed files are still printed)")
    stage.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def stage_command(args: argparse.Namespace) -> int:
    from trainops.steps.stage import stage_options

    # The default backend stages into a local directory standing for the FSx mount; refused files are reported,
    # not raised. The flags are the backend's staging options; what it does not take is refused, named.
    backend = open_backend(args, backend_options(args))
    given = {"workers": args.workers, "delete": args.delete or None}
    unknown = sorted(key for key, value in given.items() if value is not None and key not in stage_options(backend))
    if unknown:
        raise SpecError([Problem(f"--{key}", f"the {backend.name} backend's staging does not take it")
                         for key in unknown])
    derived = {key: value for key, value in {"strict": False, "progress": False if args.quiet else None}.items()
               if key in stage_options(backend)}
    from trainops.backends.job_kinds import StageRequest

    settings = {**derived, **{key: value for key, value in given.items() if value is not None}}
    report: Any = backend.staging().run(StageRequest(args.source, args.destination, settings))
    for line in getattr(report, "problem_lines", lambda: [])():
        print(f"trainops stage: {line}", file=sys.stderr)
    if not args.quiet:
        for note in getattr(report, "notes", []):
            print(f"trainops stage: note: {note}", file=sys.stderr)
    data = report.to_dict()
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not args.quiet:
        print(report.summary() if hasattr(report, "summary") else data.get("summary") or json.dumps(data))
    return 0 if getattr(report, "ok", True) else 1
