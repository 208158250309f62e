"""`trainops kfp compile` and `trainops kfp run-local`: a pipeline file as a Kubeflow pipeline.

kfp is imported inside the command functions only: `trainops --help` and every other command stay free of it.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the kfp commands to the command line."""
    kfp = subparsers.add_parser(
        "kfp", help="compile a pipeline file for Kubeflow Pipelines, or run it locally with kfp.local",
        description="A pipeline file (prepare, stage, train, evaluate with its gate, register) as a Kubeflow "
                    "Pipelines v2 pipeline of trainops components. See docs/kubeflow.md.")
    commands = kfp.add_subparsers(dest="kfp_command", metavar="COMMAND")
    commands.required = True

    compile_command = commands.add_parser(
        "compile", help="compile a pipeline file to KFP IR YAML",
        description="Compile PIPELINE (a trainops pipeline file) into a KFP v2 pipeline (IR YAML) for a Kubeflow "
                    "cluster. Each component runs `python3 -m trainops.components.executor` in the image built "
                    "from the repository's Dockerfile. Values keep the file's relative paths and ${workdir}; the "
                    "components resolve them against the pipeline_dir parameter, relative to the image's WORKDIR, "
                    "which holds the build context's pipeline files: run it from the build context (the "
                    "repository root for examples/). A pipeline whose files would not be in the image is refused.",
        epilog="Exit codes: 0 compiled; 2 invalid input (the pipeline file, its job spec, or a path the image "
               "would not hold).")
    compile_command.add_argument("pipeline", metavar="PIPELINE", help="pipeline file (YAML or JSON)")
    compile_command.add_argument("-o", "--output", required=True, metavar="OUT.yaml", help="where to write the YAML")
    compile_command.add_argument("--image", default=None,
                                 help="component image: the one built from the repository's Dockerfile, pushed "
                                      "where the cluster pulls from (default: trainops:<version>, the Dockerfile's "
                                      "tag); its Python runs the installed components, nothing is installed")
    compile_command.add_argument("--package", action="append", default=None, metavar="REQUIREMENT",
                                 help="make lightweight components that pip-install REQUIREMENT when they start "
                                      "(repeatable; image default python:3.11-slim); without it nothing is "
                                      "installed at run time")
    compile_command.add_argument("--pip-index-url", action="append", default=None, metavar="URL",
                                 help="package index for --package (repeatable)")
    compile_command.add_argument("--pipeline-dir", default=None, metavar="DIR",
                                 help="the pipeline file's directory in the image: relative to its WORKDIR "
                                      "(/opt/trainops) or absolute under it (default: the file's directory relative "
                                      "to the current directory, the image's build context); checked here")
    compile_command.set_defaults(handler=compile_handler)

    run_local = commands.add_parser(
        "run-local", help="run the pipeline with kfp.local on this machine (the default backend, offline)",
        description="Run the KFP pipeline of PIPELINE with kfp.local (SubprocessRunner without a virtual "
                    "environment: nothing is installed, no network), its jobs on the default backend (the local one) "
                    "whatever the file says, or on the one --backend names, and print each task's state and the "
                    "metrics. KFP's outputs go under <workdir>/kfp.",
        epilog="Exit codes: 0 the pipeline succeeded; 1 a task failed (a model that misses its gate fails the run "
               "when the file says on_gate_failure: fail); 2 invalid input.")
    run_local.add_argument("pipeline", metavar="PIPELINE", help="pipeline file (YAML or JSON)")
    run_local.add_argument("--workdir", default=None,
                           help="local state directory (default: the file's workdir, else $TRAINOPS_HOME)")
    run_local.add_argument("--gate", default=None,
                           help='quality gate for this run instead of the file\'s, e.g. "accuracy >= 0.97"')
    run_local.add_argument("--run-key", default="", metavar="KEY",
                           help="part of the training job's name: a new key trains anew even with the same inputs")
    from trainops.commands.backend_args import add_backend_arguments

    add_backend_arguments(run_local)
    run_local.set_defaults(handler=run_local_handler)


def check_output(output: str) -> None:
    """Refuse, before compiling, an output KFP could not write: `SpecError` naming --output with what to give."""
    import os
    from pathlib import Path

    from trainops.errors import Problem, SpecError

    path = Path(output).expanduser()
    why = None
    if path.suffix not in (".yaml", ".yml"):
        why = "must be a file name ending in .yaml or .yml (KFP writes IR YAML)"
    elif path.is_dir():
        why = "is a directory: give a file name ending in .yaml"
    else:
        existing = path.resolve().parent
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            why = f"cannot be created: {existing} is a file, not a directory"
        elif not os.access(existing, os.W_OK | os.X_OK):
            why = f"cannot be created: {existing} is not writable"
        elif path.exists() and not os.access(path, os.W_OK):
            why = "exists and is not writable"
    if why:
        raise SpecError(Problem("--output", f"{output} {why}"))


def compile_handler(args: argparse.Namespace) -> int:
    from trainops.components.pipeline import compile_pipeline
    from trainops.components.settings import settings_for

    check_output(args.output)
    settings = settings_for(args.image, args.package, args.pip_index_url)
    output = compile_pipeline(args.pipeline, args.output, settings=settings, pipeline_dir=args.pipeline_dir)
    print(f"compiled {args.pipeline} -> {output} (image {settings.base_image}"
          + (f", installs {' '.join(settings.packages_to_install)} at start-up" if settings.packages_to_install
             else ", containerized: nothing installed at run time") + ")")
    return 0


def run_local_handler(args: argparse.Namespace) -> int:
    from trainops.commands.backend_args import backend_options
    from trainops.components.local_run import run_local

    outcome = run_local(args.pipeline, workdir=args.workdir, gate=args.gate, run_key=args.run_key,
                        backend=args.backend, backend_options=backend_options(args))
    return 0 if outcome.succeeded else 1
