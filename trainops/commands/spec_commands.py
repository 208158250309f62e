"""`trainops validate`, `trainops render` and `trainops schema`: the spec and its dry run.

Function-local imports (CLI start): `trainops --help` imports this module to build its parser; the spec
loader, the steps and the backends load only when validate, render or schema runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, cast

from trainops.commands.backend_args import add_backend_arguments, backend_options
from trainops.commands.job_commands import PIPELINE_KEYS
from trainops.commands.parsing import add_command
from trainops.errors import Problem, SpecError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the spec commands to the command line."""
    validate = add_command(
        subparsers, "validate", validate_command,
        help="check a job spec or a pipeline file (YAML or JSON) and the code it names",
        description="Check a job spec file and the files it names on this machine (source_dir, the entry_point in "
                    "it, each of dependencies; relative paths are against the spec file's directory) with the checks "
                    "run makes before it creates anything; a pipeline file is checked whole, every step (the train "
                    "spec, the backend's settings, the scripts, the gate), as `trainops run` checks it before its "
                    "first step. Exit 0 when valid; exit 2 with every problem on stderr when not.")
    validate.add_argument("file", help="job spec or pipeline file (YAML or JSON)")
    validate.add_argument("--quiet", "-q", action="store_true", help="print nothing when valid")
    validate.add_argument("--backend", default=None, metavar="NAME",
                          help="check a job spec with this backend's own rules too (an instance type its engine "
                               "does not have, a distribution it cannot run), as run does: a registered or named "
                               "backend (default: the registry's default, local); a pipeline file names its own")

    render = add_command(
        subparsers, "render", render_command, help="print exactly what the backend would create (dry run)",
        description="Render a job spec to what its backend would create, on stdout: for the local and SageMaker "
                    "backends the boto3 create_training_job request, as JSON. Nothing is created. Environment values "
                    "whose names look like secrets are masked. A pipeline file is checked whole (as validate does) "
                    "and its train step's request is rendered, on the pipeline's backend unless --backend says.")
    render.add_argument("file", help="job spec or pipeline file (YAML or JSON)")

    add_backend_arguments(render)
    render.add_argument("--launcher", choices=["trainops", "toolkit"], default=None,
                        help="shorthand for -o launcher=...: who launches the ranks in the container (default: the "
                             "spec's launcher, trainops)")
    render.add_argument("--job-name", default=None, help="training job name (default: <name>-<timestamp>)")
    render.add_argument("--region", default=None, help="shorthand for -o region=...: the AWS region when the spec "
                                                       "has none (default: AWS_REGION)")

    schema = add_command(
        subparsers, "schema", schema_command, help="print the JSON Schema of the job spec",
        description="Print the JSON Schema of the job spec on stdout (or, with --markdown, the field reference "
                    "that docs/spec.md holds).")
    schema.add_argument("--markdown", action="store_true",
                        help="the Markdown reference of every field instead (what docs/spec.md holds)")


def is_pipeline_file(path: str) -> bool:
    """Whether ``path`` holds a pipeline file (it has steps, or a backend or workdir) rather than a job spec."""
    from trainops.spec.loader import read_document

    document = read_document(path)
    return isinstance(document, dict) and bool(PIPELINE_KEYS.intersection(document))


def checked_pipeline(path: str, backend: str | None = None, backend_options: dict[str, Any] | None = None) -> Any:
    """The pipeline file at ``path`` checked whole (`trainops.steps.pipeline.check_pipeline`: every step, one
    `SpecError` with every problem) and resolved (`trainops.steps.plan.resolve_plan`)."""
    from pathlib import Path

    from trainops.spec.pipeline import load_pipeline
    from trainops.steps.pipeline import check_pipeline
    from trainops.steps.plan import resolve_plan

    pipeline = load_pipeline(path)
    directory = Path(path).resolve().parent
    check_pipeline(pipeline, directory, backend, source=str(path), backend_options=backend_options)
    return resolve_plan(pipeline, backend, pipeline_dir=directory, backend_options=backend_options)


def _pipeline_summary(plan: Any) -> str:
    spec = plan.train.spec
    steps = []
    if plan.prepare:
        steps.append(f"prepare ({os.path.basename(plan.prepare.script)})")
    if plan.stage:
        steps.append("stage")
    steps.append(f"train ({_where(spec)})")
    if plan.evaluate:
        gate = plan.evaluate.gate
        steps.append(f"evaluate (gate {gate if isinstance(gate, str) else json.dumps(gate)})" if gate else "evaluate")
    if plan.register:
        steps.append(f"register ({plan.register.group})")
    return f"pipeline {plan.name} on the {plan.backend} backend: {', '.join(steps)}"


def _where(spec: Any) -> str:
    if spec.instance_groups:
        groups = ", ".join(f"{group.instance_count} x {group.instance_type}" for group in spec.instance_groups)
        return f"{spec.dist.type} on instance groups {groups}"
    return f"{spec.dist.type} on {spec.instance_count} x {spec.instance_type}"


def validate_command(args: argparse.Namespace) -> int:
    from trainops.backends import resolve
    from trainops.backends.request.api_limits import instance_type_problems
    from trainops.backends.request.code import code_problems  # what run refuses in the files the spec names
    from trainops.backends.vocabulary import vocabulary_of
    from trainops.spec import load_job_spec
    from trainops.spec.rule_registry import SAGEMAKER_REQUEST

    if is_pipeline_file(args.file):
        if args.backend is not None:
            raise SpecError([Problem("--backend", "a pipeline file names its own backend (its backend: key); "
                                                  "leave --backend out, or validate the train step's spec file")])
        return _validate_pipeline(args)

    # The backend's own spec rules, as run applies them before anything is created (an engine's instance types and
    # distributions), and, for an engine that runs SageMaker's request, the API's own list of instance types that
    # render checks the request against: without them an ml.g5.xxlarge read "valid" here and run refused it.
    name, _ = resolve(args.backend)
    rule_sets = vocabulary_of(name).spec_rules
    spec = load_job_spec(args.file, rule_sets=rule_sets)  # paths made absolute against the file's directory
    problems = code_problems(spec)
    if SAGEMAKER_REQUEST in rule_sets:
        problems += instance_type_problems(spec)
    if problems:
        raise SpecError(problems, args.file)
    if not args.quiet:
        print(f"{args.file}: valid ({_where(spec)})")
    _notes(args, spec, backend=name)
    return 0


def _validate_pipeline(args: argparse.Namespace) -> int:
    plan = checked_pipeline(args.file)
    if not args.quiet:
        print(f"{args.file}: valid ({_pipeline_summary(plan)})")
    _notes(args, plan.train.spec, plan.region, backend=plan.backend)
    return 0


def _notes(args: argparse.Namespace, spec: Any, region: str | None = None, backend: str | None = None) -> None:
    """The spec's deprecations and the forecast of one attempt, on stderr (stdout keeps the verdict)."""
    from trainops.spec.deprecations import deprecation_warnings

    notes = deprecation_warnings(spec)
    if notes and not args.quiet:
        # One line, on stderr, exit 0: the spec works, the user should know before paying for it.
        print(f"{args.file}: warning: {'; '.join(notes)}", file=sys.stderr)
    if not args.quiet:
        print_forecast(spec, region or default_region(), backend)


def print_forecast(spec: Any, region: str | None, backend: Any = None) -> None:
    """What one attempt can cost on ``backend`` (None: the default one; `trainops.steps.forecast`), on stderr:
    render's stdout stays the request."""
    from trainops.steps.forecast import forecast

    for line in forecast(spec, region=getattr(spec, "region", None) or region, backend=backend).lines():
        print(line, file=sys.stderr)


def default_region() -> str | None:
    """The region boto3 would use, read from the environment without importing boto3."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")


def render_command(args: argparse.Namespace) -> int:
    from trainops.backends.api import get_backend
    from trainops.backends.vocabulary import vocabulary_of
    from trainops.spec import load_job_spec
    from trainops.spec.names import timestamped_job_name

    options = backend_options(args, launcher=args.launcher, region=args.region)
    region = default_region()
    is_pipeline = is_pipeline_file(args.file)
    if is_pipeline:
        # The whole pipeline checked, then its train step's request on the pipeline's backend and settings.
        plan = checked_pipeline(args.file, args.backend, options)
        spec = plan.train.spec
        job_name = args.job_name or plan.train.job_name or timestamped_job_name(spec.name or plan.name)
        from trainops.backends import backend_class

        # As the runner trains it: the step's channels and ranks per host where the backend takes them.
        step_options = backend_class(plan.backend).takes({"channel_overrides": plan.train.channels or None,
                                                          "processes_per_host": plan.train.processes_per_host})
        backend = get_backend(plan.backend, options={**step_options, **plan.backend_options},
                              source="backend_options", workdir=plan.workdir, region=plan.region or region)
        print(f"{args.file}: {_pipeline_summary(plan)}; the train step's request:", file=sys.stderr, flush=True)
    else:
        spec = load_job_spec(args.file, rule_sets=vocabulary_of(args.backend).spec_rules)  # its backend's rules
        job_name = args.job_name or timestamped_job_name(spec.name or "trainops")
        # A dry run: the backend renders what it would create and calls nothing (no region needed from AWS).
        backend = get_backend(args.backend, options=options, source="backend options", region=region)
    try:
        rendered = _rendered(backend, spec, job_name)
    except SpecError as error:
        if not is_pipeline:
            raise

        # Each problem at its place in the pipeline file, as validate names them.
        raise SpecError([Problem(f"steps.train.spec.{problem.path}" if problem.path else "steps.train.spec",
                                 problem.message) for problem in error.problems],
                        f"{args.file} (the train step's request for the {plan.backend} backend)") from None
    if is_pipeline:
        from trainops.spec.secrets import masked_spec_document

        # One document: every step as the runner resolves it (secret-looking values masked) and the train request.
        resolved = plan.to_dict()
        resolved["train_spec"] = masked_spec_document(resolved["train_spec"])
        resolved["train_job_name"] = job_name
        rendered = {"pipeline": resolved, "train_request": rendered}
    if isinstance(rendered, str):
        sys.stdout.write(rendered if rendered.endswith("\n") else rendered + "\n")
    else:
        json.dump(rendered, sys.stdout, indent=2)
        sys.stdout.write("\n")
    sys.stdout.flush()
    print_forecast(spec, args.region or default_region(), backend)
    return 0


#: What SageMaker needs of a spec and a local run does not: a spec without them runs locally as it is.
ACCOUNT_FIELDS = ("role", "region", "output_path")


def _rendered(backend: Any, spec: Any, job_name: str) -> dict[str, Any] | str:
    """The backend's request for ``spec``. The local backend renders SageMaker's request (one request, two
    executors); a spec written for a local run (no role, no s3:// output path: the digits example), which SageMaker
    refuses only for its account fields, gets the request the local run executes instead
    (`LocalBackend.run_request`), said on stderr with what to add for SageMaker's: exit 0, as `trainops run` of
    the same file succeeds. A spec with a role or an S3 output is meant for SageMaker: its problems stand."""
    try:
        return backend.render_request(spec, job_name)
    except SpecError as error:
        run_request = getattr(backend, "run_request", None)
        meant_for_sagemaker = spec.role or str(spec.output_path or "").startswith("s3://")
        if run_request is None or meant_for_sagemaker or not all(
                problem.path in ACCOUNT_FIELDS for problem in error.problems):
            raise
        missing = sorted({problem.path for problem in error.problems}, key=ACCOUNT_FIELDS.index)
    rendered = run_request(spec, job_name)
    print(f"[trainops] render: the request a local run executes, with this machine's paths; SageMaker would "
          f"also need {', '.join(missing)} (a local run does not: RoleArn is the placeholder {rendered['RoleArn']}, "
          f"the model goes to {rendered['OutputDataConfig']['S3OutputPath']}). For SageMaker's request add "
          f"{', '.join(missing)} to the spec and render with --backend sagemaker.", file=sys.stderr, flush=True)
    return cast(dict[str, Any], rendered)


def schema_command(args: argparse.Namespace) -> int:
    from trainops.spec.docs import job_spec_schema, spec_reference_markdown

    if args.markdown:
        sys.stdout.write(spec_reference_markdown())
    else:
        json.dump(job_spec_schema(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0
