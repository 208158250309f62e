"""DAG parse benchmark: what `dags/retrain_pipeline.py` costs the scheduler, against Airflow alone and against the
same DAG built on the Amazon provider's SageMaker operators.

Every measurement runs in a fresh interpreter (``python -c``), as the DAG processor's per-file parse does, with
AIRFLOW_HOME in a temporary directory. The timer runs inside the child, around the import only (interpreter start-up
is the same for every row and is left out). Rows:

- ``import airflow.sdk``: the baseline every DAG file pays;
- ``airflow.sdk DAG, same shape``: the retraining DAG's shape (DAG, Asset-or-cron schedule, params, six tasks) built
  from ``airflow.sdk`` classes only: what Airflow's own DAG machinery costs, whatever the operators;
- ``dags/retrain_pipeline.py (trainops)``: the real DAG file;
- ``Amazon provider SageMaker operators``: an equivalent DAG built on ``SageMakerTrainingOperator`` (train),
  ``SageMakerProcessingOperator`` (evaluate) and ``SageMakerRegisterModelVersionOperator`` (register), with raw
  request dicts as the provider expects.

Columns: *cold* (a fresh interpreter: the import of airflow.sdk included) and *warm* (``airflow.sdk``, ``DAG`` and
``BaseOperator`` imported before the timer starts: what one more DAG file costs a process that already parsed one).
Times are the child's CPU time (``time.process_time``): on a machine shared with other work, wall time swings by
seconds with the load while CPU time stays put; the cold wall time is shown too.

``added`` is a row's cold time minus the ``import airflow.sdk`` time of the same round, as a median over the rounds
(every round runs all rows back to back, so both sides of a difference see the same load). The target: trainops adds
at most 100 ms to ``import airflow.sdk``. Other figures are medians of ``--repeat`` rounds with the min-max range.

    .venv/bin/python bench/dag_parse.py [--repeat 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_ADDED_MS = 100.0

PLAIN_DAG = '''
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, BaseOperator, CronTriggerTimetable, Param

class Step(BaseOperator):
    template_fields = ("arguments",)
    def __init__(self, *, arguments=None, **kwargs):
        super().__init__(**kwargs)
        self.arguments = arguments

with DAG(dag_id="plain", schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 3 * * 1", timezone="UTC"),
         assets=Asset(name="data", uri="x-trainops://digits/training-data")), catchup=False,
         params={"backend": Param("local", enum=["local", "sagemaker"])}) as dag:
    tasks = [Step(task_id=name, arguments={"n": name}) for name in
             ("prepare", "stage", "train", "evaluate", "gate", "register")]
    for upstream, downstream in zip(tasks, tasks[1:]):
        upstream >> downstream
'''

AMAZON_DAG = '''
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, CronTriggerTimetable
from airflow.providers.amazon.aws.operators.sagemaker import (
    SageMakerProcessingOperator, SageMakerRegisterModelVersionOperator, SageMakerTrainingOperator,
)

ROLE = "arn:aws:iam::111122223333:role/SageMakerTrainingRole"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
TRAINING = {
    "TrainingJobName": "digits-{{ ts_nodash }}",
    "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
    "RoleArn": ROLE,
    "HyperParameters": {"epochs": "12", "sagemaker_program": "\\"train.py\\"",
                        "sagemaker_submit_directory": "\\"s3://bucket/code/sourcedir.tar.gz\\"",
                        "sagemaker_torch_distributed_enabled": "true"},
    "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://bucket/digits/train/", "S3DataDistributionType": "FullyReplicated"}}}],
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
    "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 1800},
}
PROCESSING = {
    "ProcessingJobName": "evaluate-{{ ts_nodash }}",
    "ProcessingResources": {"ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge",
                                              "VolumeSizeInGB": 30}},
    "AppSpecification": {"ImageUri": IMAGE, "ContainerEntrypoint": ["python3", "/opt/ml/processing/code/evaluate.py"]},
    "RoleArn": ROLE,
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}

with DAG(dag_id="amazon", schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable("0 3 * * 1", timezone="UTC"),
         assets=Asset(name="data", uri="x-trainops://digits/training-data")), catchup=False) as dag:
    train = SageMakerTrainingOperator(task_id="train", config=TRAINING, deferrable=True)
    evaluate = SageMakerProcessingOperator(task_id="evaluate", config=PROCESSING, deferrable=True)
    register = SageMakerRegisterModelVersionOperator(task_id="register", image_uri=IMAGE,
                                                     model_url="s3://bucket/output/model.tar.gz",
                                                     package_group_name="digits-classifier")
    train >> evaluate >> register
'''

WARM_PRELUDE = "import airflow.sdk\nfrom airflow.sdk import DAG, BaseOperator\n"


def child_code(target: str, warm: bool) -> str:
    """The child's program: optional warm-up, then time the import of ``target`` (a module name or a file)."""
    action = f"import {target}" if not target.endswith(".py") else f"runpy.run_path({target!r})"
    return textwrap.dedent(f"""
        import runpy, time
        {WARM_PRELUDE.replace(chr(10), '; ') if warm else ''}
        started, cpu = time.perf_counter(), time.process_time()
        {action}
        print(f"{{(time.process_time() - cpu) * 1000:.3f}} {{(time.perf_counter() - started) * 1000:.3f}}")
    """)


def measure_once(target: str, warm: bool, env: dict[str, str]) -> tuple[float, float]:
    """(CPU, wall) milliseconds of one fresh-interpreter import of ``target``."""
    done = subprocess.run([sys.executable, "-c", child_code(target, warm)], env=env, cwd=str(REPO),
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{target}: the child failed:\n{done.stderr[-3000:]}")
    cpu, wall = done.stdout.strip().splitlines()[-1].split()
    return float(cpu), float(wall)


def describe(samples: list[float]) -> str:
    return f"{statistics.median(samples):.0f} ({min(samples):.0f}-{max(samples):.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="fresh interpreters per row and column (default 9)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dag-parse-") as scratch:
        home = Path(scratch)
        env = dict(os.environ, AIRFLOW_HOME=str(home / "airflow"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                   AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"))
        subprocess.run([sys.executable, "-c", "import airflow.sdk"], env=env, check=True, capture_output=True)
        (home / "plain_dag.py").write_text(PLAIN_DAG)
        (home / "amazon_dag.py").write_text(AMAZON_DAG)
        rows = [
            ("import airflow.sdk", "airflow.sdk"),
            ("airflow.sdk DAG, same shape", str(home / "plain_dag.py")),
            ("dags/retrain_pipeline.py (trainops)", str(REPO / "dags" / "retrain_pipeline.py")),
            ("Amazon provider SageMaker operators", str(home / "amazon_dag.py")),
        ]
        cold: dict[str, list[float]] = {label: [] for label, _ in rows}
        wall: dict[str, list[float]] = {label: [] for label, _ in rows}
        warm: dict[str, list[float]] = {label: [] for label, target in rows if target.endswith(".py")}
        added: dict[str, list[float]] = {label: [] for label, _ in rows[1:]}
        # Rounds, not rows: each round runs every row once, back to back, so a row and the baseline it is compared
        # with see the same machine load (the "added" column is the median of per-round differences).
        for round_number in range(args.repeat):
            for label, target in rows:
                cpu, elapsed = measure_once(target, False, env)
                cold[label].append(cpu)
                wall[label].append(elapsed)
                if label in warm:
                    warm[label].append(measure_once(target, True, env)[0])
            for label in added:
                added[label].append(cold[label][-1] - cold[rows[0][0]][-1])
            print(f"round {round_number + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    print(f"DAG parse, a fresh interpreter per run; CPU milliseconds of the import (wall in the last column), "
          f"median (min-max) of {args.repeat} rounds\n")
    print("| DAG file | cold CPU | added to `import airflow.sdk` | warm CPU (airflow.sdk already loaded) | cold wall |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, _ in rows:
        extra = f"{statistics.median(added[label]):+.0f}" if label in added else ""
        print(f"| {label} | {describe(cold[label])} | {extra} | {describe(warm[label]) if label in warm else ''} "
              f"| {describe(wall[label])} |")
    trainops_added = statistics.median(added[rows[2][0]])
    verdict = "met" if trainops_added <= TARGET_ADDED_MS else "NOT met"
    print(f"\ntarget: trainops adds <= {TARGET_ADDED_MS:.0f} ms to `import airflow.sdk`: {trainops_added:+.0f} ms, "
          f"{verdict}")
    return 0 if trainops_added <= TARGET_ADDED_MS else 1


if __name__ == "__main__":
    sys.exit(main())
