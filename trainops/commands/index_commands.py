"""`trainops jobs` (the jobs trainops started for you, from the per-user job index) and `trainops report NAME` (a
job's or a pipeline run's HTML page: its path printed, opened or served on 127.0.0.1).

Function-local imports (CLI start): `trainops --help` imports every command module to build its parser; what a
command runs (the spec, the steps, the backends) loads when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainops.commands.backend_args import add_backend_arguments
from trainops.commands.job_commands import _place_not_given, _warn, find_job
from trainops.commands.parsing import add_command
from trainops.errors import Problem, SpecError

#: The page's headers when served: the same sandbox as Airflow's report page (`trainops.operators.reports`).
SERVE_HEADERS = {"Content-Security-Policy": "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'",
                 "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `jobs` and `report` to the command line."""
    jobs = add_command(
        subparsers, "jobs", jobs_command, help="list the jobs trainops started for you, on any backend",
        description="List the training jobs trainops started for you (the per-user job index: a file per job under "
                    "$TRAINOPS_JOB_INDEX, else index/ in trainops' state directory), newest first, with where each "
                    "lives and its status now. `trainops status/logs/stop/report NAME` find them by name alone.")
    jobs.add_argument("--backend", default=None, metavar="NAME", help="only the jobs of this backend")
    jobs.add_argument("--status", default=None, metavar="STATUS",
                      help="only the jobs in this status (Completed, Failed, Stopped, InProgress, ..., any case)")
    jobs.add_argument("--limit", type=int, default=20, metavar="N", help="at most N jobs (default 20; 0: all)")
    jobs.add_argument("--json", action="store_true", help="print the jobs as JSON")

    report = add_command(
        subparsers, "report", report_command, help="write a job's or a pipeline run's HTML report and print its path",
        description="Write the HTML report of a training job (its status, attempts and cost) or of a pipeline run "
                    "(its steps, the training job, the evaluation's metrics, gate, plots and report), and print "
                    "its path. NAME is a job's name (found like `trainops status NAME`) or a pipeline's.")
    report.add_argument("name", help="a job's or a pipeline's name")
    add_backend_arguments(report, shorthands=("workdir", "region"))
    report.add_argument("--open", action="store_true", help="open the report in a web browser")
    report.add_argument("--serve", action="store_true",
                        help="serve the report on http://127.0.0.1:PORT/ until interrupted (for a browser on "
                             "another machine: forward the port over ssh)")
    report.add_argument("--port", type=int, default=0, help="the port --serve listens on (default: a free one)")


# --- trainops jobs ------------------------------------------------------------------------------------------------
class Looks:
    """Each job's status now, one backend opened per place; a place that cannot be looked at says why once and its
    jobs read ``unknown`` (a SageMaker region without credentials does not hold up the list)."""

    def __init__(self) -> None:
        self.opened: dict[str, Any] = {}
        self.failed: set[str] = set()

    def status(self, entry: Any) -> str:
        from trainops.backends.api import get_backend

        key = json.dumps([entry.backend, entry.location], sort_keys=True)
        if key in self.failed:
            return "unknown"
        try:
            if key not in self.opened:
                self.opened[key] = get_backend(entry.backend, options=entry.location, source="the job index")
            status = self.opened[key].status_of(entry.name)
            return status.value if status is not None else "gone"
        except Exception as error:  # noqa: BLE001 - one place that cannot be looked at is a note, not the end
            self.failed.add(key)
            print(f"trainops: warning: the {entry.backend} backend ({entry.place}) could not be looked at: "
                  f"{type(error).__name__}: {error}", file=sys.stderr)
            return "unknown"


def jobs_command(args: argparse.Namespace) -> int:
    from trainops.job_index import entries
    from trainops.steps.human import moment

    if args.limit < 0:
        raise SpecError(Problem("--limit", f"{args.limit} is negative: give 0 (all) or more"))
    looks = Looks()
    rows: list[tuple[Any, str]] = []
    for entry in entries(warn=_warn):  # newest first; looked at only until the list is full
        if args.backend not in (None, entry.backend, entry.named_as):
            continue
        status = looks.status(entry)
        if args.status is None or status.lower() == args.status.lower():
            rows.append((entry, status))
        if args.limit and len(rows) >= args.limit:
            break
    if args.json:
        json.dump([{**entry.to_dict(), "status": status} for entry, status in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not rows:
        print("no jobs" + (" match" if args.backend or args.status else " yet: `trainops run` remembers each job it "
                                                                            "starts"))
        return 0
    table = [("NAME", "BACKEND", "STATUS", "STARTED", "WHERE")]
    table += [(entry.name, entry.named_as or entry.backend, status, moment(entry.started),
               entry.place + (f" (pipeline {entry.pipeline['name']})" if entry.pipeline else ""))
              for entry, status in rows]
    widths = [max(len(row[column]) for row in table) for column in range(4)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4])
    return 0


# --- trainops report ------------------------------------------------------------------------------------------
def _report_path(args: argparse.Namespace) -> str:
    from trainops.commands.report_files import job_report, pipeline_report
    from trainops.job_index import entries
    from trainops.spec.names import valid_job_name

    if not valid_job_name(args.name):
        raise SpecError(Problem("name", f"{args.name!r} is not a job's or a pipeline's name"))
    if _place_not_given(args):
        for pipeline in entries("pipeline", name=args.name, warn=_warn):
            return pipeline_report((pipeline.pipeline or {}).get("record") or pipeline.where)
        for entry in entries(name=args.name, warn=_warn):
            if entry.pipeline and Path(entry.pipeline.get("record", "")).is_file():
                return pipeline_report(entry.pipeline["record"])  # a pipeline's job: the run's page
    args.job_name = args.name
    backend, handle = find_job(args)
    return job_report(backend, handle)


def report_command(args: argparse.Namespace) -> int:
    path = _report_path(args)
    print(path, flush=True)
    if args.serve:
        return serve(path, args.port, open_browser=args.open)
    if args.open:
        import webbrowser

        webbrowser.open(Path(path).resolve().as_uri())
    return 0


def serve(path: str, port: int, *, open_browser: bool = False) -> int:
    """Serve the page at ``/`` on 127.0.0.1 (only this machine: forward the port to look from another) under the
    report's sandbox, until interrupted."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    page = Path(path).read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            if self.path.split("?", 1)[0] not in ("/", "/report.html"):
                self.send_error(404, "only the report is served here: /")
                return
            self.send_response(200)
            for name, value in {"Content-Type": "text/html; charset=utf-8", **SERVE_HEADERS}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the standard library's signature
            pass  # the command's output is the URL; requests are not news

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"serving the report at {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
