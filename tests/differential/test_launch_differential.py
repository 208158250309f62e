"""trainops' launch plan (`launch --dry-run`) against AWS's PyTorch toolkit (sagemaker-pytorch-training 3.0.0 on
sagemaker-training 5.1.4), contract by contract.

goldens/launch.json holds what the toolkit's `training.train` chose and its runner's command builder returned for
each container contract (generate.py, in the oracle venv); this test never needs the toolkit.
"""

from __future__ import annotations

import pytest

from differential.compare import LAUNCH_GOLDEN, load, report
from differential.launch_compare import judge_launch, toolkit_summary, trainops_launch

GOLDEN = load(LAUNCH_GOLDEN)


def test_the_grid_covers_every_runner():
    assert len(GOLDEN["cases"]) >= 250
    assert sum(case["id"].startswith("hetero-") for case in GOLDEN["cases"]) == 30  # 5 distributions x 2 orders x 3
    assert GOLDEN["versions"]["sagemaker-training"].startswith("5.1")
    runners = {case["toolkit"]["runner"] for case in GOLDEN["cases"]}
    assert runners == {"Process", "TorchDistributed", "MPI", "SMDataParallel"}


def test_every_contract_launches_what_the_toolkit_launches_or_is_adjudicated():
    verdicts = [judge_launch(case) for case in GOLDEN["cases"]]
    assert not [verdict for verdict in verdicts if verdict.kind == "disagree"], report(verdicts)


@pytest.mark.parametrize("case_id, checks", [
    # toolkit-internal hyperparameters never reach the script; mp_parameters does, as the toolkit passes it
    ("smp_v2-ml.p4d.24xlarge-1-algo-1", lambda ours: "--mp_parameters" in ours["user_args"]
     and "_tuning_objective_metric" not in " ".join(ours["user_args"])),
    # SM_FRAMEWORK_PARAMS carries the distribution flags
    ("smddp-ml.p4d.24xlarge-2-algo-1",
     lambda ours: ours["script_env"]["SM_FRAMEWORK_PARAMS"]["sagemaker_distributed_dataparallel_enabled"] is True),
    # NCCL_SOCKET_IFNAME on a single-host CPU job too
    ("none-ml.c5.xlarge-1-algo-1", lambda ours: ours["rank_env"]["NCCL_SOCKET_IFNAME"] == "eth0"),
    # MPI and torch_distributed both enabled: mpirun, as the toolkit checks MPI first
    ("mpi_and_torch_distributed-ml.p4d.24xlarge-2-algo-1", lambda ours: ours["mode"] == "mpirun"),
    # processes_per_host from the distribution overrides the GPU count; mpirun -np follows it
    ("mpi_ppn-ml.p4d.24xlarge-2-algo-1", lambda ours: ours["processes_per_host"] == 2
     and ours["mpirun"]["np"] == "4"),
    # trn2: one process per logical NeuronCore
    ("torch_distributed-ml.trn2.48xlarge-2-algo-2", lambda ours: ours["torchrun"]["nproc_per_node"] == "64"),
    # FI_PROVIDER=efa only where SageMaker attaches EFA: not on a single-GPU g5
    ("torch_distributed-ml.g5.xlarge-2-algo-1", lambda ours: "FI_PROVIDER" not in ours["rank_env"]),
    # issue 27 item 3, heterogeneous clusters: mpirun spans the distribution's group only (2 x 8, not 3 hosts)...
    ("hetero-mpi-gpus-first-algo-1", lambda ours: ours["mpirun"] == {"host": "algo-1:8,algo-2:8", "np": "16"}),
    # ... from its first host when the other group is listed first; the data-loading host runs the script itself
    ("hetero-mpi-cpus-first-algo-2", lambda ours: ours["mode"] == "mpirun"
     and ours["mpirun"] == {"host": "algo-2:8,algo-3:8", "np": "16"}),
    ("hetero-mpi-cpus-first-algo-1", lambda ours: ours["mode"] == "plain"),
    ("hetero-torch_distributed-cpus-first-algo-3", lambda ours: ours["torchrun"]["nnodes"] == "2"
     and ours["torchrun"]["master_addr"] == "algo-2" and ours["torchrun"]["node_rank"] == "1"),
    ("hetero-smddp-cpus-first-algo-3", lambda ours: ours["mode"] == "mpi_worker"),
    # issue 36: the SDK's processes-per-host setting for every launcher the toolkit gives it to: torchrun's
    # --nproc_per_node (16 of a trn1's 32 NeuronCores, 4 of a p4d's 8 GPUs), SMDDP's and pytorchddp's mpirun
    ("ppn-torch_distributed-ml.trn1.32xlarge-2-algo-2", lambda ours: ours["torchrun"]["nproc_per_node"] == "16"),
    ("ppn-torch_distributed-ml.p4d.24xlarge-2-algo-1", lambda ours: ours["torchrun"]["nproc_per_node"] == "4"),
    ("ppn-smddp_torchrun-ml.p4d.24xlarge-2-algo-2", lambda ours: ours["torchrun"]["nproc_per_node"] == "4"),
    ("ppn-smp_v2-ml.p4d.24xlarge-1-algo-1", lambda ours: ours["torchrun"]["nproc_per_node"] == "4"),
    ("ppn-smddp-ml.p4d.24xlarge-2-algo-1", lambda ours: ours["mpirun"] == {"host": "algo-1:4,algo-2:4", "np": "8"}),
    ("ppn-pytorchddp-ml.p4d.24xlarge-2-algo-1", lambda ours: ours["mpirun"]["np"] == "8"),
    ("ppn-torch_distributed-ml.c5.xlarge-1-algo-1", lambda ours: ours["torchrun"]["nproc_per_node"] == "2"),
    # torch_distributed on instance groups as the SDK sends it (no group named in the hyperparameters): the toolkit
    # runs torchrun within each host's own group, the data-loading host on its own
    ("sdk-hetero-torch_distributed-cpus-first-algo-1", lambda ours: ours["mode"] == "torchrun"
     and ours["torchrun"]["nnodes"] == "1"),
    ("sdk-hetero-torch_distributed-cpus-first-algo-3", lambda ours: ours["torchrun"]["master_addr"] == "algo-2"
     and ours["torchrun"]["nnodes"] == "2"),
])
def test_issue_14_launch_items(case_id, checks):
    case = next(case for case in GOLDEN["cases"] if case["id"] == case_id)
    ours = trainops_launch(case).value
    assert checks(ours), ours
    assert checks(toolkit_summary(case)), "the oracle disagrees with the check itself"
