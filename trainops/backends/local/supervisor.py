"""The supervisor of a detached local job: `python -m trainops.backends.local.supervisor`, started by
`trainops.backends.local.detached.submit_detached`.

It reads its request (the spec with its secrets, the job name, the local options) from stdin, so nothing secret is
written to disk or shown in `ps`, then forks: the first process prints the pid of the second and exits at once, so
the supervisor is nobody's child (the caller may be an Airflow worker that goes away) and runs in a session of its
own, away from the caller's terminal and process group. The second process is the job's controller: it runs the
`LocalJob` in its main thread, a controller like any other: everything that protects a foreground job protects it
too (the controller lock, each host's launcher holding the locks and ending its host with the controller).

Handshake on stdout, one line each: `pid N` (from the first process), then `started` once the job's status record
names this job, or `busy <text>` when another controller already runs a job of that name, or `error <text>`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
import traceback

from trainops.backends.local import status
from trainops.backends.local.job import LocalJob
from trainops.backends.local.job_input import from_spec
from trainops.errors import JobFailed
from trainops.spec.loader import parse_job_spec

logger = logging.getLogger("trainops.backends.local.supervisor")  # run as __main__


def _say(line: str) -> None:
    try:
        os.write(1, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass  # the caller stopped listening: the job goes on


def _close_handshake() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def _host_line(_line: str) -> None:
    """The hosts' lines are already in <job dir>/logs (trainops logs shows them): the supervisor's log keeps only
    the controller's own messages (`_log_to_stderr`)."""


def _log_to_stderr() -> None:
    """trainops' own messages (the ``trainops`` loggers) into the supervisor's log, its stderr, time-stamped."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger("trainops")
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def _announce_when_recorded(job, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            record = status.read_record(job.job_dir, job.job_name)
        except Exception:  # noqa: BLE001 - not written yet, or half-way through being replaced
            record = {}
        if record.get("job_id") == job.job_id or (record and job.started_by_another()):  # this job, or the one
            # another caller started under this name a moment ago (which this supervisor follows, `LocalJob.run`)
            _say("started")
            _close_handshake()
            return
        time.sleep(0.02)


def run_supervised(request: dict) -> int:
    """Run the requested job in this process (the second one after the fork); returns the exit code."""
    spec = parse_job_spec(request["spec"], "detached job spec")
    options = dict(request.get("options", {}))
    job = LocalJob(from_spec(spec, options.pop("launcher", None)), request["job_name"], workdir=request.get("workdir"),
                   log=_host_line, placed_new=True, **options)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, _frame: job.request_stop(
            f"Stopped: the supervisor received {signal.Signals(number).name}"))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    done = threading.Event()
    announcer = threading.Thread(target=_announce_when_recorded, args=(job, done), daemon=True)
    announcer.start()
    try:
        result = job.run()
    except JobFailed as error:
        done.set()
        _say(f"busy {error}")
        return 3
    except BaseException as error:  # noqa: BLE001 - told to the caller, and the traceback kept in the log
        done.set()
        traceback.print_exc()
        _say(f"error {type(error).__name__}: {error}")
        return 1
    done.set()
    announcer.join(timeout=1)
    _say("started")  # a job refused before it ran still recorded itself: the caller reads that record
    logger.info("[trainops] job %s ended %s", job.job_name, result.status)
    return 0 if result.succeeded else 1


def main() -> int:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    pid = os.fork()
    if pid:
        _say(f"pid {pid}")
        os._exit(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _log_to_stderr()
    try:
        code = run_supervised(request)
    finally:
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
