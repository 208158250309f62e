"""`trainops run`, `status`, `logs` and `stop`: jobs (and pipelines) on the local backend or on SageMaker.

Function-local imports (CLI start): `trainops --help` imports this module to build its parser; the spec, the
steps and the chosen backend load only when run, status, logs or stop runs.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from trainops.commands.backend_args import add_backend_arguments, backend_options, open_backend
from trainops.commands.parsing import add_command
from trainops.errors import JobFailed, Problem, SpecError

PIPELINE_KEYS = {"steps", "workdir", "backend"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the job commands to the command line."""
    run = add_command(
        subparsers, "run", run_command,
        help="run a job spec or a pipeline file (the default backend unless --backend says)",
        description="Run a job spec (or a pipeline file: stage, train, evaluate, register) on a backend: the local "
                    "one (several simulated hosts on this machine) by default, or the one --backend names. Exit 0 "
                    "when it completed, 1 when it failed or was stopped, 2 on invalid input. Ctrl-C or SIGTERM stops "
                    "the job.")
    run.add_argument("file", help="job spec or pipeline file (YAML or JSON)")
    add_backend_arguments(run)
    run.add_argument("--job-name", default=None, help="job name (default: <name>-<timestamp>)")
    run.add_argument("--processes-per-host", type=int, default=None, metavar="N",
                     help="shorthand for -o processes_per_host=N: ranks per simulated host (default: the spec's, "
                          "else GPUs, else 1)")
    run.add_argument("--channel", action="append", default=[], metavar="NAME=PATH",
                     help="shorthand for -o channel_overrides=NAME=PATH: read channel NAME from PATH (e.g. an FSx "
                          "channel staged locally)")
    run.add_argument("--workdir", default=None,
                     help="shorthand for -o workdir=DIR: the state directory (default: $TRAINOPS_HOME); for a "
                          "pipeline file, its workdir")
    run.add_argument("--if-exists", choices=["reattach", "fail", "new"], default="reattach",
                     help="when a job of that name exists: follow it (default), fail, or create a suffixed copy")
    run.add_argument("--no-wait", action="store_true",
                     help="return once the job is created (a job of this machine runs under a detached "
                          "supervisor; follow it with trainops logs NAME --follow, end it with trainops stop NAME)")
    run.add_argument("--launcher", choices=["trainops", "toolkit"], default=None,
                     help="shorthand for -o launcher=...: who launches the ranks in the container, the trainops "
                          "runtime or the image's own SageMaker toolkit (default: the spec's launcher)")
    run.add_argument("--image-python", default=None, metavar="PATH",
                     help="shorthand for -o image_python=PATH: the interpreter standing for the training image (a "
                          "venv without trainops; with --launcher toolkit it needs sagemaker-training and "
                          "sagemaker-pytorch-training)")
    run.add_argument("--region", default=None, help="shorthand for -o region=...: the AWS region when the spec "
                                                    "has none")
    run.add_argument("--retries", default=None, metavar="CLASS=N,...",
                     help="retry budgets per failure class, e.g. infrastructure=3,user=0,backoff_seconds=30 "
                          "(default: one attempt); an infrastructure failure starts <name>-2 from the checkpoint")
    run.add_argument("--resume-from", default=None, metavar="JOB",
                     help="shorthand for -o checkpoint_key=JOB: start from the checkpoints of the earlier job JOB "
                          "(a new job name otherwise starts afresh; a re-run of the same name resumes its own)")
    run.add_argument("--force", action="store_true", help="pipelines: re-run steps whose inputs did not change")

    for name, text in (("status", "show a job's status"), ("logs", "print a job's logs, every host"),
                       ("stop", "stop a running job")):
        handler = {"status": status_command, "logs": logs_command, "stop": stop_command}[name]
        command = add_command(subparsers, name, handler, help=text,
                              description=f"{text[0].upper()}{text[1:]}. With no -o, --workdir or --region, the job "
                                          "is found by its name where trainops started it (the per-user job index "
                                          "`trainops jobs` lists; of the --backend named, if one is); else on the "
                                          "backend --backend names (default: the default backend), -o giving the "
                                          "settings that reach it.")
        command.add_argument("job_name", help="the job's name")
        add_backend_arguments(command, shorthands=("workdir", "region"))
        if name == "status":
            command.add_argument("--json", action="store_true", help="print the status as JSON")
        if name == "logs":
            command.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")


def _channel_overrides(items: list[str]) -> dict[str, str] | None:
    overrides = {}
    for item in items:
        name, separator, path = item.partition("=")
        if not separator or not name or not path:
            raise SpecError(Problem("--channel", f"{item!r}: expected NAME=PATH"))
        overrides[name] = path
    return overrides or None


def run_command(args: argparse.Namespace) -> int:
    from trainops.spec.loader import read_document

    document = read_document(args.file)
    # A pipeline file has steps (and maybe a backend or workdir); a job spec has none of these keys.
    if isinstance(document, dict) and PIPELINE_KEYS.intersection(document):
        from trainops.steps.pipeline import run_pipeline_file

        # --workdir is the pipeline's own (its state, its ${workdir}); -o and the other shorthands reach its backend.
        options = backend_options(args, **_job_shorthands(args))
        return run_pipeline_file(args.file, backend=args.backend, force=args.force, workdir=args.workdir,
                                 backend_options=options)
    return _run_job(args)


def _job_shorthands(args: argparse.Namespace) -> dict[str, Any]:
    """The run command's flags that stand for backend settings (None: not given)."""
    return {"processes_per_host": args.processes_per_host, "channel_overrides": _channel_overrides(args.channel),
            "launcher": args.launcher, "image_python": args.image_python, "region": args.region,
            "checkpoint_key": getattr(args, "resume_from", None)}


def _run_job(args: argparse.Namespace) -> int:
    from trainops.backends.looks import JobOutOfSight
    from trainops.steps.train import train

    held: list = []  # (backend, handle) of the job once it is placed
    if args.retries is not None:
        from trainops.backends.failures import RetryBudgets

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

    # One mapping of the backend's settings (-o and the shorthand flags); the backend takes what it knows and
    # refuses the rest, naming it, before anything is created.
    backend = open_backend(args, backend_options(args, workdir=args.workdir, **_job_shorthands(args)))
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = train(args.file, backend=backend, job_name=args.job_name, if_exists=args.if_exists,
                       wait=not args.no_wait, on_handle=lambda chosen, handle: held.append((chosen, handle)),
                       retries=args.retries)
        code = 0
    except JobOutOfSight as error:  # its looks kept failing: the job may run on; say how to follow it again
        raise error.reattach_with(_reattach_hint(args, held)) from error
    except JobFailed as error:
        failed: dict[str, Any] | None = getattr(error, "result", None)
        if failed is None:
            raise
        result, code = failed, 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _print_outcome(result)
    _print_report(held, result)
    return code


def _print_report(held: list, result: dict) -> None:
    """The run's last line: the job's HTML page (`trainops report NAME` writes it again, current)."""
    if not held:
        return
    from trainops.commands.report_files import job_report

    backend, handle = held[-1]
    try:
        path = job_report(backend, backend.handle(result.get("job_name") or handle.job_name), dict(result))
    except (OSError, ValueError) as error:  # the job ran; a page that cannot be written is a note
        print(f"trainops: warning: the job's report could not be written: {error}", file=sys.stderr)
        return
    print(f"{'report:':<11} {path}  (trainops report {result.get('job_name') or handle.job_name})", flush=True)


def _reattach_hint(args: argparse.Namespace, held: list) -> str:
    """The command that follows a job this run lost sight of (the same name re-attaches; nothing is created)."""
    name = held[0][1].job_name if held else args.job_name
    where = "".join(f" {flag} {value}" for flag, value in (("--backend", args.backend), ("--workdir", args.workdir),
                                                            ("--region", args.region)) if value)
    where += "".join(f" -o {item}" for item in getattr(args, "backend_option", None) or [])
    if not name:
        return "Re-attach by running this command again with --job-name set to the job's name."
    return (f"Re-attach with `trainops run {args.file}{where} --job-name {name}` (the same name follows the job; "
            f"nothing new is created), or see where it stands with `trainops status {name}{where}`.")


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
    """Where an Airflow deployment keeps the jobs of this machine its tasks start (``$AIRFLOW_HOME/trainops``), when
    this environment is one (AIRFLOW_HOME set and the directory there)."""
    import os

    home = os.environ.get("AIRFLOW_HOME")
    return os.path.join(home, "trainops") if home and os.path.isdir(os.path.join(home, "trainops")) else None


def _place_not_given(args: argparse.Namespace) -> bool:
    """Whether the command names no place of a backend (no -o, --workdir or --region; a --backend alone names
    none: the job index says where that backend's job is)."""
    return not (getattr(args, "backend_option", None) or getattr(args, "workdir", None)
                or getattr(args, "region", None))


def _warn(text: str) -> None:
    print(f"trainops: warning: {text}", file=sys.stderr)


def indexed_job(args: argparse.Namespace, *, only_one: bool = False) -> tuple[Any, Any, str]:
    """(backend, handle, note) of the job the per-user index (`trainops.job_index`) remembers under
    ``args.job_name``: the newest entry whose backend still has it. (None, None, note) when none does; the note says
    what the index held. ``only_one``: several places have a job of that name now (a stop must not guess):
    `SpecError` listing them."""
    from trainops.backends.api import get_backend
    from trainops.job_index import entries
    from trainops.steps.human import moment

    wanted = getattr(args, "backend", None)
    found = [entry for entry in entries(name=args.job_name, warn=_warn)
             if wanted in (None, entry.backend, entry.named_as)]
    if not found:
        return None, None, ""
    missing: list[str] = []
    live: list[tuple[Any, Any]] = []  # (entry, backend) whose backend has the job now, newest first
    for entry in found:
        try:
            backend = get_backend(entry.backend, options=entry.location, source="the job index")
            if backend.status_of(args.job_name) is not None:
                live.append((entry, backend))
                if not only_one:
                    break  # the newest will do for a look; a stop must know every place first
                continue
        except SpecError as error:
            missing.append(f"the {entry.backend} backend ({entry.place}): {error}")
            continue
        missing.append(f"the {entry.backend} backend ({entry.place}) has no such job now")
    if not live:
        return None, None, "; the job index remembers it on " + "; ".join(missing)
    if len(live) > 1:
        listed = "; ".join(f"the {entry.backend} backend ({entry.place}), started {moment(entry.started)}"
                           for entry, _ in live)
        raise SpecError(Problem("job_name", f"{len(live)} jobs are called {args.job_name!r}: {listed}; choose one "
                                            "with --backend NAME and -o KEY=VALUE for where it lives"))
    entry, backend = live[0]
    if len(found) > 1:
        print(f"trainops: note: {args.job_name} is on the {entry.backend} backend ({entry.place}), the newest of "
              f"{len(found)} places the job index holds it; --backend and -o choose another", file=sys.stderr)
    return backend, backend.handle(args.job_name), ""


def find_job(args: argparse.Namespace, *, only_one: bool = False):
    """(backend, handle) of the job a status / logs / stop / report command names. With no place given (--backend
    alone names none), the per-user job index says where the job lives (the backend and its place when it was
    started: a pipeline's work directory, a SageMaker region), among the jobs of the --backend named if any;
    otherwise (or when the index knows no such job) the backend named, the default when none. A name with no job
    there is a `SpecError` saying where it looked and how to choose another backend. A backend whose jobs live in a
    work directory, given none, looks in the Airflow deployment's too (its tasks start jobs there: `trainops logs
    NAME` on a worker finds them)."""
    from trainops.backends import choices
    from trainops.spec.names import check_job_name

    check_job_name(args.job_name)
    note = ""
    if _place_not_given(args):
        backend, handle, note = indexed_job(args, only_one=only_one)
        if backend is not None:
            return backend, handle
    options = backend_options(args, workdir=args.workdir, region=args.region)
    backend = open_backend(args, options)
    if backend.status_of(args.job_name) is None:
        elsewhere = _airflow_workdir() if "workdir" in backend.CONTEXT and "workdir" not in options else None
        found = None
        if elsewhere is not None:
            try:
                found = open_backend(args, {**options, "workdir": elsewhere})
                found = found if found.status_of(args.job_name) is not None else None
            except SpecError:  # not a state root this user may read: the default root's answer stands
                found = None
        if found is None:
            looked = backend.where() + (f" and {elsewhere}" if elsewhere else "")
            named = args.backend or backend.name
            others = ", ".join(name for name in choices() if name != named)
            raise SpecError(Problem("job_name", f"no job {args.job_name!r} on the {named} backend (looked in "
                                                f"{looked}); a job of another backend: --backend NAME ({others}) "
                                                "with -o KEY=VALUE for where it lives; `trainops jobs` lists the "
                                                f"jobs trainops started for you{note}"))
        backend = found
    return backend, backend.handle(args.job_name)


def status_command(args: argparse.Namespace) -> int:
    from trainops.steps.attempts import attempts_report, cost_line

    backend, handle = find_job(args)
    record = backend.status_record(handle)
    report = attempts_report(backend, handle.job_name, record)
    record.update(report)
    record["cost"] = cost_line(report["cost"]) if not args.json else report["cost"]
    if args.json:
        json.dump(record, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        from trainops.steps.human import lines

        # A person's view: times as dates, lists as lists; the whole spec and the raw history are in --json.
        print("\n".join(lines({key: value for key, value in record.items() if key not in HUMAN_SKIPS})))
    return 0


#: What plain `status` leaves to --json: the whole spec and SageMaker's raw status history (the attempts, the
#: failure class and its evidence say what they mean).
HUMAN_SKIPS = frozenset({"spec", "secondary_status_history"})


def logs_command(args: argparse.Namespace) -> int:
    backend, handle = find_job(args)
    for line in backend.logs(handle, follow=args.follow):
        print(line, flush=True)
    return 0


def stop_command(args: argparse.Namespace) -> int:
    backend, handle = find_job(args, only_one=True)
    print(backend.stop(handle))
    return 0
