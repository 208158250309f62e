"""docs/failures.md, generated: the failure classes, the neutral rules and each built-in engine's own.

A module of its own so that the neutral classifier (`trainops.backends.failures`) names no engine: this one reads
each built-in engine's vocabulary through the registry.
"""

from __future__ import annotations

from trainops.backends import builtin_names
from trainops.backends.failures import RESULT_KEYS, RULES, STAGES, Rule
from trainops.backends.request.vocabulary import RULES as REQUEST_RULES
from trainops.backends.vocabulary import Vocabulary, vocabulary_of


def rules_markdown() -> str:
    """docs/failures.md: the classes, the neutral rule table and each built-in engine's own rules (a test keeps the
    file current: `python -c "from trainops.backends.failure_docs import rules_markdown; print(rules_markdown(),
    end='')" > docs/failures.md`)."""
    lines = [
        "# Why an attempt ended: the failure classes",
        "",
        "Generated from `trainops/backends/failures.py` and each engine's vocabulary (`trainops/backends/"
        "failure_docs.py`: `rules_markdown()`); a unit test fails when it is stale.",
        "",
        "Every ended training attempt gets one class, and the evidence that decided it (the rule and the line it "
        "matched). The train step's retry budgets (`retries:` on a pipeline's train step, `trainops run --retries`, "
        "`retry_budgets` of the Airflow operator, the KFP train component's `retries_json`) spend one budget per "
        "class; `stopped` and `budget` are never retried.",
        "",
        "trainops' own guards stop a job and say so (`trainops.backends.guards`; spec fields in docs/spec.md): "
        "`max_cost_usd` (with `budget: stop`, the job is stopped when its billable cost so far reaches what is left "
        "of the run's budget: SageMaker's billable time, or locally the wall time, x instances x the backend's "
        "price; a backend with no price, such as slurm, reports cost as unknown and refuses max_cost_usd before "
        "anything is created), the wait bound (`max_run` + `max_wait` + `wait_grace_seconds`, counted from the "
        "job's own start, "
        "so a re-attached wait gets no fresh bound; `stop_at_wait_bound: false` only stops waiting), and the stall "
        "watchdog (`stall_timeout`: no new log line and no metric for that long while the script runs; off by "
        "default, recommended for multi-node GPU jobs, where an NCCL hang or EFA falling back to TCP prints "
        "nothing and fails nothing; on SageMaker it reads the CloudWatch log streams' last event and ingestion "
        "times and the metrics' timestamps, locally the growth of the hosts' log files).",
        "",
        "Every wait applies the guards through the same per-poll check (`guards.act` on the backend's watch, "
        "`Backend.watch`): the train step's wait, the Airflow worker's poll and each reschedule poke, and the "
        "trigger of a deferred train task, which gets them as JSON in its arguments, so a restarted triggerer "
        "applies the same ones and the bound still counts from the job's start (a local stall's quiet time is "
        "counted again from the restart). The task resumed from the trigger fails with the guard's class: "
        "`budget` and `timeout` without Airflow's retries, a stall as an `infrastructure` failure. Why trainops "
        "stopped a job outlives the stop: on SageMaker, which keeps no stop reason, the guard tags the job "
        "(`trainops:stopped-by`, `trainops:stop-reason`) before StopTrainingJob and describe reads the tags back; "
        "a local job's record keeps the guard's sentence as its failure reason. So a later `trainops status` says "
        "budget, stalled or wait bound, not a bare Stopped.",
        "",
        "A status look that fails (a timeout, a 5xx, throttling, a refused connection) is not an ended attempt and "
        "gets no class: the wait looks again, and gives up only after 5 failed looks in a row and 60 s since the "
        "first (`trainops.backends.looks`), saying the job may still be running; no retry starts from it.",
        "",
        "| class | meaning | what a retry does |",
        "| --- | --- | --- |",
        "| `user` | the script or its input (an exception, a non-zero exit, an invalid request) | fails the same way: "
        "not retried by default |",
        "| `setup` | the job failed before its training script started: a package trainops needs for it is missing "
        "(with the `pip install` that adds it), a channel cannot be read, a limit of the machine (the per-user "
        "process limit), the output location cannot be written | meets the same: never retried (no budget); fix "
        "what it names |",
        "| `infrastructure` | capacity, a lost or faulty instance, a failed GPU health check, EFA/NCCL transport "
        "errors, spot interruption, throttling; reason `stalled`: no log line and no metric for `stall_timeout` "
        "seconds, so trainops' watchdog stopped the hung job | a fresh attempt `<name>-N` resumes from the shared "
        "checkpoints |",
        "| `timeout` | `max_run` / `max_wait` reached, or the wait bound (`max_run` + `max_wait` + "
        "`wait_grace_seconds` from the job's own start) passed and trainops stopped the job | would be stopped "
        "again: not retried by default |",
        "| `stopped` | a person or an orchestrator asked | never retried |",
        "| `budget` | the run's `max_cost_usd` was reached and trainops stopped the job (`budget: stop`) | never "
        "retried: no retry starts that cannot fit in what is left |",
        "| `unknown` | no rule matched | not retried by default |",
        "",
        "Rules are data. The neutral ones below bind every engine: trainops' guards, a requested stop, the "
        "runtime's failure file and what any training workload prints. Each engine adds its own in its vocabulary "
        "(`trainops.backends.vocabulary.Vocabulary.rules`; see docs/architecture.md), each in a stage of the table; "
        "an engine's rule is tried after the neutral rules of its stage. An engine without rules of its own is "
        "classified by the neutral ones, and what none matches is `unknown`. Stages, in order: "
        + ", ".join(f"`{stage}`" for stage in STAGES) + ". Sources: `guard` (a trainops guard stopped the job: "
        "`trainops.backends.guards`), `stop_request` (stop was asked), `secondary_status` (the engine's states of "
        "the job, in order), `reason` (the failure file's `reason:`), `failure_text` (the engine's failure reason or "
        "the runtime's failure file), `healthcheck`, `host_lost`, `exit_code`, `status`. The result keys a backend "
        "records them under: " + ", ".join(f"`{key}`" for key in RESULT_KEYS) + ".",
        "",
        "## The neutral rules (every engine)",
        "",
        *_table(RULES),
    ]
    for name in builtin_names():
        vocabulary = vocabulary_of(name)
        lines += ["", f"## The {name} engine's own rules", "", _binding(vocabulary), ""]
        lines += _table(vocabulary.rules) if vocabulary.rules else ["(none: the neutral rules alone)"]
    return "\n".join(lines) + "\n"


def _binding(vocabulary: Vocabulary) -> str:
    shared = [rule for rule in vocabulary.rules if rule in REQUEST_RULES]
    price = (f"price: {vocabulary.price_basis}" if vocabulary.priced
             else "price: none (cost is reported as unknown; max_cost_usd is refused)")
    where = (f"{len(shared)} of them are the SageMaker request's (`trainops.backends.request.vocabulary`), which "
             "this engine runs; " if shared else "")
    return (f"{where}states: {', '.join(f'`{kind}`' for kind in vocabulary.tables) or 'none'}; {price}; spec rule "
            f"sets: {', '.join(f'`{name}`' for name in sorted(vocabulary.spec_rules)) or 'the neutral ones only'}.")


def _table(rules: tuple[Rule, ...]) -> list[str]:
    lines = ["| # | stage | class | source | pattern | why |", "| --- | --- | --- | --- | --- | --- |"]
    for number, rule in enumerate(rules, start=1):
        pattern = rule.pattern.replace("(?i)", "").replace("|", "\\|")
        lines.append(f"| {number} | `{rule.stage}` | `{rule.failure_class}` | `{rule.source}` | `{pattern}` | "
                     f"{rule.why} |")
    return lines
