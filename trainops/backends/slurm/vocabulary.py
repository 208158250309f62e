"""The Slurm engine's vocabulary: its job states, its failure rules, no price, and the spec rules it binds.

Slurm has no price list: a Slurm job's cost is reported as unknown (never SageMaker's list price), and a
``max_cost_usd`` on it is refused (`trainops.steps.forecast.check_budget`). Its nodes are described by the cluster,
not by an instance catalog: the spec's ``instance_type`` names them (any node description, ``ml.*`` or not), and
`torch_distributed` runs on CPU partitions too (torchrun with the gloo backend), so the SageMaker request's rule set
does not bind here; Slurm's own (`trainops.backends.slurm.spec_rules`) does.

Standard library only: the Airflow trigger imports it through the registry.
"""

from __future__ import annotations

from trainops.backends.failures import INFRASTRUCTURE, STOPPED, TIMEOUT, USER, Rule
from trainops.backends.slurm.spec_rules import SLURM_RULES  # registers Slurm's spec rules
from trainops.backends.states import FAILURE, SUCCESS, WAITING, JobStatus, Outcome
from trainops.backends.vocabulary import Vocabulary, register

__all__ = ["ENDED_STATUSES", "RULES", "SLURM", "SLURM_RULES", "TABLE", "slurm_status"]

#: A Slurm job's state (squeue --json / slurmrestd's job_state): the slurm backend's training jobs.
TABLE: dict[str, Outcome] = {
    "PENDING": WAITING,
    "CONFIGURING": WAITING,  # nodes booting (a cloud or HyperPod node being replaced)
    "RUNNING": WAITING,
    "COMPLETING": WAITING,  # the steps ended; epilogs run
    "SUSPENDED": WAITING,
    "STOPPED": WAITING,  # Slurm's STOPPED is a paused job (SIGSTOP), not an ended one
    "REQUEUED": WAITING,
    "REQUEUE_HOLD": WAITING,
    "REQUEUE_FED": WAITING,
    "RESIZING": WAITING,
    "SIGNALING": WAITING,
    "STAGE_OUT": WAITING,
    "COMPLETED": SUCCESS,
    "FAILED": FAILURE,  # the batch script exited non-zero: a rank failed (its failure file says why)
    "CANCELLED": FAILURE,  # scancel: trainops' stop, or someone else's
    "TIMEOUT": FAILURE,  # the time limit (sbatch --time = max_run)
    "DEADLINE": FAILURE,
    "NODE_FAIL": FAILURE,  # a node of the job stopped answering (SlurmdTimeout)
    "BOOT_FAIL": FAILURE,
    "PREEMPTED": FAILURE,
    "OUT_OF_MEMORY": FAILURE,
    "REVOKED": FAILURE,
    "SPECIAL_EXIT": FAILURE,
}

#: A Slurm job's ended states, as the training-job status they mean (the others that end a job are Failed).
ENDED_STATUSES: dict[str, str] = {
    "COMPLETED": "Completed",
    "CANCELLED": "Stopped",
    "TIMEOUT": "Stopped",  # stopped at the limit
    "DEADLINE": "Stopped",
}

#: Slurm's failure rules, matched against the job's states (the evidence's ``secondary_statuses``).
RULES: tuple[Rule, ...] = (
    Rule.on_states(TIMEOUT, ("TIMEOUT", "DEADLINE"), "Slurm stopped the job at its time limit (sbatch --time, from "
                   "max_run)", "limit"),
    Rule.on_states(STOPPED, "CANCELLED", "the Slurm job was cancelled (scancel)", "limit"),
    Rule.on_states(INFRASTRUCTURE, ("NODE_FAIL", "BOOT_FAIL", "PREEMPTED"), "Slurm lost a node of the job (it "
                   "stopped answering), could not boot one, or preempted the job", "hosts"),
    Rule.on_states(USER, "OUT_OF_MEMORY", "a process of the Slurm job ran out of memory: ask for larger nodes or use "
                   "less", "hosts"),
)

SLURM = register(Vocabulary(
    engine="slurm", tables={"slurm_job": TABLE}, training_kind="slurm_job", ended_as=ENDED_STATUSES, rules=RULES,
    spec_rules=frozenset({SLURM_RULES}),
    front_end_options=frozenset({"processes_per_host", "channel_overrides", "checkpoint_key"})))


def slurm_status(state: str | None) -> JobStatus:
    """The training-job status of a Slurm job state (`TABLE`): still waiting -> InProgress, an ended state ->
    Completed, Stopped or Failed. A state the table does not know reads as still running (logged once)."""
    return SLURM.job_status(state)
