"""The `trainops` command line.

Exit codes everywhere: 0 success, 2 invalid input, 1 failure while running (130 when interrupted). Errors the
project raises on purpose are printed as messages, never as tracebacks; set TRAINOPS_DEBUG=1 to see one anyway.

Each command lives in a module of `trainops.commands` with `register(subparsers)`; modules import at module level
only argparse and the light modules building the parser loads anyway (`trainops.errors`, the backend arguments),
so `trainops --help` stays fast.

Function-local imports (CLI start): `trainops --help` imports this module; the console and what explains an error
load when they are used.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from trainops import __version__
from trainops.errors import TrainopsError, missing_package

COMMAND_MODULES = [
    "trainops.commands.spec_commands",
    "trainops.commands.stage_commands",
    "trainops.commands.models_commands",
    "trainops.commands.job_commands",
    "trainops.commands.index_commands",
    "trainops.commands.kfp_commands",
    "trainops.commands.backend_commands",
    "trainops.commands.completion_commands",
]


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: one sub-command per registered command module."""
    parser = argparse.ArgumentParser(
        prog="trainops",
        description="Distributed training as a typed step: validate, render, run and watch jobs on any backend "
                    "(`trainops backends` lists them).",
        epilog="Exit codes: 0 success, 2 invalid input, 1 failure while running.",
    )
    parser.add_argument("--version", action="version", version=f"trainops {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from trainops.console import attach_console

    parser = build_parser()
    args = parser.parse_args(argv)
    attach_console()  # trainops' own messages (logging) on stdout, in order with the jobs' output
    try:
        return int(args.handler(args) or 0)
    except TrainopsError as error:
        print(f"trainops: {error}", file=sys.stderr)
        # Looks that kept failing because AWS cannot be reached from here: the set-up's cause and fix too (exit 2).
        cause = _set_up_cause(error)
        if cause is not None:
            print(f"trainops: {cause}", file=sys.stderr)
            return cause.exit_code
        return error.exit_code
    except KeyboardInterrupt:
        print("trainops: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # noqa: BLE001 - the last line of defence: a message, not a traceback
        # A command whose optional package is missing says which extra installs it (`make run`'s venv has only torch
        # and the example's packages: a SageMaker command there says what to install, not "internal error").
        missing = missing_package(error)
        if missing is not None:
            print(f"trainops: this command {missing}", file=sys.stderr)
            return 2
        # AWS that could not be reached (no credentials, an endpoint that does not answer): its cause and fix.
        from trainops.aws.reach import explain

        unreachable = explain(error)
        if unreachable is not None:
            print(f"trainops: {unreachable}", file=sys.stderr)
            return unreachable.exit_code
        if os.environ.get("TRAINOPS_DEBUG"):
            import traceback

            traceback.print_exc()
        print(f"trainops: internal error: {type(error).__name__}: {error} (set TRAINOPS_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1



def _set_up_cause(error: BaseException) -> TrainopsError | None:
    """The AWS set-up error (`trainops.aws.reach.explain`) behind looks that gave up (`JobOutOfSight`), or None."""
    from trainops.backends.looks import JobOutOfSight

    if not isinstance(error, JobOutOfSight):
        return None
    from trainops.aws.reach import explain

    link: BaseException | None = error.__cause__
    for _ in range(8):  # the chain: the front end's copy, the looks' error, the last failed look
        if link is None:
            return None
        explained = explain(link)
        if explained is not None:
            return explained
        link = link.__cause__
    return None


if __name__ == "__main__":
    sys.exit(main())
