"""The kubernetes backend end to end on the API emulator (tests/support/k8s_api.py) with the stand-in Trainer
controller (tests/support/k8s_trainer.py) running each node's command on this machine with the PET_* variables:
issue 44 item 4, the first of its cases (a 2-node job completes with the contract checked on every host), plus a
re-attach, another owner's object and a stop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.k8s_api import PODS, TRAINJOBS, Store, api_server
from support.k8s_trainer import FakeTrainer

from trainops.backends import get_backend
from trainops.backends.failures import classify_result
from trainops.backends.states import JobStatus
from trainops.errors import SpecError
from trainops.spec.job import JobSpec

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

TRAIN = """import json, os, sys, time
host, hosts = os.environ["SM_CURRENT_HOST"], json.loads(os.environ["SM_HOSTS"])
assert hosts == ["algo-1", "algo-2"], hosts
assert json.loads(os.environ["SM_HPS"]) == {"epochs": 2}, os.environ["SM_HPS"]
assert os.environ["MODE"] == "k8s"
assert os.environ["WANDB_API_KEY"] == "s3cr3t"  # from the host's environment file, not the TrainJob
with open(os.path.join(os.environ["SM_MODEL_DIR"], host + ".txt"), "w") as out:
    out.write(host)
print("trained on", host, "of", len(hosts), flush=True)
if os.environ.get("RUN_UNTIL_STOPPED"):
    while True:
        time.sleep(0.2)
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Store, FakeTrainer, Any]]:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    with api_server(tmp_path) as (store, kubeconfig):
        trainer = FakeTrainer(store)
        try:
            backend = get_backend("kubernetes", options={"kubeconfig": str(kubeconfig), "shared_dir": str(shared),
                                                        "shared_pvc": "shared", "poll_seconds": 0.2})
            yield store, trainer, backend
        finally:
            trainer.close()


def _spec(tmp_path: Path, max_run: int = 600, **environment: str) -> JobSpec:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text(TRAIN)
    return JobSpec(entry_point="train.py", source_dir=str(code), instance_type="ml.m5.xlarge", instance_count=2,
                   image_uri="example.org/python:3", hyperparameters={"epochs": 2},
                   environment={"MODE": "k8s", "WANDB_API_KEY": "s3cr3t", **environment}, max_run=max_run)


def test_a_two_node_job_completes_with_the_contract_on_every_host(cluster, tmp_path: Path) -> None:
    store, trainer, backend = cluster
    lines: list[str] = []
    handle = backend.submit(_spec(tmp_path), "digits-1", log=lines.append)
    result = backend.wait(handle, log=lines.append)
    assert result.status is JobStatus.COMPLETED, (result, lines)
    assert [env["PET_NODE_RANK"] for env in trainer.environments["digits-1"]] == ["0", "1"]
    logged = "\n".join(lines)
    assert "[algo-1]" in logged and "trained on algo-1 of 2" in logged
    assert "[algo-2]" in logged and "trained on algo-2 of 2" in logged
    [made] = store.listed(TRAINJOBS, "ml")
    assert made["spec"]["trainer"]["numNodes"] == 2
    assert "s3cr3t" not in json.dumps(made)
    shared = Path(backend.cluster.shared_dir) / "jobs" / "digits-1" / "hosts"
    for host in ("algo-1", "algo-2"):
        assert (shared / host / "model" / f"{host}.txt").read_text() == host
    import tarfile

    assert result.model_artifact and result.model_artifact.endswith("model.tar.gz")
    with tarfile.open(result.model_artifact) as archive:  # host 1's model directory, as SageMaker keeps it
        assert "algo-1.txt" in [Path(member).name for member in archive.getnames()]


def test_a_failed_rank_is_the_users_with_the_runtimes_root_cause(cluster, tmp_path: Path) -> None:
    _, _, backend = cluster
    spec = _spec(tmp_path)
    (Path(spec.source_dir) / "train.py").write_text("import sys\nraise SystemExit('bad learning rate: -1')\n")
    result = backend.wait(backend.submit(spec, "digits-1"))
    assert result.status is JobStatus.FAILED
    assert "bad learning rate" in str(result.failure_reason), result
    verdict = classify_result(result.to_dict())
    assert verdict is not None and verdict.failure_class == "user"


def test_a_rerun_reattaches_to_the_one_train_job(cluster, tmp_path: Path) -> None:
    store, _, backend = cluster
    first = backend.submit(_spec(tmp_path), "digits-1")
    assert backend.wait(first).status is JobStatus.COMPLETED
    again = backend.submit(_spec(tmp_path), "digits-1", if_exists="reattach")
    assert not again.created
    assert len(store.listed(TRAINJOBS, "ml")) == 1


def test_another_owners_train_job_is_refused_and_left_alone(cluster, tmp_path: Path) -> None:
    store, _, backend = cluster
    theirs = store.put(TRAINJOBS, "ml", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                         "metadata": {"name": "digits-1", "labels": {"team": "b"}},
                                         "spec": {"runtimeRef": {"name": "x"}, "trainer": {"numNodes": 0,
                                                                                          "numProcPerNode": 1,
                                                                                          "command": ["true"]}}})
    with pytest.raises(SpecError) as refused:
        backend.submit(_spec(tmp_path), "digits-1")
    assert "job_name" in str(refused.value)
    assert store.get(TRAINJOBS, "ml", "digits-1")["metadata"]["uid"] == theirs["metadata"]["uid"]


def test_stop_records_the_reason_and_leaves_no_pod(cluster, tmp_path: Path) -> None:
    store, trainer, backend = cluster
    handle = backend.submit(_spec(tmp_path, RUN_UNTIL_STOPPED="1"), "digits-1")
    _until_both_hosts_trained(backend, handle)
    assert "deleted" in backend.stop(handle, "budget: the run's max_cost_usd was reached")
    assert store.listed(PODS, "ml") == [] and store.get(TRAINJOBS, "ml", "digits-1") is None


def _until_both_hosts_trained(backend: Any, handle: Any) -> None:
    seen: list[str] = []
    for line in backend.logs(handle, follow=True):
        seen.append(line)
        if sum("trained on" in item for item in seen) == 2:
            return


def test_a_lost_node_is_an_infrastructure_failure(cluster, tmp_path: Path) -> None:
    _, trainer, backend = cluster
    handle = backend.submit(_spec(tmp_path, RUN_UNTIL_STOPPED="1"), "digits-1")
    _until_both_hosts_trained(backend, handle)
    trainer.lose_node("digits-1", 1)
    result = backend.wait(handle)
    assert result.status is JobStatus.FAILED and result.details["host_lost"].startswith("algo-2")
    verdict = classify_result(result.to_dict())
    assert verdict is not None and verdict.failure_class == "infrastructure" and verdict.retryable


def test_the_deadline_is_a_timeout(cluster, tmp_path: Path) -> None:
    _, _, backend = cluster
    handle = backend.submit(_spec(tmp_path, max_run=2, RUN_UNTIL_STOPPED="1"), "digits-1")
    result = backend.wait(handle)
    assert result.status is JobStatus.FAILED and result.secondary_status == "DeadlineExceeded"
    verdict = classify_result(result.to_dict())
    assert verdict is not None and verdict.failure_class == "timeout"
