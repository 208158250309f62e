"""The rank wrapper: ``python -m trainops.runtime.rank SCRIPT [ARGS...]`` runs one rank's training script in this
same process (``runpy``, as ``python SCRIPT ARGS`` would) and records how it ended.

Every launch mode starts its ranks through it (torchrun with ``-m trainops.runtime.rank``, mpirun, the plain process).
It adds nothing to a training step: it writes one small record when the rank starts and one when it ends, and relays
the rank's stderr through a pipe to keep a bounded tail on disk (and, when ``TRAINOPS_LOG_PREFIX`` is set, prefixes
each line of stdout and stderr with the host and rank). See :mod:`trainops.runtime.records` for the files.

Under mpirun it also works out which host the rank belongs to (``OMPI_COMM_WORLD_RANK`` // processes per host), sets
``SM_CURRENT_HOST``, ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE``, and in a local simulation
applies that host's environment (docs/contracts.md, section 3). In local and Slurm runs it installs the stand-ins for
AWS's SMDDP and SMP libraries (:mod:`trainops.runtime.shims`).

Standard library only; imports are kept few because every rank pays for them.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import faulthandler
import json
import os
import runpy
import signal
import sys
import time
import traceback

from trainops.runtime import processes, records
from trainops.runtime.output_relay import OutputRelay, mask
from trainops.runtime.untrusted import read_json, unreadable

USAGE = "usage: python -m trainops.runtime.rank SCRIPT [ARGS...]"


def _identity(environ: dict[str, str]) -> dict[str, object]:
    """This rank's place in the job, from torchrun's, Open MPI's or the plain launch's variables."""
    hosts = json.loads(environ.get("SM_HOSTS") or "[]")
    host = environ.get("SM_CURRENT_HOST", "")
    mode = environ.get("TRAINOPS_LAUNCH_MODE", "")
    if "OMPI_COMM_WORLD_RANK" in environ and mode == "mpirun":
        # mpirun spans the distribution's hosts only (one instance group of a heterogeneous cluster).
        hosts = json.loads(environ.get("TRAINOPS_DISTRIBUTION_HOSTS") or "[]") or hosts
        world_rank = int(environ["OMPI_COMM_WORLD_RANK"])
        world_size = int(environ.get("OMPI_COMM_WORLD_SIZE", "1"))
        per_host = max(1, int(environ.get("TRAINOPS_PROCESSES_PER_HOST") or "1"))
        # -map-by slot with equal slots puts ranks 0..P-1 on the first host, P..2P-1 on the second, and so on.
        if hosts:
            host = hosts[min(world_rank // per_host, len(hosts) - 1)]
        return {"rank": world_rank, "local_rank": world_rank % per_host, "world_size": world_size,
                "local_world_size": per_host, "host": host, "mpi": True}
    if "RANK" in environ and "LOCAL_RANK" in environ:
        return {"rank": int(environ["RANK"]), "local_rank": int(environ["LOCAL_RANK"]),
                "world_size": int(environ.get("WORLD_SIZE", "1")), "host": host, "mpi": False}
    return {"rank": int(environ.get("TRAINOPS_NODE_RANK") or "0"), "local_rank": 0, "world_size": 1, "host": host,
            "mpi": False}


def _apply_mpi_identity(identity: dict[str, object], script: str) -> str:
    """Give an mpirun rank the view a torchrun rank has (and, in a local simulation, its simulated host's
    environment, which the master's launcher wrote to ``TRAINOPS_HOST_ENV_DIR``, and that host's copy of the
    script). Returns the script to run."""
    host = str(identity["host"])
    host_env_dir = os.environ.get("TRAINOPS_HOST_ENV_DIR")
    if host_env_dir and host:
        # The master's launcher writes every host's before mpirun starts a rank, so a missing one is an error too;
        # any rank of the job could have replaced it (a FIFO, a huge file): read as hostile, and refused by name.
        try:
            environment = read_json(os.path.join(host_env_dir, f"{host}.json"), records.ENVIRONMENT_LIMIT_BYTES)
        except (OSError, ValueError) as error:
            raise SystemExit(f"trainops: rank {identity['rank']} cannot take host {host}'s environment: "
                             f"{unreadable(error)}") from None
        os.environ.update({str(k): str(v) for k, v in environment.items()})
        own = os.path.join(os.environ.get("SM_MODULE_DIR", ""), os.environ.get("SM_USER_ENTRY_POINT", ""))
        if os.environ.get("SM_MODULE_DIR") and os.path.isfile(own):
            script = own
    os.environ["SM_CURRENT_HOST"] = host
    os.environ["RANK"] = str(identity["rank"])
    os.environ["LOCAL_RANK"] = str(identity["local_rank"])
    os.environ["WORLD_SIZE"] = str(identity["world_size"])
    os.environ["LOCAL_WORLD_SIZE"] = str(identity["local_world_size"])
    return script


def _user_traceback(error: BaseException) -> str:
    """The traceback as ``python SCRIPT`` would print it: without this wrapper's and runpy's frames."""
    skip = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
    tb = error.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename in skip
                              or os.path.abspath(tb.tb_frame.f_code.co_filename) in skip):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    return 1


def run_script(script: str, arguments: list[str]) -> tuple[int, str, str, float]:
    """Run the script as ``__main__``; returns ``(exit_code, reason, exception_line, ended_at)``."""
    sys.argv = [script, *arguments]
    # As `python SCRIPT` does: the script's directory comes first on sys.path (not the wrapper's working directory).
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_request:
        ended = time.time()
        code = _exit_code(exit_request.code)
        if code and not isinstance(exit_request.code, int):
            print(exit_request.code, file=sys.stderr)
        return code, "exit" if code else "ok", f"SystemExit: {exit_request.code}" if code else "", ended
    except KeyboardInterrupt:
        ended = time.time()
        return 128 + signal.SIGINT, "interrupted", "KeyboardInterrupt", ended
    except BaseException as error:  # noqa: BLE001 - the point is to record whatever ends the rank
        ended = time.time()
        sys.stderr.write(_user_traceback(error))
        summary = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()
        return 1, "error", (summary[-1] if summary else type(error).__name__), ended
    return 0, "ok", "", time.time()


def main(argv: list[str] | None = None) -> int:
    """Run one rank: set up its identity, records and output relay, run the script, record the end."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if argv else 2
    script, arguments = argv[0], argv[1:]
    identity = _identity(dict(os.environ))
    if identity.get("mpi"):
        script = _apply_mpi_identity(identity, script)
    if os.environ.get("TRAINOPS_LAUNCH_MODE") == "torchrun":
        # torchrun starts ranks from its main thread: die with it rather than linger if it is killed outright.
        processes.set_parent_death_signal(signal.SIGKILL)
    record_dir = os.environ.get("TRAINOPS_RECORD_DIR")
    rank = int(str(identity["rank"]))
    record = {"rank": rank, "local_rank": identity["local_rank"], "host": identity["host"], "pid": os.getpid(),
              "start_ticks": processes.process_start_ticks(os.getpid()), "started_at": time.time(),
              "state": "running"}
    template = os.environ.get("TRAINOPS_LOG_PREFIX") or ""
    try:
        prefix = template.format(host=identity["host"], rank=rank, local_rank=identity["local_rank"]).encode()
    except (KeyError, IndexError, ValueError):
        prefix = template.encode()
    relay: OutputRelay | None = None
    if record_dir:
        try:
            records.write_record(record_dir, record)
            sys.stdout.flush()
            sys.stderr.flush()
            relay = OutputRelay(prefix, records.tail_path(record_dir, rank), relay_stdout=bool(prefix))
            relay.start()
            # The relay outlives a crash, so fatal-signal tracebacks go through it (into the log and the tail).
            faulthandler.enable(all_threads=True)
        except OSError as error:
            print(f"trainops: cannot keep the rank record in {record_dir}: {error}", file=sys.stderr)
            record_dir = None
    if os.environ.get("TRAINOPS_LOCAL") == "1" or os.environ.get("TRAINOPS_SHIMS"):
        # Local and Slurm runs serve stand-ins for SMDDP / torch.sagemaker when those libraries are absent (opt out:
        # TRAINOPS_SHIMS=0); never on SageMaker, where neither variable is set.
        from trainops.runtime import shims

        shims.install()
    code, reason, exception, ended = run_script(script, arguments)
    if record_dir:
        # The exception line may quote a secret (TRAINOPS_MASK_VARIABLES): the record keeps it masked.
        record.update(state="exited", exit_code=code, reason=reason, exception=mask(exception), ended_at=ended)
        try:
            records.write_record(record_dir, record)
        except OSError:
            pass
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if relay is not None:
        relay.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
