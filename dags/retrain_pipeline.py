"""Scheduled retraining: prepare -> stage -> train -> evaluate -> gate -> register, from one pipeline file.

Runs every Monday at 03:00 UTC, and also whenever the training data asset is updated (a producer DAG declares it as
an outlet, or someone posts an asset event through the API), whichever comes first.

Unpausing starts nothing: a training run is paid, so it starts at the next Monday 03:00 UTC or on new data, never
because someone unpaused the DAG. The DAG is created paused (``is_paused_upon_creation=True``), ``catchup=False``
runs no week it was paused, and its timetable (`trainops.operators.timetables.TickOnlyCronTimetable`) skips the tick
Airflow would otherwise run at once on unpause (with ``catchup=False`` Airflow 2.11 and 3.x still run the latest
passed tick). For a retrain now, trigger a run by hand; an asset event starts one at once too.

Every step is described by a pipeline file, by default the digits example (``examples/digits/pipeline.yaml``, found
beside this DAGs folder in a checkout: ``<dags>/../examples``; elsewhere the Airflow Variable ``trainops_pipeline_dirs``
names where pipeline files are), the same file ``make run`` runs: the DAG and the command line retrain the same way.
The digits pipeline's backend is ``local`` (simulated hosts on the worker), so the DAG runs offline:

    airflow dags test retrain_pipeline

Parameters (trigger with config; any other key fails the run's ``prepare`` task, naming the keys it takes):
``pipeline_file`` (only inside `PIPELINE_DIRS` or the directories of the Variable ``trainops_pipeline_dirs``: whoever
may trigger the DAG must not make the worker run another prepare script),
``backend`` (a registered backend or a named one; default: the pipeline file's; on another than the file's, the
file's ``backend_options`` stay out),
``hyperparameters`` (merged over the training spec's, e.g. ``{"epochs": 2}``
for a quick run) and ``overrides`` (training spec fields; only those in `CONF_OVERRIDABLE`, none by default: the IAM
role, the image and the output path are the DAG author's). The work directory is the deployment's, never the
conf's: the Variable ``trainops_workdir``, else ``$AIRFLOW_HOME/trainops``.

Parsing this file imports Airflow's light modules and the thin trainops operator modules only (on Airflow 2.11 and
3.x alike, through `trainops.operators.compat`): the pipeline file, the job spec and every heavy library are read
when the tasks run, never when the scheduler parses the DAG.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from trainops.operators.compat import (
    DAG,
    Param,
    asset,
    asset_or_time_schedule,
    retry_arguments,
    task,
)
from trainops.operators.evaluate import EvaluateModelOperator, QualityGateOperator
from trainops.operators.register import RegisterModelOperator
from trainops.operators.stage import StageDataOperator
from trainops.operators.timetables import TickOnlyCronTimetable
from trainops.operators.training import DistributedTrainingOperator

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DIGITS_PIPELINE = EXAMPLES / "digits" / "pipeline.yaml"
#: Where this DAG reads pipeline files from (a deployment adds more with the Variable ``trainops_pipeline_dirs``).
PIPELINE_DIRS = [str(EXAMPLES)]
#: Training spec fields a DAG run's conf may override (``role``, ``image_uri``, ``output_path``): none by default.
CONF_OVERRIDABLE: tuple[str, ...] = ()

#: The training data. A DAG that refreshes it lists this asset in its outlets; that starts a retraining run.
#: An ``x-`` URI on purpose: an ``s3://`` asset makes Airflow load the Amazon provider's S3 normalizer (boto3) while
#: parsing this file, about 300 ms of every parse (bench/dag_parse.py). Producers must use the same URI.
TRAINING_DATA = asset("digits_training_data", "x-trainops://digits/training-data")

#: What a run's conf may set (any other key is refused, naming these).
PARAMS = {
    "pipeline_file": Param(str(DIGITS_PIPELINE), type="string", description="the pipeline YAML"),
    "backend": Param(None, type=["null", "string"], description="where to train and evaluate: a registered or a "
                     "named backend (default: the pipeline file's)"),
    "hyperparameters": Param({}, type="object", description="merged over the training spec's"),
    "overrides": Param({}, type="object", description="training spec fields the DAG allows (CONF_OVERRIDABLE)"),
}

with DAG(
    dag_id="retrain_pipeline",
    description="Weekly or on new data: stage, train (distributed), evaluate, gate, register",
    # A run starts at Monday's tick or on new data, never because the DAG was unpaused: TickOnlyCronTimetable skips
    # the tick Airflow would otherwise run at once on unpause (the latest one passed, even with catchup=False).
    schedule=asset_or_time_schedule(TickOnlyCronTimetable("0 3 * * 1", timezone="UTC"), TRAINING_DATA),
    start_date=datetime(2026, 1, 5, tzinfo=timezone.utc),  # a Monday; Airflow 2.11 needs one for a schedule
    catchup=False,  # and no run for each week the DAG was paused
    is_paused_upon_creation=True,  # running it at all is someone's decision, not a deployment's
    max_active_runs=1,  # two runs of one pipeline would train and register over each other
    tags=["trainops", "retraining"],
    params=PARAMS,
    doc_md=__doc__,
) as dag:

    # Airflow 3.3+: a deterministic error (a missing module, a bad file) fails at once instead of retrying twice.
    @task(multiple_outputs=True, retries=2, retry_delay=timedelta(minutes=1), **retry_arguments())
    def prepare(params=None, run_id=None, dag_run=None) -> dict:
        """Read the pipeline file (every problem reported at once, with its field), run its data export."""
        from trainops.operators import pipeline_file as files
        from trainops.operators.common import translated_errors

        with translated_errors():
            steps = files.steps_for_run(params, dag_run.conf if dag_run is not None else None, accepted=PARAMS,
                                        allowed_dirs=PIPELINE_DIRS, conf_overridable=CONF_OVERRIDABLE, run_id=run_id)
            files.run_prepare_step(steps, log=print)
        return steps

    steps = prepare()

    stage = StageDataOperator(
        task_id="stage",
        source=steps["stage_source"],
        destination=steps["stage_destination"],
        s3_prefix=steps["stage_s3_prefix"],
        workers=steps["stage_workers"],
        backend=steps["backend"],
        backend_options=steps["backend_options"],
        region_name=steps["region"],
        inlets=[TRAINING_DATA],
    )

    train = DistributedTrainingOperator(
        task_id="train",
        spec=steps["train_spec"],
        job_name=steps["train_job_name"],
        backend=steps["backend"],
        backend_options=steps["backend_options"],
        workdir=steps["workdir"],
        channel_overrides=steps["train_channels"],
        processes_per_host=steps["train_processes_per_host"],
        retry_budgets=steps["train_retries"],  # infrastructure failures retried in the task, user errors not
        region_name=steps["region"],
        deferrable=True,  # the wait happens in the triggerer; a local job runs under a detached supervisor
        multiple_outputs=True,
    )

    evaluate = EvaluateModelOperator(
        task_id="evaluate",
        entry_point=steps["evaluate_entry_point"],
        source_dir=steps["evaluate_source_dir"],
        model_artifact=train.output["model_artifact"],
        channels=steps["evaluate_channels"],
        output_dir=steps["evaluate_output_dir"],
        gate=steps["evaluate_gate"],
        hyperparameters=steps["evaluate_hyperparameters"],
        timeout=steps["evaluate_timeout"],
        champion_group=steps["register_group"],
        registry_dir=steps["register_registry_dir"],
        backend=steps["backend"],
        backend_options=steps["backend_options"],
        # What the backend's evaluation takes from the training spec (SageMaker: the training job's role and image),
        # from the one resolution of the pipeline file (trainops.steps.plan); none locally.
        evaluation_settings=steps["evaluate_settings"],
        region_name=steps["region"],
        on_gate_failure="continue",  # the gate task decides, so the metrics reach XCom whatever the verdict
        multiple_outputs=True,
    )

    gate = QualityGateOperator(
        task_id="gate",
        evaluation=evaluate.output,
        on_gate_failure=steps["evaluate_on_gate_failure"],
    )

    register = RegisterModelOperator(
        task_id="register",
        model_artifact=train.output["model_artifact"],
        metrics=evaluate.output["metrics"],
        group=steps["register_group"],
        approval=steps["register_approval"],
        spec=steps["train_spec"],
        registry_dir=steps["register_registry_dir"],
        job_name=train.output["job_name"],
        description=steps["register_description"],
        backend=steps["backend"],
        backend_options=steps["backend_options"],
        registration_settings=steps["register_settings"],
        region_name=steps["region"],
    )

    stage >> train
    gate >> register
