"""trainops' launch plan (`launch --dry-run`) against AWS's TensorFlow toolkit (sagemaker-tensorflow-training 20.5.0 on
sagemaker-training 4.8.3), contract by contract: parameter servers, MultiWorkerMirroredStrategy, MPI (Horovod-style)
and plain jobs on GPU and CPU types and one to three hosts, and heterogeneous clusters in both group orders.

goldens/launch_tensorflow.json holds what the toolkit's `training.train` did for each contract (generate.py
--only tf-launch, in the venv of build_oracle_venv.sh --tensorflow): its runner and command, the worker's TF_CONFIG,
the parameter server it started (cluster, task index) and the master a worker host waited for. No TensorFlow is needed.
"""

from __future__ import annotations

import pytest

from differential.compare import HERE, load, report
from differential.launch_compare import judge_launch, toolkit_summary, trainops_launch

GOLDEN = load(HERE / "goldens" / "launch_tensorflow.json")


def case(case_id: str) -> dict:
    return next(item for item in GOLDEN["cases"] if item["id"] == case_id)


def test_the_grid_covers_every_tensorflow_strategy_and_both_group_orders():
    assert GOLDEN["versions"] == {"sagemaker-tensorflow-training": "20.5.0", "sagemaker-training": "4.8.3"}
    ids = [item["id"] for item in GOLDEN["cases"]]
    assert len(ids) == len(set(ids)) >= 120
    for prefix in ("tf-parameter_server-", "tf-mwms-", "tf-mpi-", "tf-none-", "tf-hetero-mpi-cpus-first-",
                   "tf-hetero-mpi-gpus-first-"):
        assert any(item.startswith(prefix) for item in ids), prefix
    started = [item for item in GOLDEN["cases"] if item["toolkit"]["parameter_server"]]
    assert len(started) >= 20  # the oracle really starts parameter servers in the grid


def test_every_contract_launches_what_the_tensorflow_toolkit_launches_or_is_adjudicated():
    verdicts = [judge_launch(item) for item in GOLDEN["cases"]]
    assert not [verdict for verdict in verdicts if verdict.kind == "disagree"], report(verdicts)


@pytest.mark.parametrize("case_id, check", [
    # item 1: a parameter server on every host of a multi-host job, none on one host (and no TF_CONFIG there)
    ("tf-parameter_server-ml.p4d.24xlarge-2-algo-2",
     lambda ours: ours["parameter_server"] == {"cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223",
                                                                                             "algo-2:2223"],
                                                           "worker": ["algo-2:2222"]}, "task_index": 1}
     and ours["waits_for_master"] == "algo-1"),
    ("tf-parameter_server-ml.c5.xlarge-1-algo-1",
     lambda ours: ours["parameter_server"] is None and ours["tf_config"] is None),
    # item 2: MultiWorkerMirroredStrategy on 8890 with "environment": "cloud", one host included
    ("tf-mwms-ml.g5.12xlarge-1-algo-1",
     lambda ours: ours["tf_config"] == {"cluster": {"worker": ["algo-1:8890"]}, "environment": "cloud",
                                        "task": {"index": 0, "type": "worker"}}),
    # item 3: mpirun over the distribution's group only, from its first host, when the other group is listed first
    ("tf-hetero-mpi-cpus-first-algo-2",
     lambda ours: ours["mode"] == "mpirun" and ours["mpirun"] == {"host": "algo-2:8,algo-3:8", "np": "16"}),
    ("tf-hetero-mpi-cpus-first-algo-1", lambda ours: ours["mode"] == "plain"),
])
def test_issue_27_launch_items(case_id, check):
    ours = trainops_launch(case(case_id)).value
    assert check(ours), ours
    assert check(toolkit_summary(case(case_id))), "the oracle disagrees with the check itself"
