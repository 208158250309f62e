"""`trainops kfp compile`, `trainops kfp build` and `trainops kfp run-local`: a pipeline file as a Kubeflow pipeline.

kfp is imported inside the command functions only: `trainops --help` and every other command stay free of it.

Function-local imports (CLI start): `trainops --help` imports every command module to build its parser; what a
command runs (the spec, the steps, the backends) loads when it runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from trainops.commands.backend_args import add_backend_arguments, backend_options
from trainops.commands.parsing import add_command, add_group
from trainops.components.cluster import (
    DEFAULT_WORK_MOUNT,
    PULL_POLICIES,
    SERVICE_ACCOUNT_WHERE,
    ClusterSettings,
    SecretEnv,
)
from trainops.errors import Problem, SpecError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the kfp commands to the command line."""
    commands = add_group(
        subparsers, "kfp", dest="kfp_command",
        help="compile a pipeline file for Kubeflow Pipelines, or run it locally with kfp.local",
        description="A pipeline file (prepare, stage, train, evaluate with its gate, register) as a Kubeflow "
                    "Pipelines v2 pipeline of trainops components. See docs/kubeflow.md.")

    compile_command = add_command(
        commands, "compile", compile_handler, help="compile a pipeline file to KFP IR YAML",
        description="Compile PIPELINE (a trainops pipeline file) into a KFP v2 pipeline (IR YAML) for a Kubeflow "
                    "cluster. Each component runs `python3 -m trainops.components.executor` in the image built "
                    "from the repository's Dockerfile. Values keep the file's relative paths and ${workdir}; the "
                    "components resolve them against the pipeline_dir parameter, relative to the image's WORKDIR, "
                    "which holds the build context's pipeline files: run it from the build context (the "
                    "repository root for examples/). A pipeline whose files would not be in the image is refused, "
                    "and so is one that would not run on a cluster as compiled (see the cluster options).",
        epilog="Exit codes: 0 compiled; 2 invalid input (the pipeline file, its job spec, a path the image "
               "would not hold, lightweight components that could not run it, a cluster option missing or "
               "naming nothing).")
    compile_command.add_argument("pipeline", metavar="PIPELINE", help="pipeline file (YAML or JSON)")
    compile_command.add_argument("-o", "--output", required=True, metavar="OUT.yaml", help="where to write the YAML")
    compile_command.add_argument("--image", default=None,
                                 help="component image: the one built from the repository's Dockerfile, pushed "
                                      "where the cluster pulls from (default: trainops:<version>, the Dockerfile's "
                                      "tag); its Python runs the installed components, nothing is installed")
    compile_command.add_argument("--package", action="append", default=None, metavar="REQUIREMENT",
                                 help="make lightweight components that pip-install REQUIREMENT when they start "
                                      "(repeatable; needs --image holding the pipeline's files, and a trainops "
                                      "requirement with the extras the components need); without it nothing is "
                                      "installed at run time")
    compile_command.add_argument("--pip-index-url", action="append", default=None, metavar="URL",
                                 help="package index for --package (repeatable)")
    compile_command.add_argument("--pipeline-dir", default=None, metavar="DIR",
                                 help="the pipeline file's directory in the image: relative to its WORKDIR "
                                      "(/opt/trainops) or absolute under it (default: the file's directory relative "
                                      "to the current directory, the image's build context); checked here")
    cluster = compile_command.add_argument_group(
        "the cluster", "what the compiled pipeline needs from the Kubernetes cluster that runs it (kfp-kubernetes)")
    cluster.add_argument("--work-pvc", default=None, metavar="NAME",
                         help="PersistentVolumeClaim mounted in every task as the work directory the steps share "
                              "(required when the backend runs its jobs in the train pod, or when steps "
                              "name ${workdir}); the workdir parameter then defaults to its mount path")
    cluster.add_argument("--work-mount", default=None, metavar="PATH",
                         help=f"where --work-pvc is mounted (default {DEFAULT_WORK_MOUNT}, the image's TRAINOPS_HOME)")
    cluster.add_argument("--secret-env", action="append", default=None, metavar="NAME=SECRET[:KEY]",
                         help="a masked environment value of the job spec (HF_TOKEN...) from a key of a Kubernetes "
                              "Secret, in the train pod (repeatable; every masked value needs one)")
    cluster.add_argument("--image-pull-policy", default=None, choices=PULL_POLICIES,
                         help="the components' image pull policy (default: the cluster's)")
    cluster.add_argument("--image-pull-secret", action="append", default=None, metavar="SECRET",
                         help="Secret with the registry's credentials (repeatable)")
    cluster.add_argument("--service-account", default=None, metavar="NAME",
                         help="refused: a compiled KFP v2 pipeline has no field for it; set service_account= when "
                              "creating the run (docs/kubeflow.md)")

    build = add_command(
        commands, "build", build_handler, help="build (and push) the component image from the repository's Dockerfile",
        description="Build the image `trainops kfp compile --image` names, with docker (or podman) from the build "
                    "context (default: the current directory, the repository root): "
                    "docker build -t TAG --build-arg PIPELINE_DIR=<the pipeline's directory> [--build-arg EXTRAS=...] "
                    "CONTEXT, then docker push TAG with --push. --dry-run prints the commands only.",
        epilog="Exit codes: 0 built (or printed); 1 the build or the push failed; 2 invalid input (no Dockerfile in "
               "the context, a pipeline outside it, --push of a tag naming no registry, no docker or podman to run).")
    build.add_argument("pipeline", metavar="PIPELINE", help="pipeline file whose directory the image holds")
    build.add_argument("--tag", default=None, help="image tag (default: trainops:<version>)")
    build.add_argument("--context", default=".", help="the build context, where the Dockerfile is (default: .)")
    build.add_argument("--extras", default=None, metavar="EXTRAS",
                       help="trainops extras installed in the image (default: the Dockerfile's: "
                            "aws,kfp,torch,examples)")
    build.add_argument("--push", action="store_true", help="push the tag after building it")
    build.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")

    run_local = add_command(
        commands, "run-local", run_local_handler,
        help="run the pipeline with kfp.local on this machine (the default backend, offline)",
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
    run_local.add_argument("-v", "--verbose", action="store_true",
                           help="print everything kfp.local prints (each task's executor input and outputs as JSON) "
                                "instead of each task's progress and the summary; without it, that goes to a log file "
                                "the command names")

    add_backend_arguments(run_local)


def check_output(output: str) -> None:
    """Refuse, before compiling, an output KFP could not write: `SpecError` naming --output with what to give."""
    import os
    from pathlib import Path

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


def cluster_settings(args: argparse.Namespace) -> ClusterSettings:
    """The cluster options as `ClusterSettings`; ``--service-account`` refused, saying where it goes instead."""
    if args.service_account is not None:
        raise SpecError(Problem("--service-account", SERVICE_ACCOUNT_WHERE))
    if args.work_mount and not args.work_pvc:
        raise SpecError(Problem("--work-mount", "mounts nothing without --work-pvc: name the claim to mount there"))

    return ClusterSettings(work_pvc=args.work_pvc, work_mount=args.work_mount or DEFAULT_WORK_MOUNT,
                           secret_env=tuple(SecretEnv.parse(text) for text in args.secret_env or ()),
                           image_pull_policy=args.image_pull_policy,
                           image_pull_secrets=tuple(args.image_pull_secret or ()))


def compile_handler(args: argparse.Namespace) -> int:
    from trainops.components.pipeline import compile_pipeline
    from trainops.components.settings import settings_for

    check_output(args.output)
    settings = settings_for(args.image, args.package, args.pip_index_url)
    cluster = cluster_settings(args)
    output = compile_pipeline(args.pipeline, args.output, settings=settings, pipeline_dir=args.pipeline_dir,
                              cluster=cluster)
    print(f"compiled {args.pipeline} -> {output} (image {settings.base_image}"
          + (f", installs {' '.join(settings.packages_to_install)} at start-up" if settings.packages_to_install
             else ", containerized: nothing installed at run time")
          + (f"; work directory: claim {cluster.work_pvc} at {cluster.work_mount}" if cluster.work_pvc else "")
          + "".join(f"; {entry.name} from secret {entry.secret}:{entry.key}" for entry in cluster.secret_env)
          + ")")
    return 0


def run_local_handler(args: argparse.Namespace) -> int:
    from trainops.components.local_run import run_local

    options = backend_options(args)

    def run() -> Any:
        return run_local(args.pipeline, workdir=args.workdir, gate=args.gate, run_key=args.run_key,
                         backend=args.backend, backend_options=options)

    if args.verbose:
        return 0 if run().succeeded else 1
    import shutil
    import tempfile
    from pathlib import Path

    from trainops.commands.kfp_console import summarized

    # The log is written beside the run's outputs once kfp.local has made their directory; until then, a temporary
    # file (kept, and named, when the run fails before it has one).
    with tempfile.NamedTemporaryFile("w", prefix="trainops-kfp-run-local-", suffix=".log", delete=False) as log:
        try:
            with summarized(log, sys.stdout):
                outcome = run()
        except BaseException:
            print(f"[kfp] kfp.local's whole output: {log.name}", flush=True)
            raise
    where = Path(log.name)
    if outcome.run_dir is not None:
        where = Path(shutil.move(log.name, outcome.run_dir / "run-local.log"))
    print(f"[kfp] kfp.local's whole output (each task's executor input and outputs): {where} (-v prints it here)")
    return 0 if outcome.succeeded else 1


def build_commands(pipeline: str, *, tag: str | None = None, context: str = ".", extras: str | None = None,
                   push: bool = False, engine: str = "docker") -> list[list[str]]:
    """The commands that build (and push) the component image for a pipeline file: its directory, relative to the
    build context, is the Dockerfile's PIPELINE_DIR (what the image copies below its WORKDIR, where `trainops kfp
    compile` expects it). `SpecError` (exit 2) for a context without a Dockerfile or a pipeline outside it."""
    from pathlib import Path

    from trainops.components.settings import DEFAULT_IMAGE

    root = Path(context).resolve()
    if not (root / "Dockerfile").is_file():
        raise SpecError(Problem("--context", f"{root} holds no Dockerfile: run from the repository root, or give "
                                             "--context the directory that holds trainops' Dockerfile"))
    directory = Path(pipeline).resolve().parent
    if root != directory and root not in directory.parents:
        raise SpecError(Problem("pipeline", f"{directory} is outside the build context {root}: the image copies "
                                            "only what lies below the context"))
    if not Path(pipeline).is_file():
        raise SpecError(Problem("pipeline", f"{pipeline} does not exist"))
    tag = tag or DEFAULT_IMAGE
    if push and "/" not in tag.split("@", 1)[0]:
        raise SpecError(Problem("--tag", f"{tag} names no registry, so --push would try Docker Hub's official "
                                         "library: tag the image where your cluster pulls from, e.g. --tag "
                                         f"registry.example.com/{tag}"))
    build = [engine, "build", "-t", tag, "--build-arg", f"PIPELINE_DIR={directory.relative_to(root).as_posix()}"]
    if extras:
        build += ["--build-arg", f"EXTRAS={extras}"]
    commands = [build + [str(root)]]
    if push:
        commands.append([engine, "push", tag])
    return commands


def build_handler(args: argparse.Namespace) -> int:
    import shlex
    import shutil
    import subprocess

    engine = shutil.which("docker") or shutil.which("podman")
    commands = build_commands(args.pipeline, tag=args.tag, context=args.context, extras=args.extras,
                              push=args.push, engine=engine.rsplit("/", 1)[-1] if engine else "docker")
    if args.dry_run:
        for command in commands:
            print(shlex.join(command))
        return 0
    if engine is None:
        raise SpecError(Problem("docker", "neither docker nor podman is on PATH: install one, or run on a machine "
                                          "that has it: " + " && ".join(shlex.join(command) for command in commands)))
    for command in commands:
        print(f"$ {shlex.join(command)}", flush=True)
        if subprocess.run([engine, *command[1:]], check=False).returncode != 0:
            return 1
    return 0
