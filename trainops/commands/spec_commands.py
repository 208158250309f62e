"""`trainops validate`, `trainops render` and `trainops schema`: the spec and its dry run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from trainops.errors import SpecError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the spec commands to the command line."""
    validate = subparsers.add_parser(
        "validate", help="check a job spec (YAML or JSON) and the code it names",
        description="Check a job spec file and the files it names on this machine (source_dir, the entry_point in "
                    "it, each of dependencies; relative paths are against the spec file's directory) with the checks "
                    "run makes before it creates anything. Exit 0 when valid; exit 2 with every problem on stderr "
                    "when not.")
    validate.add_argument("file", help="job spec file (YAML or JSON)")
    validate.add_argument("--quiet", "-q", action="store_true", help="print nothing when valid")
    validate.set_defaults(handler=validate_command)

    render = subparsers.add_parser(
        "render", help="print exactly what the backend would create (dry run)",
        description="Render a job spec to what its backend would create, on stdout: for the local and SageMaker "
                    "backends the boto3 create_training_job request, as JSON. Nothing is created. Environment values "
                    "whose names look like secrets are masked.")
    render.add_argument("file", help="job spec file (YAML or JSON)")
    from trainops.commands.backend_args import add_backend_arguments

    add_backend_arguments(render)
    render.add_argument("--launcher", choices=["trainops", "toolkit"], default=None,
                        help="shorthand for -o launcher=...: who launches the ranks in the container (default: the "
                             "spec's launcher, trainops)")
    render.add_argument("--job-name", default=None, help="training job name (default: <name>-<timestamp>)")
    render.add_argument("--region", default=None, help="shorthand for -o region=...: the AWS region when the spec "
                                                       "has none (default: AWS_REGION)")
    render.set_defaults(handler=render_command)

    schema = subparsers.add_parser(
        "schema", help="print the JSON Schema of the job spec",
        description="Print the JSON Schema of the job spec on stdout (or, with --markdown, the field reference "
                    "that docs/spec.md holds).")
    schema.add_argument("--markdown", action="store_true",
                        help="the Markdown reference of every field instead (what docs/spec.md holds)")
    schema.set_defaults(handler=schema_command)


def validate_command(args: argparse.Namespace) -> int:
    from trainops.backends.request.code import code_problems  # what run refuses in the files the spec names
    from trainops.spec import load_job_spec

    spec = load_job_spec(args.file)  # paths made absolute against the spec file's directory, as run makes them
    problems = code_problems(spec)
    if problems:
        raise SpecError(problems, args.file)
    if not args.quiet:
        if spec.instance_groups:
            groups = ", ".join(f"{group.instance_count} x {group.instance_type}" for group in spec.instance_groups)
            where = f"instance groups {groups}"
        else:
            where = f"{spec.instance_count} x {spec.instance_type}"
        print(f"{args.file}: valid ({spec.dist.type} on {where})")
    from trainops.spec.deprecations import deprecation_warnings

    notes = deprecation_warnings(spec)
    if notes and not args.quiet:
        # One line, on stderr, exit 0: the spec works, the user should know before paying for it.
        print(f"{args.file}: warning: {'; '.join(notes)}", file=sys.stderr)
    if not args.quiet:
        print_forecast(spec, default_region())
    return 0


def print_forecast(spec: Any, region: str | None) -> None:
    """What one attempt can cost (`trainops.steps.forecast`), on stderr: render's stdout stays the request."""
    from trainops.steps.forecast import forecast

    for line in forecast(spec, region=getattr(spec, "region", None) or region).lines():
        print(line, file=sys.stderr)


def default_region() -> str | None:
    """The region boto3 would use, read from the environment without importing boto3."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


def render_command(args: argparse.Namespace) -> int:
    from trainops.backends.api import get_backend
    from trainops.commands.backend_args import backend_options
    from trainops.spec import load_job_spec
    from trainops.spec.names import timestamped_job_name

    spec = load_job_spec(args.file)
    job_name = args.job_name or timestamped_job_name(spec.name or "trainops")
    options = backend_options(args, launcher=args.launcher, region=args.region)
    # A dry run: the backend renders what it would create and calls nothing (no region needed from AWS).
    backend = get_backend(args.backend, options=options, source="backend options", region=default_region())
    rendered = backend.render_request(spec, job_name)
    if isinstance(rendered, str):
        sys.stdout.write(rendered if rendered.endswith("\n") else rendered + "\n")
    else:
        json.dump(rendered, sys.stdout, indent=2)
        sys.stdout.write("\n")
    sys.stdout.flush()
    print_forecast(spec, args.region or default_region())
    return 0


def schema_command(args: argparse.Namespace) -> int:
    from trainops.spec.docs import job_spec_schema, spec_reference_markdown

    if args.markdown:
        sys.stdout.write(spec_reference_markdown())
    else:
        json.dump(job_spec_schema(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
