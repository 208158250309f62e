"""``python -m trainops.runtime``: the in-container launcher's command line.

``launch`` reads this host's contract, builds the plan and runs it; ``launch --dry-run`` prints the plan as one JSON
object ``{"argv": [...], "env": {...}}`` and exits 0. Exit codes: 0 success, 1 the job failed (or was stopped),
2 bad contract input (the message names the file or variable and says what to do). ``healthcheck`` measures this
host's GPUs (:mod:`trainops.runtime.healthcheck`); with ``TRAINOPS_HEALTHCHECK=1`` it is also the first step of
``launch``.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from trainops.runtime.errors import TrainopsError
from trainops.runtime.execute import DEFAULT_STOP_GRACE_SECONDS


def _seconds(environ: Mapping[str, str], name: str, default: float | None) -> float | None:
    text = environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        from trainops.runtime.contract import ContractError

        raise ContractError(f"environment variable {name}={text!r}: expected a number of seconds") from None
    return value if value > 0 else default


def plan_from_environment(base_dir: str | None = None, environ: Mapping[str, str] | None = None):
    """Read the contract (``base_dir`` or ``SAGEMAKER_BASE_DIR`` or ``/opt/ml``), probe the host once and build the
    plan: the whole parse -> config -> plan chain, for callers that want the plan without running it."""
    from trainops.runtime.config import launch_config
    from trainops.runtime.contract import base_directory, read_contract, unpack_code_tarball
    from trainops.runtime.host_facts import detect_host_facts
    from trainops.runtime.planner import build_plan

    environ = os.environ if environ is None else environ
    # An s3:// source tarball arrives as the code channel's one file: unpacked into <base>/code, as the toolkit does.
    unpack_code_tarball(os.path.abspath(base_dir) if base_dir else base_directory(environ))
    contract = read_contract(base_dir, environ)
    config = launch_config(contract, environ)
    return build_plan(config, detect_host_facts(environ))


def _report_bad_input(base_dir: str | None, error: TrainopsError) -> None:
    """Write the failure file for input the launcher cannot run, when the contract directory itself was readable,
    so the reason reaches SageMaker's FailureReason (and the local backend) and not only this host's log."""
    from trainops.runtime.contract import read_contract
    from trainops.runtime.failure import Failure, render_failure, write_once

    try:
        contract = read_contract(base_dir)
        failure = Failure(reason="error", host=contract.current_host, exit_code=error.exit_code,
                          summary=f"invalid job input on host {contract.current_host}: {error}")
        write_once(contract.failure_path, render_failure(failure))
    except (TrainopsError, OSError):
        pass


def _requirements_failed(base_dir: str | None, plan: Any) -> bool:
    """Install the job's requirements file (SDK v3's SourceCode.requirements) before the ranks start; a failed
    install writes the failure file (a setup failure) and ends this host's launch."""
    from trainops.runtime import requirements
    from trainops.runtime.contract import read_contract
    from trainops.runtime.failure import Failure, render_failure, write_once

    path = requirements.requirements_file(read_contract(base_dir).hyperparameters, plan.cwd)
    if path is None:
        return False
    failed = requirements.install(path, plan.current_host)
    if failed is None:
        return False
    first, _, rest = failed.partition("\n")
    write_once(plan.failure_path, render_failure(Failure(reason="error", host=plan.current_host, exit_code=1,
                                                         summary=first, stderr_tail=rest.splitlines())))
    print(f"trainops: {first}", file=sys.stderr)
    return True


def _launch(arguments: argparse.Namespace) -> int:
    from trainops.runtime.execute import execute

    try:
        plan = plan_from_environment(arguments.base_dir)
    except TrainopsError as error:
        if not arguments.dry_run:
            _report_bad_input(arguments.base_dir, error)
        raise
    if arguments.dry_run:
        print(json.dumps(plan.dry_run(), indent=2))
        return 0
    for note in plan.notes:
        print(f"trainops: note: {note}", file=sys.stderr)
    if _requirements_failed(arguments.base_dir, plan):
        return 1
    if plan.healthcheck:
        # Opt-in first step (TRAINOPS_HEALTHCHECK=1 / trainops_healthcheck): a slow GPU fails the job here.
        from trainops.runtime.healthcheck import preflight

        if preflight(plan):
            return 1
    outcome = execute(
        plan,
        max_run_seconds=_seconds(os.environ, "TRAINOPS_MAX_RUN_SECONDS", None),
        stop_grace_seconds=_seconds(os.environ, "TRAINOPS_STOP_GRACE_SECONDS", DEFAULT_STOP_GRACE_SECONDS)
        or DEFAULT_STOP_GRACE_SECONDS,
        collect_orphans=True,
    )
    return outcome.exit_code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m trainops.runtime`` (one subparser per command)."""
    parser = argparse.ArgumentParser(
        prog="python -m trainops.runtime",
        description="The trainops in-container launcher: reads the SageMaker container contract "
                    "(SAGEMAKER_BASE_DIR, default /opt/ml) and runs the training script on this host.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    launch = commands.add_parser(
        "launch", help="run this host's part of the training job",
        description="Run this host's part of the job: torchrun, mpirun or one process, as the distribution asks. "
                    "Exit codes: 0 success, 1 the job failed or was stopped, 2 bad contract input.")
    launch.add_argument("--dry-run", action="store_true",
                        help='print the plan as one JSON object {"argv": [...], "env": {...}} and exit 0')
    launch.add_argument("--base-dir", metavar="DIR",
                        help="the contract directory (default: $SAGEMAKER_BASE_DIR, else /opt/ml)")
    launch.set_defaults(handler=_launch)
    from trainops.runtime import healthcheck

    check = commands.add_parser("healthcheck", help="measure this host's GPUs against the instance catalog")
    healthcheck.build_parser(check)
    check.set_defaults(handler=lambda arguments: healthcheck.run_command(arguments, os.environ))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the command; trainops errors become a message and their exit code."""
    arguments = build_parser().parse_args(argv)
    try:
        return int(arguments.handler(arguments))
    except TrainopsError as error:
        print(f"trainops: {error}", file=sys.stderr)
        return error.exit_code
