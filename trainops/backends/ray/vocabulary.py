"""The ray engine's vocabulary: a Ray job's states, its failure rules, no price, the neutral spec rules.

A Ray job (the Jobs API's ``JobStatus``) is PENDING, RUNNING, then SUCCEEDED, FAILED or STOPPED. How a FAILED job
failed is in Ray's words, which `trainops.backends.ray.status` records as evidence: the job's ``error_type`` (Ray's
``JobErrorType``) beside its state (the evidence's ``secondary_statuses``), and its ``message`` as the failure text
unless the driver printed a host's failure file (then that file is the failure text, as on Slurm):

- a rank failed: the driver prints the failing host's failure file; the neutral rules read it (``user`` for an error
  of the script, ``infrastructure`` for a transport error, ...);
- the job's ``runtime_env`` could not be set up (a pip package that does not exist, a working_dir too large):
  ``RUNTIME_ENV_SETUP_FAILURE`` -> ``setup``;
- a node or an actor died: the driver's "host ... was lost" line, Ray's own actor-died and node-died errors, or the
  job's supervisor actor that died (its node went away) -> ``infrastructure``, which a train step retries from the
  checkpoints;
- Ray could not place the job's supervisor (``JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE`` or its start timed out): the
  cluster lacks the resources now -> ``infrastructure``.

A Ray cluster has no price list here: a Ray job's cost is unknown and a ``max_cost_usd`` on it is refused.

Standard library only: the Airflow trigger and the KFP components classify a ray result through the registry.
"""

from __future__ import annotations

from trainops.backends.failures import INFRASTRUCTURE, SETUP, STOPPED, Rule
from trainops.backends.states import FAILURE, SUCCESS, WAITING, JobStatus, Outcome
from trainops.backends.vocabulary import Vocabulary, register

__all__ = ["ENDED_STATUSES", "FAILURE_FILE_END", "FAILURE_FILE_START", "LOST_HOST", "RAY", "RULES", "TABLE",
           "ray_job_status"]

#: A Ray job's state (the Jobs API's JobStatus): the ray backend's training jobs.
TABLE: dict[str, Outcome] = {
    "PENDING": WAITING,  # the supervisor actor, the runtime_env or the driver is being set up
    "RUNNING": WAITING,
    "SUCCEEDED": SUCCESS,
    "FAILED": FAILURE,
    "STOPPED": FAILURE,  # stop_job: trainops' stop (its reason is recorded), or someone's `ray job stop`
}

#: A Ray job's ended states, as the training-job status they mean (FAILED: Failed).
ENDED_STATUSES: dict[str, str] = {"SUCCEEDED": "Completed", "STOPPED": "Stopped"}

STATE_MEANINGS: dict[str, str] = {
    "PENDING": "Ray is setting up the job (its supervisor, its runtime_env, its driver)",
    "RUNNING": "the job's driver runs: its hosts train",
    "SUCCEEDED": "the job's driver exited 0: every host completed",
    "FAILED": "the job failed: a host's failure, a runtime_env that could not be set up, or a lost node",
    "STOPPED": "the job was stopped (stop_job)",
}

#: The lines the driver prints around the first failing host's failure file (the end of the job's log, which Ray
#: puts in a failed job's message): `trainops.backends.ray.status` takes the file back out of them.
FAILURE_FILE_START = "[trainops] failure file of host {host}:"
FAILURE_FILE_END = "[trainops] end of the failure file"
#: The driver's line for a host whose actor died (its node was lost, or the actor was killed).
LOST_HOST = "[trainops] host {host} was lost: {error}"

_I = "(?i)"

#: Ray's failure rules, matched against its words (`FailureEvidence.secondary_statuses`: the state and Ray's
#: JobErrorType; `failure_text`: a failure file, else Ray's message).
RULES: tuple[Rule, ...] = (
    Rule(STOPPED, "secondary_status", r"^STOPPED$", "the Ray job was stopped (stop_job)", "limit"),
    Rule(SETUP, "secondary_status", r"^RUNTIME_ENV_SETUP_FAILURE$", "Ray could not set up the job's runtime_env "
         "(a package, a working_dir or py_modules it could not install): fix the runtime_env option", "before_script"),
    Rule(SETUP, "failure_text", _I + r"runtime_env setup failed|RuntimeEnvSetupError", "Ray could not set up a "
         "runtime_env of the job: fix the runtime_env option", "before_script"),
    Rule(INFRASTRUCTURE, "failure_text", r"^\[trainops\] host \S+ was lost: ", "a host's Ray actor died (its node "
         "was lost or the actor was killed)", "hosts"),
    Rule(INFRASTRUCTURE, "secondary_status", r"^JOB_SUPERVISOR_ACTOR_DIED$", "the Ray job's supervisor actor died "
         "(its node was lost)", "hosts"),
    Rule(INFRASTRUCTURE, "failure_text", r"(ActorDiedError|NodeDiedError|OwnerDiedError|ActorUnavailableError|"
         r"The actor died unexpectedly|its node has died|node .* (was|has been) marked (as )?dead|raylet .*died)",
         "a Ray actor or node of the job died", "hosts"),
    Rule(INFRASTRUCTURE, "secondary_status", r"^JOB_SUPERVISOR_ACTOR_(UNSCHEDULABLE|START_TIMEOUT)$",
         "Ray could not place the job on the cluster (no node has the resources now)", "machine"),
)

RAY = register(Vocabulary(
    engine="ray", tables={"ray_job": TABLE}, training_kind="ray_job", ended_as=ENDED_STATUSES,
    state_meanings=STATE_MEANINGS, rules=RULES, price=None, price_basis="",
    front_end_options=frozenset({"processes_per_host", "checkpoint_key", "channel_overrides"})))


def ray_job_status(state: str | None) -> JobStatus:
    """The training-job status of a Ray job state (`TABLE`): PENDING and RUNNING -> InProgress, SUCCEEDED ->
    Completed, FAILED -> Failed, STOPPED -> Stopped. A state the table does not know reads as still running."""
    return RAY.job_status(state)
