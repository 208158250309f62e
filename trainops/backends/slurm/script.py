"""The batch script of a job, and the same job's properties as slurmrestd takes them: pure, no file, no call.

One list of sbatch options (`BatchJob.options`) is both the script's ``#SBATCH`` lines (what ``sbatch`` reads) and
the REST submission's job properties (slurmrestd does not read ``#SBATCH`` lines), so the two transports submit the
same job. The script asks for one task per node and runs three things on the batch host, which Slurm makes the
allocation's first node (node 0, host algo-1, the rendezvous host):

1. a free port for the ranks' rendezvous (the nodes are shared with other jobs: not the toolkit's fixed 7777);
2. ``srun``: on every node, the node script (`trainops.backends.slurm.node` ``run``) turns node ``i`` into host
   ``algo-<i+1>`` of the job's contract directories and starts the trainops runtime there; the first rank that
   fails ends the step (``--kill-on-bad-exit``);
3. the node script's ``finish``: the model's archive when the step completed, else the root cause from the
   runtime's failure files, written to the job's ``ended.json`` (`trainops.backends.slurm.records`); when Slurm
   ends the job itself (scancel, the time limit, a lost node), the shell's trap on SIGTERM runs the node script's
   ``ended-by-slurm``, which writes there how.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

#: The node script's name in the job's runtime directory (beside trainops/runtime/).
NODE_FILE = "trainops_slurm_node.py"
#: The comment every job carries: trainops finds its own jobs by it (never another user's, never a plain sbatch).
COMMENT_PREFIX = "trainops:"


@dataclass(frozen=True)
class BatchJob:
    """What the batch script of one job says. ``token`` is the submission's unique mark (its comment)."""

    job_name: str
    job_dir: str
    nodes: int
    time_seconds: int
    token: str
    python: str = "python3"
    hyperpod: bool = False
    exclusive: bool = True
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    extra: tuple[tuple[str, str | None], ...] = field(default=())

    @property
    def comment(self) -> str:
        return f"{COMMENT_PREFIX}{self.token}"

    @property
    def node_script(self) -> str:
        return f"{self.job_dir}/runtime/{NODE_FILE}"

    @property
    def batch_log(self) -> str:
        """sbatch's ``--output`` pattern: ``%j`` is the job id, and a ``%`` of the job's directory is written ``%%``
        (sbatch expands every ``%`` of the path: a shared directory holding one broke every job)."""
        return f"{self.job_dir.replace('%', '%%')}/logs/batch-%j.log"

    def options(self) -> list[tuple[str, str | None]]:
        """The job's sbatch options, in the script's order: (long name, value or None for a flag)."""
        chosen: list[tuple[str, str | None]] = [
            ("job-name", self.job_name), ("nodes", str(self.nodes)), ("ntasks-per-node", "1"),
            ("time", time_limit(self.time_seconds)), ("no-requeue", None),
            ("output", self.batch_log), ("open-mode", "append"), ("chdir", self.job_dir),
            ("comment", self.comment)]
        for name in ("partition", "account", "qos", "reservation", "constraint"):
            value = getattr(self, name)
            if value:
                chosen.append((name, value))
        if self.exclusive:
            chosen.append(("exclusive", None))
        chosen += list(self.extra)
        return chosen

    def srun(self) -> list[str]:
        """The step that starts the runtime on every node (``--auto-resume=1`` on HyperPod: its plugin replaces a
        faulty node and runs the step again). ``--mpi=none``: the runtime is no MPI process (a cluster's
        ``MpiDefault=pmix`` would hand it PMIx variables that an mpirun it starts would inherit)."""
        argv = ["srun", f"--nodes={self.nodes}", f"--ntasks={self.nodes}", "--ntasks-per-node=1",
                "--kill-on-bad-exit=1", "--export=ALL", "--mpi=none"]
        if self.hyperpod:
            argv.append("--auto-resume=1")
        return argv


def time_limit(seconds: int) -> str:
    """``max_run`` as sbatch's ``--time`` (days-hours:minutes:seconds; Slurm rounds it up to whole minutes)."""
    seconds = max(1, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def batch_script(job: BatchJob) -> str:
    """The exact batch script ``sbatch`` is given (and slurmrestd, as the job's script)."""
    quote = shlex.quote
    lines = ["#!/bin/bash"]
    for name, value in job.options():
        lines.append(f"#SBATCH --{name}" + (f"={value}" if value is not None else ""))
    lines += [
        f"# trainops job {job.job_name}: its CreateTrainingJob request (request.json) laid out as one contract",
        "# directory per host (hosts/algo-N); node i of the allocation runs host algo-<i+1> with the trainops runtime.",
        "set -u",
        f"PYTHON={quote(job.python)}",
        f"NODE={quote(job.node_script)}",
        f"JOB_DIR={quote(job.job_dir)}",
        "# Slurm ends a job it stops (scancel, the time limit, a lost node) with SIGTERM to each of its processes,",
        "# this shell's too: the job then records how it ended, readable once Slurm has forgotten it.",
        'trap \'"$PYTHON" -I -S "$NODE" ended-by-slurm "$JOB_DIR"; exit 143\' TERM',
        'export TRAINOPS_MASTER_PORT="$("$PYTHON" -I -S "$NODE" free-port)"',
        " ".join(job.srun()) + ' "$PYTHON" -I -S "$NODE" run "$JOB_DIR" &',
        "wait $!  # (a trapped signal ends the wait at once; a foreground srun would delay the trap until it exits)",
        'exec "$PYTHON" -I -S "$NODE" finish "$JOB_DIR" "$?"',
    ]
    return "\n".join(lines) + "\n"


def rest_job(job: BatchJob, environment: dict[str, str]) -> dict[str, object]:
    """The job's properties for slurmrestd's ``POST /slurm/v0.0.38/job/submit`` (the same options as the script's
    ``#SBATCH`` lines; ``environment`` is the batch step's, which the REST API requires)."""
    minutes = max(1, -(-int(job.time_seconds) // 60))
    properties: dict[str, object] = {
        "name": job.job_name, "nodes": [job.nodes, job.nodes], "tasks": job.nodes, "tasks_per_node": 1,
        "time_limit": minutes, "requeue": False, "standard_output": job.batch_log, "open_mode": "append",
        "current_working_directory": job.job_dir, "comment": job.comment, "environment": dict(environment),
    }
    for name, key in (("partition", "partition"), ("account", "account"), ("qos", "qos"),
                      ("reservation", "reservation"), ("constraint", "constraints")):
        value = getattr(job, name)
        if value:
            properties[key] = value
    if job.exclusive:
        properties["exclusive"] = "exclusive"  # what 22.05's parser takes for sbatch --exclusive
    return properties
