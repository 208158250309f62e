"""torchrun, plus a record of what it saw: ``python -m trainops.runtime.torch_launcher [torchrun arguments]``.

This is ``torch.distributed.run`` itself (the same ``main`` the ``torchrun`` command calls, same arguments, same
agent, same rendezvous), run in this process so that when its workers fail the ``ChildFailedError`` it raises can be
kept: which global ranks failed, with what exit code or signal, and when. A rank killed by a signal cannot record that
itself; this is how the launcher learns it (:mod:`trainops.runtime.failure`). Nothing changes for the ranks.

It also asks the kernel for SIGTERM when the trainops launcher above it dies, so torchrun's own SIGTERM handling
stops the workers instead of leaving them behind.
"""

from __future__ import annotations

import os
import signal
import sys

from trainops.runtime import processes, records


def observed_failures(error: BaseException) -> list[dict[str, object]]:
    """The failures of a torch ``ChildFailedError`` as records: global rank, local rank, pid, exit code (negative
    for a signal) and the time torchrun saw it."""
    failures = getattr(error, "failures", {}) or {}
    result: list[dict[str, object]] = []
    for rank, failure in sorted(failures.items()):
        result.append({
            "rank": int(rank),
            "local_rank": int(getattr(failure, "local_rank", 0)),
            "pid": int(getattr(failure, "pid", 0) or 0),
            "exit_code": int(getattr(failure, "exitcode", 1)),
            "timestamp": float(getattr(failure, "timestamp", 0) or 0),
        })
    return result


def main(argv: list[str] | None = None) -> int:
    """Run torchrun with ``argv``; on worker failure keep the failures in ``TRAINOPS_RECORD_DIR`` and exit 1."""
    argv = sys.argv[1:] if argv is None else argv
    processes.set_parent_death_signal(signal.SIGTERM)
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        torchrun.main(argv)
    except SignalException as stop:
        # Stopped from outside (the launcher forwards SIGTERM / SIGINT): torchrun has already stopped its workers.
        number = int(getattr(stop, "sigval", signal.SIGTERM))
        print(f"trainops: torchrun stopped by {processes.signal_name(number)}", file=sys.stderr)
        return 128 + number
    except ChildFailedError as error:
        record_dir = os.environ.get("TRAINOPS_RECORD_DIR")
        if record_dir:
            try:
                records.write_observed(record_dir, "torchrun", observed_failures(error))
            except OSError:
                pass
        print(f"trainops: torchrun reports failed ranks: {sorted(error.failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
