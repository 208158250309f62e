"""The KFP v2 lightweight component functions: typed inputs and outputs, bodies that call trainops.

KFP copies each function's source into the component (the compiled YAML holds it) and runs it in the component's
image, after ``from kfp.dsl import *`` and ``from typing import *``. So each body imports what it uses, and does no
more than hand its inputs to a `trainops.components.*_task` function, which calls the typed step: the logic lives in
the installed trainops, not in text copied into YAML. No ``from __future__ import annotations`` here: KFP reads the
annotations as types.

Every path-like input is a value as the pipeline file writes it (``${workdir}/raw``), resolved where the component
runs (`trainops.components.paths`). JSON inputs (``*_json``) carry documents: the job spec, channel maps, settings.

Function-local imports (component body): KFP ships each function's source alone to the image, so each body imports
what it uses.
"""

from typing import NamedTuple

from kfp.dsl import HTML, Input, Metrics, Model, Output


def prepare_data(script: str, args_json: str, timeout: int, workdir: str, pipeline_dir: str) -> str:
    """Run the pipeline file's prepare script (no shell); returns a one-line summary."""
    from trainops.components.data_tasks import run_prepare

    return run_prepare(script=script, args_json=args_json, timeout=timeout, workdir=workdir,
                       pipeline_dir=pipeline_dir)


def stage_data(source: str, destination: str, backend: str, workdir: str, pipeline_dir: str, s3_prefix: str,
               workers: int, region: str, backend_options: str = ""
               ) -> NamedTuple("StageOutputs", [("destination", str), ("summary_json", str)]):
    """Stage training data as the backend stages it (a local copy standing for FSx; an S3 prefix linked to FSx for
    Lustre on SageMaker). ``backend_options``: the backend's settings (JSON). Returns the destination and a small
    JSON summary of the report."""
    from trainops.components.data_tasks import run_stage

    return run_stage(source=source, destination=destination, backend=backend, workdir=workdir,
                     pipeline_dir=pipeline_dir, s3_prefix=s3_prefix, workers=workers, region=region,
                     backend_options=backend_options)


def train_model(spec_json: str, spec_dir: str, backend: str, workdir: str, pipeline_dir: str, channels_json: str,
                job_name: str, name_base: str, run_key: str, processes_per_host: int, region: str, retries_json: str,
                model: Output[Model], training: Output[Metrics], backend_options: str = ""
                ) -> NamedTuple("TrainOutputs", [("job_name", str), ("status", str), ("reattached", bool),
                                                 ("model_artifact", str)]):
    """Train with the job spec (JSON) on the backend (``backend_options``: its settings, JSON), re-attaching to the
    job a previous run of this component started; SIGTERM stops the job. An infrastructure failure starts another
    attempt on the pipeline file's retry budgets (``retries_json``), a user error does not. The Model artifact points
    at the trained model; the ``training`` Metrics give the attempts and what they cost."""
    from trainops.components.train_task import run_train

    return run_train(spec_json=spec_json, spec_dir=spec_dir, backend=backend, workdir=workdir,
                     pipeline_dir=pipeline_dir, channels_json=channels_json, job_name=job_name, name_base=name_base,
                     run_key=run_key, processes_per_host=processes_per_host, region=region, model=model,
                     retries_json=retries_json, training=training, backend_options=backend_options)


def evaluate_model(model: Input[Model], spec_json: str, spec_dir: str, backend: str, workdir: str, pipeline_dir: str,
                   evaluate_json: str, gate: str, champion_group: str, registry_dir: str, region: str,
                   metrics: Output[Metrics], report: Output[HTML], backend_options: str = "") -> bool:
    """Evaluate the model with the pipeline file's script and check the gate; returns whether it passed. Every
    metric goes to the Metrics artifact; the loss curve and the script's report to the HTML report, whose metadata
    also carries the gate's message."""
    from trainops.components.evaluate_task import run_evaluate

    return run_evaluate(model=model, spec_json=spec_json, spec_dir=spec_dir, backend=backend, workdir=workdir,
                        pipeline_dir=pipeline_dir, evaluate_json=evaluate_json, gate=gate,
                        champion_group=champion_group, registry_dir=registry_dir, region=region, metrics=metrics,
                        report=report, backend_options=backend_options)


def register_model(model: Input[Model], spec_json: str, spec_dir: str, backend: str, workdir: str, pipeline_dir: str,
                   group: str, approval: str, registry_dir: str, description: str, region: str,
                   metrics: Input[Metrics] = None, backend_options: str = ""
                   ) -> NamedTuple("RegisterOutputs", [("version", int), ("approval_status", str), ("location", str)]):
    """Register the model that passed the gate, with the evaluation's metrics (none without an evaluate step), as
    a new version of its group."""
    from trainops.components.register_task import run_register

    return run_register(model=model, metrics=metrics, spec_json=spec_json, spec_dir=spec_dir, backend=backend,
                        workdir=workdir, pipeline_dir=pipeline_dir, group=group, approval=approval,
                        registry_dir=registry_dir, description=description, region=region,
                        backend_options=backend_options)


def gate_failed(report: Input[HTML]):
    """Fail the run with the gate's message (the pipeline file says a failed gate fails the pipeline)."""
    from trainops.components.register_task import fail_gate

    fail_gate(report)


#: The component functions by their step name.
FUNCTIONS = {
    "prepare": prepare_data,
    "stage": stage_data,
    "train": train_model,
    "evaluate": evaluate_model,
    "register": register_model,
    "gate_failed": gate_failed,
}
