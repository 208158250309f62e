"""The local engine's vocabulary: the SageMaker request's (`trainops.backends.request.vocabulary`: the local backend
executes that very request, so its failure rules, price and spec rules bind here too), its status records' states,
and the one failure it words itself: a job that failed before its training script started.

Standard library only: the Airflow trigger imports it through the registry.
"""

from __future__ import annotations

from trainops.backends.failures import SETUP, Rule
from trainops.backends.request.vocabulary import PRICE_BASIS, list_price
from trainops.backends.request.vocabulary import RULES as REQUEST_RULES
from trainops.backends.states import FAILURE, SUCCESS, WAITING, Outcome
from trainops.backends.vocabulary import Vocabulary, register
from trainops.spec.rule_registry import SAGEMAKER_REQUEST

__all__ = ["BEFORE_SCRIPT", "LOCAL", "RULES", "TABLE"]

#: How the failure reason of a job that failed before its training script started begins (the local backend writes it
#: so: `trainops.backends.local.job_result`); the rule of class `setup` matches it. No regex metacharacters in it.
BEFORE_SCRIPT = "before the training script started: "

#: A local job's status record (<workdir>/jobs/<name>/status.json), written by trainops.backends.local.job.
TABLE: dict[str, Outcome] = {
    "InProgress": WAITING,
    "Stopping": WAITING,
    "Completed": SUCCESS,
    "Failed": FAILURE,  # also what a record says when its controller exited before the job ended
    "Stopped": FAILURE,
}

RULES: tuple[Rule, ...] = (
    *REQUEST_RULES,
    # Before the script: what the job needs of this machine (the local backend says so: `BEFORE_SCRIPT`).
    Rule(SETUP, "failure_text", r"\A" + BEFORE_SCRIPT, "the job failed before its training script started (a "
         "package it needs, a channel it cannot read, a limit of the machine): fix what it names", "before_script"),
)

LOCAL = register(Vocabulary(
    engine="local", tables={"local_job": TABLE}, training_kind="local_job", ended_as={"Stopped": "Stopped"},
    rules=RULES, price=list_price, price_basis=f"{PRICE_BASIS}: what the same request would cost on SageMaker",
    spec_rules=frozenset({SAGEMAKER_REQUEST}),
    front_end_options=frozenset({"processes_per_host", "channel_overrides", "checkpoint_key"})))
