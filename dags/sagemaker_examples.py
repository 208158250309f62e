"""Example DAGs: distributed training on SageMaker from the example job specs, each reviewed before it is submitted.

Three DAGs, one per way of distributing a job that the SageMaker guide describes:

- ``sagemaker_smddp_p4d``: SMDDP data parallelism on 2 x ml.p4d.24xlarge (``examples/specs/smddp-p4d.yaml``);
- ``sagemaker_smp_v2_p5``: SMP v2 (FSDP hybrid sharding + tensor parallelism) on ml.p5.48xlarge, spot
  (``examples/specs/smp-v2-p5.yaml``);
- ``sagemaker_torchrun_trn1_fsx``: torchrun on 2 x ml.trn1.32xlarge reading from FSx for Lustre
  (``examples/specs/torchrun-trn1-fsx.yaml``), with the S3 data imported into the file system first.

Each starts with ``render``: the exact CreateTrainingJob request, in the task log, with no AWS call (run it alone with
``airflow tasks test <dag_id> render``). ``train`` would then submit that very request (same job name) through the
``aws_default`` connection and wait in the triggerer; a retry of it re-attaches to the job instead of starting
another. They have no schedule: trigger them by hand once the role, buckets and file system in the specs are yours.
"""

from __future__ import annotations

from pathlib import Path

from trainops.operators.compat import DAG
from trainops.operators.render import RenderTrainingJobOperator
from trainops.operators.stage import StageDataOperator
from trainops.operators.training import DistributedTrainingOperator

SPECS = Path(__file__).resolve().parents[1] / "examples" / "specs"
AWS_CONN_ID = "aws_default"

#: dag id -> (spec file, what it shows)
EXAMPLES = {
    "sagemaker_smddp_p4d": ("smddp-p4d.yaml", "SMDDP data parallelism on 2 x ml.p4d.24xlarge"),
    "sagemaker_smp_v2_p5": ("smp-v2-p5.yaml", "SMP v2 model parallelism on ml.p5.48xlarge (spot)"),
    "sagemaker_torchrun_trn1_fsx": ("torchrun-trn1-fsx.yaml", "torchrun on 2 x ml.trn1.32xlarge, FSx for Lustre input"),
}


def example_dag(dag_id: str, spec_file: str, description: str) -> DAG:
    """One example DAG: render (dry run) -> [stage to FSx (deferrable)] -> train (deferrable)."""
    spec = str(SPECS / spec_file)
    with DAG(dag_id=dag_id, description=description, schedule=None, catchup=False,
             tags=["trainops", "sagemaker", "example"], doc_md=__doc__) as dag:
        render = RenderTrainingJobOperator(task_id="render", spec=spec, for_task_id="train")
        train = DistributedTrainingOperator(task_id="train", spec=spec, backend="sagemaker", deferrable=True,
                                            check_interval=60, aws_conn_id=AWS_CONN_ID)
        if "fsx" in spec_file:
            # The spec's channel reads /fsx1a2b3c/bert/train on fs-0123456789abcdef0: import it from S3 first.
            stage = StageDataOperator(task_id="stage_to_fsx", backend="sagemaker",
                                      source="s3://example-training-data/bert/train/",
                                      destination="fsx://fs-0123456789abcdef0/bert/train",
                                      aws_conn_id=AWS_CONN_ID, region_name="us-east-1",
                                      deferrable=True)  # the FSx import task is waited for in the triggerer
            render >> stage >> train
        else:
            render >> train
    return dag


for _dag_id, (_spec_file, _description) in EXAMPLES.items():
    globals()[_dag_id] = example_dag(_dag_id, _spec_file, _description)
