"""`trainops run`, `status`, `logs` and `stop`: jobs (and pipelines) on the local backend or on SageMaker."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

PIPELINE_KEYS = {"steps", "workdir", "backend"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the job commands to the command line."""
    run = subparsers.add_parser(
        "run", help="run a job spec or a pipeline file (local backend by default)",
        description="Run a job spec (or a pipeline file: stage, train, evaluate, register) on the local backend "
                    "(several simulated hosts on this machine) or on SageMaker. Exit 0 when it completed, 1 when it "
                    "failed or was stopped, 2 on invalid input. Ctrl-C or SIGTERM stops every process of a local job.")
    run.add_argument("file", help="job spec or pipeline file (YAML or JSON)")
    run.add_argument("--backend", default=None, metavar="NAME",
                     help="where to run: local, sagemaker, or a backend an installed package registers (default: "
                          "local, or the pipeline file's backend)")
    run.add_argument("--job-name", default=None, help="job name (default: <name>-<timestamp>)")
    run.add_argument("--processes-per-host", type=int, default=None, metavar="N",
                     help="local backend: ranks per simulated host (default: the spec's, else GPUs, else 1)")
    run.add_argument("--channel", action="append", default=[], metavar="NAME=PATH",
                     help="local backend: read channel NAME from PATH (e.g. an FSx channel staged locally)")
    run.add_argument("--workdir", default=None, help="local backend: state directory (default: $TRAINOPS_HOME)")
    run.add_argument("--if-exists", choices=["reattach", "fail", "new"], default="reattach",
                     help="when a job of that name exists: follow it (default), fail, or create a suffixed copy")
    run.add_argument("--no-wait", action="store_true",
                     help="return once the job is created (local backend: it runs under a detached supervisor; "
                          "follow it with trainops logs NAME --follow, end it with trainops stop NAME)")
    run.add_argument("--launcher", choices=["trainops", "toolkit"], default=None,
                     help="who launches the ranks in the container: the trainops runtime, or the image's own "
                          "SageMaker toolkit (default: the spec's launcher)")
    run.add_argument("--image-python", default=None, metavar="PATH",
                     help="local backend: the interpreter standing for the training image (a venv without trainops; "
                          "with --launcher toolkit it needs sagemaker-training and sagemaker-pytorch-training)")
    run.add_argument("--region", default=None, help="sagemaker backend: AWS region when the spec has none")
    run.add_argument("--retries", default=None, metavar="CLASS=N,...",
                     help="retry budgets per failure class, e.g. infrastructure=3,user=0,backoff_seconds=30 "
                          "(default: one attempt); an infrastructure failure starts <name>-2 from the checkpoint")
    run.add_argument("--force", action="store_true", help="pipelines: re-run steps whose inputs did not change")
    run.set_defaults(handler=run_command)

    for name, text in (("status", "show a job's status"), ("logs", "print a job's logs, every host"),
                       ("stop", "stop a running job")):
        command = subparsers.add_parser(name, help=text, description=f"{text[0].upper()}{text[1:]} (a local job "
                                        "when one has that name, else a SageMaker training job).")
        command.add_argument("job_name", help="the job's name")
        command.add_argument("--backend", default=None, metavar="NAME",
                             help="where the job runs (default: local if a local job has that name)")
        command.add_argument("--workdir", default=None, help="local backend: state directory")
        command.add_argument("--region", default=None, help="sagemaker backend: AWS region")
        if name == "status":
            command.add_argument("--json", action="store_true", help="print the status as JSON")
        if name == "logs":
            command.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
        command.set_defaults(handler={"status": status_command, "logs": logs_command, "stop": stop_command}[name])


def _channel_overrides(items: list[str]) -> dict[str, str]:
    from trainops.errors import Problem, SpecError

    overrides = {}
    for item in items:
        name, separator, path = item.partition("=")
        if not separator or not name or not path:
            raise SpecError(Problem("--channel", f"{item!r}: expected NAME=PATH"))
        overrides[name] = path
    return overrides


def run_command(args: argparse.Namespace) -> int:
    from trainops.spec.loader import read_document

    document = read_document(args.file)
    # A pipeline file has steps (and maybe a backend or workdir); a job spec has none of these keys.
    if isinstance(document, dict) and PIPELINE_KEYS.intersection(document):
        from trainops.steps.pipeline import run_pipeline_file

        return run_pipeline_file(args.file, backend=args.backend, force=args.force, workdir=args.workdir)
    return _run_job(args)


def _image_python(path: str | None) -> str | None:
    """An absolute path to an executable interpreter, else SpecError naming --image-python."""
    if path is None:
        return None
    import os
    import shutil

    from trainops.errors import Problem, SpecError

    found = shutil.which(path) if os.sep not in path else (path if os.access(path, os.X_OK) else None)
    if not found or not os.path.isfile(found):
        raise SpecError(Problem("--image-python", f"{path!r} is not an executable Python interpreter: give the "
                                                  "python of the venv standing for the image (e.g. "
                                                  "$(python tests/support/image_venv.py))"))
    return os.path.abspath(found)


def _run_job(args: argparse.Namespace) -> int:
    from trainops.errors import JobFailed
    from trainops.steps.train import train

    if args.processes_per_host is not None and args.processes_per_host < 1:
        from trainops.errors import SpecError

        raise SpecError("--processes-per-host must be at least 1")
    held: list = []  # (backend, handle) of the job once it is placed
    if args.retries is not None:
        from trainops.backends.failures import RetryBudgets
        from trainops.errors import Problem, SpecError

        try:
            RetryBudgets.parse(args.retries, "--retries")
        except ValueError as error:
            raise SpecError(Problem("--retries", str(error).split(": ", 1)[-1])) from None

    def stop(signum, _frame):
        # Ctrl-C and SIGTERM stop the job the same way on every backend; a second one leaves at once.
        if not held or getattr(stop, "asked", False):
            raise KeyboardInterrupt
        stop.asked = True  # type: ignore[attr-defined]
        for backend, handle in held:
            print(f"[trainops] {backend.stop(handle, f'Stopped: trainops received {signal.Signals(signum).name}')}",
                  file=sys.stderr, flush=True)

    # Each backend takes the options that concern it (local: work directory, channels, ranks per host, the image
    # stand-in; SageMaker: region) and ignores the others.
    options = dict(job_name=args.job_name, if_exists=args.if_exists, wait=not args.no_wait, workdir=args.workdir,
                   processes_per_host=args.processes_per_host, channel_overrides=_channel_overrides(args.channel),
                   launcher=args.launcher, image_python=_image_python(args.image_python), region=args.region,
                   on_handle=lambda backend, handle: held.append((backend, handle)), retries=args.retries)
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = train(args.file, backend=args.backend or "local", **options)
        code = 0
    except JobFailed as error:
        failed: dict[str, Any] | None = getattr(error, "result", None)
        if failed is None:
            raise
        result, code = failed, 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _print_outcome(result)
    return code


def _print_outcome(result: dict) -> None:
    lines = [f"job:        {result['job_name']} ({result['backend']})",
             f"status:     {result['status']}" + (f" ({result['secondary_status']})"
                                                   if result.get("secondary_status") not in (None, "", result["status"])
                                                   else "")]
    if result.get("duration_seconds") is not None:
        lines.append(f"duration:   {result['duration_seconds']:.1f} s")
    for key, label in (("model_artifact", "model"), ("output_artifact", "output"), ("job_dir", "job dir"),
                       ("checkpoint_dir", "checkpoints"), ("billable_seconds", "billable s")):
        if result.get(key) not in (None, ""):
            lines.append(f"{label + ':':<11} {result[key]}")
    from trainops.steps.attempts import cost_line

    if result.get("attempts"):
        lines.append(f"{'cost:':<11} {cost_line(result.get('cost'))}")
        for attempt in result["attempts"] if len(result["attempts"]) > 1 else []:
            lines.append(f"{'attempt:':<11} {attempt['job_name']} {attempt['status']}"
                         + (f" ({attempt['evidence']})" if attempt.get("evidence") else ""))
    if result.get("failure_class"):
        lines.append(f"{'why:':<11} {(result.get('failure_evidence') or {}).get('failure_class')} failure: "
                     f"{(result.get('failure_evidence') or {}).get('why')} "
                     f"({(result.get('failure_evidence') or {}).get('evidence')})")
    if result.get("failure_reason"):
        stream = sys.stderr
        print("\n".join(lines), flush=True)
        print(f"failure:    {result['failure_reason']}", file=stream, flush=True)
    else:
        print("\n".join(lines), flush=True)


def _airflow_workdir() -> str | None:
    """Where an Airflow deployment keeps the local jobs its tasks start (``$AIRFLOW_HOME/trainops``), when this
    environment is one (AIRFLOW_HOME set and the directory there)."""
    import os

    home = os.environ.get("AIRFLOW_HOME")
    return os.path.join(home, "trainops") if home and os.path.isdir(os.path.join(home, "trainops")) else None


def _backend_of(args: argparse.Namespace) -> str:
    if args.backend:
        from trainops.backends import backend_class

        if args.workdir is None and "workdir" in backend_class(args.backend).CONTEXT:
            _find_on_this_machine(args, args.backend)
        return args.backend
    # A local job of that name wins (in the state root, else in the Airflow deployment's, whose tasks start jobs
    # there: `trainops logs NAME` on a worker finds them without --workdir); any other name is SageMaker's.
    if _find_on_this_machine(args, "local"):
        return "local"
    import importlib.util

    try:
        installed = importlib.util.find_spec("boto3") is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a module entry of None
        installed = False
    if not installed:  # `make run` installs no AWS client: most likely a mistyped local name
        from trainops.backends.api import get_backend
        from trainops.errors import Problem, SpecError

        where = get_backend("local", workdir=args.workdir).where()
        raise SpecError(Problem("job_name", f"no local job {args.job_name!r} (in {where}); for a SageMaker job "
                                            "install boto3: pip install 'trainops[aws]'"))
    return "sagemaker"


def _find_on_this_machine(args: argparse.Namespace, backend: str) -> bool:
    """Whether ``backend`` (one whose jobs live in a work directory) has a job of that name; sets ``args.workdir``
    to the Airflow deployment's when the job is there."""
    from trainops.backends.api import get_backend
    from trainops.errors import SpecError

    if get_backend(backend, workdir=args.workdir).status_of(args.job_name) is not None:
        return True
    airflow = _airflow_workdir() if args.workdir is None else None
    if airflow is None:
        return False
    try:
        found = get_backend(backend, workdir=airflow).status_of(args.job_name) is not None
    except SpecError:  # not a state root this user may read: the default root's answer stands
        return False
    if found:
        args.workdir = airflow
    return found


def _sagemaker_factory(args: argparse.Namespace):
    import boto3

    from trainops.aws.clients import default_client_factory

    if not boto3.session.Session(region_name=args.region).region_name:
        # Without a region boto3 cannot even name the endpoint; when the backend was guessed, the user most
        # likely meant a local job: say both.
        from trainops.backends.api import get_backend
        from trainops.errors import Problem, SpecError

        how = "set a region (--region, AWS_REGION or the AWS profile's region)"
        if args.backend is None:
            where = get_backend("local", workdir=args.workdir).where()
            raise SpecError(Problem("job_name", f"no local job {args.job_name!r} (in {where}); "
                                                f"for a SageMaker job {how}"))
        raise SpecError(Problem("--region", f"a SageMaker job needs a region: {how}"))
    return default_client_factory(args.region)


def _job(args: argparse.Namespace):
    """(backend, handle) of the job a status / logs / stop command names; the name is checked first."""
    from trainops.backends.api import JobHandle, get_backend
    from trainops.spec.names import check_job_name

    check_job_name(args.job_name)
    name = _backend_of(args)
    factory = None

    def clients(service: str):  # built on first use: a local job needs no AWS region
        nonlocal factory
        if factory is None:
            factory = _sagemaker_factory(args)
        return factory(service)

    backend = get_backend(name, workdir=args.workdir, region=args.region, client_factory=clients)
    return backend, JobHandle(name, args.job_name, workdir=args.workdir, region=args.region, created=False)


def status_command(args: argparse.Namespace) -> int:
    from trainops.steps.attempts import attempts_report, cost_line

    backend, handle = _job(args)
    record = backend.status_record(handle)
    report = attempts_report(backend, handle.job_name, record)
    record.update(report)
    record["cost"] = cost_line(report["cost"]) if not args.json else report["cost"]
    if args.json:
        json.dump(record, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        for key, value in record.items():
            if value not in (None, "", [], {}):
                print(f"{key}: {value}")
    return 0


def logs_command(args: argparse.Namespace) -> int:
    backend, handle = _job(args)
    for line in backend.logs(handle, follow=args.follow):
        print(line, flush=True)
    return 0


def stop_command(args: argparse.Namespace) -> int:
    backend, handle = _job(args)
    print(backend.stop(handle))
    return 0
