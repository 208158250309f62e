"""A two-node Slurm cluster on this machine to try the slurm backend on (`make slurm-cluster`): the test suite's
cluster (`slurm_cluster.start_cluster`: munged, slurmctld, two slurmd, slurmrestd with JWT), started in the
foreground until Ctrl-C, which stops every process of it.

    python tests/support/slurm_try.py [--env-file FILE] [DIRECTORY]   # default: a new directory under /tmp

It prints what another shell needs to reach the cluster: ``SLURM_CONF`` for the Slurm commands (``transport:
cli``, trainops' default), the shared directory (both nodes are this machine, so any directory is shared), and the
slurmrestd address and a token for ``transport: rest``; with ``--env-file`` it also writes, once the cluster is
ready, a file another shell sources (``SLURM_CONF`` and ``SLURM_TRY_SHARED_DIR``, the shared directory), removed
when the cluster stops (`make slurm-cluster` writes ``runs/slurm-cluster.env``). Needs root and Slurm's packages
(``make slurm``).
"""

from __future__ import annotations

import shlex
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
    env_file = None
    if arguments[:1] == ["--env-file"] and len(arguments) > 1:
        env_file, arguments = Path(arguments[1]), arguments[2:]
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
        if env_file is not None:
            env_file.parent.mkdir(parents=True, exist_ok=True)
            partial = env_file.with_name(env_file.name + ".partial")  # whole or absent: a shell may wait for it
            partial.write_text(f"export SLURM_CONF={shlex.quote(str(cluster.conf))}\n"
                               f"export SLURM_TRY_SHARED_DIR={shlex.quote(str(cluster.shared_dir))}\n")
            partial.replace(env_file)
            print(f"(also in {env_file}: `source {env_file}` sets SLURM_CONF and SLURM_TRY_SHARED_DIR)", flush=True)
        while not stopping["asked"]:
            signal.pause()
    finally:
        print("stopping the cluster", flush=True)
        if env_file is not None:
            env_file.unlink(missing_ok=True)
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
