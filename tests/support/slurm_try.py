"""A two-node Slurm cluster on this machine to try the slurm backend on (`make slurm-cluster`): the test suite's
cluster (`slurm_cluster.start_cluster`: munged, slurmctld, two slurmd, slurmrestd with JWT), started in the
foreground until Ctrl-C, which stops every process of it.

    python tests/support/slurm_try.py [DIRECTORY]   # default: a new directory under /tmp

It prints what another shell needs to reach the cluster: ``SLURM_CONF`` for the Slurm commands (``transport:
cli``, trainops' default), the shared directory (both nodes are this machine, so any directory is shared), and the
slurmrestd address and a token for ``transport: rest``. Needs root and Slurm's packages (``make slurm``).
"""

from __future__ import annotations

import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `support` importable

from support.slurm_cluster import missing, start_cluster  # noqa: E402


def main(arguments: list[str]) -> int:
    why = missing()
    if why:
        print(f"slurm-cluster: {why}", file=sys.stderr)
        return 2
    root = Path(arguments[0]) if arguments else Path(tempfile.mkdtemp(prefix="trainops-try-slurm-"))
    print(f"starting a two-node Slurm cluster under {root} (munged, slurmctld, slurmd n1 and n2, slurmrestd) ...",
          flush=True)
    cluster = start_cluster(root.resolve())
    stopping = {"asked": False}

    def stop(number: int, _frame: object) -> None:
        stopping["asked"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        print(f"""ready. In another shell, from this checkout:

    export SLURM_CONF={cluster.conf}
    .venv/bin/trainops run examples/digits/train.yaml --backend slurm -o shared_dir={cluster.shared_dir} \\
        -o python=$PWD/.venv/bin/python --channel train=$PWD/runs/digits/fsx/digits/train

(`make run` first stages the digits data under runs/digits.) Through slurmrestd instead of the Slurm commands:
-o transport=rest -o rest_url={cluster.rest_url} with SLURM_JWT={cluster.token()}

Ctrl-C stops the cluster and every job on it.""", flush=True)
        while not stopping["asked"]:
            signal.pause()
    finally:
        print("stopping the cluster", flush=True)
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
