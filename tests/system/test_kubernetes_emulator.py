"""The kubernetes backend end to end on the API emulator (tests/support/k8s_api.py) with the stand-in Trainer
controller (tests/support/k8s_trainer.py) running each node's command on this machine with the PET_* variables:
issue 44 item 4's cases through the backend's Python API (a 2-node job completes with the contract checked on every
host, a failed rank's root cause, a re-attach, another owner's object, a stop, a lost node, the deadline, the
attempts engine's retry, Kueue's suspension), on one emulated cluster for the module. The same engine from the
command line, Airflow and KFP: test_kubernetes_front_ends.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.k8s_api import HYPERPODJOBS, PODS, TRAINJOBS, Store, api_server
from support.k8s_trainer import FakeTrainer

from trainops.backends import get_backend
from trainops.backends.kubernetes.vocabulary import KUBERNETES
from trainops.backends.states import JobStatus
from trainops.backends.vocabulary import classify_result
from trainops.errors import SpecError
from trainops.spec.job import JobSpec
from trainops.steps.attempts import train_in_attempts

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, FakeTrainer, Any]]:
    """One emulated cluster for the module's tests, each job under a name of its own."""
    directory = tmp_path_factory.mktemp("k8s")
    shared = directory / "shared"
    shared.mkdir(mode=0o700)
    with api_server(directory) as (store, kubeconfig):
        trainer = FakeTrainer(store, quotas={"team-a": 2})  # Kueue's LocalQueue team-a: 2 nodes
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
    handle = backend.submit(_spec(tmp_path), "contract-1", log=lines.append)
    result = backend.wait(handle, log=lines.append)
    assert result.status is JobStatus.COMPLETED, (result, lines)
    assert [env["PET_NODE_RANK"] for env in trainer.environments["contract-1"]] == ["0", "1"]
    logged = "\n".join(lines)
    assert "[algo-1]" in logged and "trained on algo-1 of 2" in logged
    assert "[algo-2]" in logged and "trained on algo-2 of 2" in logged
    [made] = [job for job in store.listed(TRAINJOBS, "ml") if job["metadata"]["name"].startswith("contract-1")]
    assert made["spec"]["trainer"]["numNodes"] == 2
    assert "s3cr3t" not in json.dumps(made)
    shared = Path(backend.cluster.shared_dir) / "jobs" / "contract-1" / "hosts"
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
    result = backend.wait(backend.submit(spec, "failed-1"))
    assert result.status is JobStatus.FAILED
    assert "bad learning rate" in str(result.failure_reason), result
    verdict = classify_result(result.to_dict())
    assert verdict is not None and verdict.failure_class == "user"


def test_a_rerun_reattaches_to_the_one_train_job(cluster, tmp_path: Path) -> None:
    store, _, backend = cluster
    first = backend.submit(_spec(tmp_path), "rerun-1")
    assert backend.wait(first).status is JobStatus.COMPLETED
    again = backend.submit(_spec(tmp_path), "rerun-1", if_exists="reattach")
    assert not again.created
    assert [job["metadata"]["name"] for job in store.listed(TRAINJOBS, "ml")
            if job["metadata"]["name"].startswith("rerun-1")] == ["rerun-1"]


def test_another_owners_train_job_is_refused_and_left_alone(cluster, tmp_path: Path) -> None:
    store, _, backend = cluster
    theirs = store.put(TRAINJOBS, "ml", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                         "metadata": {"name": "theirs-1", "labels": {"team": "b"}},
                                         "spec": {"runtimeRef": {"name": "x"}, "trainer": {"numNodes": 0,
                                                                                          "numProcPerNode": 1,
                                                                                          "command": ["true"]}}})
    with pytest.raises(SpecError) as refused:
        backend.submit(_spec(tmp_path), "theirs-1")
    assert "job_name" in str(refused.value)
    assert store.get(TRAINJOBS, "ml", "theirs-1")["metadata"]["uid"] == theirs["metadata"]["uid"]


def test_stop_records_the_reason_and_leaves_no_pod(cluster, tmp_path: Path) -> None:
    store, trainer, backend = cluster
    handle = backend.submit(_spec(tmp_path, RUN_UNTIL_STOPPED="1"), "stop-1")
    _until_both_hosts_trained(backend, handle)
    assert "deleted" in backend.stop(handle, "budget: the run's max_cost_usd was reached")
    assert store.listed(PODS, "ml", "jobset.sigs.k8s.io/jobset-name=stop-1") == []
    assert store.get(TRAINJOBS, "ml", "stop-1") is None


def _until_both_hosts_trained(backend: Any, handle: Any) -> None:
    seen: list[str] = []
    for line in backend.logs(handle, follow=True):
        seen.append(line)
        if sum("trained on" in item for item in seen) == 2:
            return


def test_a_lost_node_is_an_infrastructure_failure(cluster, tmp_path: Path) -> None:
    _, trainer, backend = cluster
    handle = backend.submit(_spec(tmp_path, RUN_UNTIL_STOPPED="1"), "lost-1")
    _until_both_hosts_trained(backend, handle)
    trainer.lose_node("lost-1", 1)
    result = backend.wait(handle)
    assert result.status is JobStatus.FAILED and result.details["lost_host"].startswith("algo-2")
    assert result.secondary_status == "NodeLost"
    verdict = classify_result(result.to_dict())  # the result names its backend: the kubernetes engine's rules
    assert verdict is not None and verdict.failure_class == "infrastructure" and verdict.retryable
    assert verdict.source == "secondary_status" and verdict.why in {rule.why for rule in KUBERNETES.rules}


def test_the_deadline_is_a_timeout(cluster, tmp_path: Path) -> None:
    _, _, backend = cluster
    handle = backend.submit(_spec(tmp_path, max_run=2, RUN_UNTIL_STOPPED="1"), "deadline-1")
    result = backend.wait(handle)
    assert result.status is JobStatus.FAILED and result.secondary_status == "DeadlineExceeded"
    verdict = classify_result(result.to_dict())
    assert verdict is not None and verdict.failure_class == "timeout"
    assert verdict.source == "secondary_status" and verdict.why in {rule.why for rule in KUBERNETES.rules}


#: A job whose first attempt runs until a node is lost (the marker does not exist when it starts) and whose retry,
#: started after the marker was made, trains and ends.
LOSES_A_NODE_ONCE = """import os, time
host = os.environ["SM_CURRENT_HOST"]
lose = os.path.exists(os.environ["LOST_ONCE"]) is False
print("trained on", host, flush=True)
while lose:
    time.sleep(0.2)
"""


def test_a_lost_node_is_retried_by_the_attempts_engine(cluster, tmp_path: Path) -> None:
    """The attempts engine (as `trainops run --retries` drives it) classifies the lost node by the engine's rules
    (infrastructure), starts ``<name>-2``, which completes; the run's cost is unknown (the engine has no price)."""
    store, trainer, backend = cluster
    marker = tmp_path / "node-lost-once"
    spec = _spec(tmp_path, LOST_ONCE=str(marker))
    (Path(spec.source_dir) / "train.py").write_text(LOSES_A_NODE_ONCE)
    losses: list[BaseException] = []

    def lose_a_node_of_the_first_attempt() -> None:
        """Once the first attempt's TrainJob runs on both hosts, its node 1 is lost (the marker made first, so the
        retry's script ends)."""
        try:
            _wait_for_train_job(store, "retried-1")
            _until_both_hosts_trained(backend, backend.handle("retried-1"))
            marker.write_text("lost")
            trainer.lose_node("retried-1", 1)
        except BaseException as error:  # noqa: BLE001 - the test reports it
            losses.append(error)

    losing = threading.Thread(target=lose_a_node_of_the_first_attempt, daemon=True)
    losing.start()
    lines: list[str] = []
    result = train_in_attempts(backend, spec, "retried-1", retries="infrastructure=1,backoff_seconds=0",
                               log=lines.append)
    losing.join(timeout=60)
    assert not losses, losses
    assert result["status"] == "Completed" and result["job_name"] == "retried-1-2", result
    first, second = result["attempts"]
    assert (first["job_name"], first["failure_class"], first["retried_on"]) == ("retried-1", "infrastructure",
                                                                                 "infrastructure")
    assert "NodeLost" in first["evidence"] and second["status"] == "Completed"
    assert result["cost"]["total"] is None  # no price: the cost is unknown, never SageMaker's list price


def _wait_for_train_job(store: Store, name: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while store.get(TRAINJOBS, "ml", name) is None:
        assert time.monotonic() < deadline, f"no TrainJob {name} within {limit:.0f} s"
        time.sleep(0.1)


def test_kueue_holds_a_job_suspended_until_its_queue_has_the_nodes_then_it_runs(cluster, tmp_path: Path) -> None:
    """Two 2-node jobs in a LocalQueue of 2 nodes: the second is suspended (waiting, never failed: InProgress,
    ``Suspended``, no pod) while the first runs, and runs once the first ended and gave its nodes back."""
    store, trainer, backend = cluster
    release = tmp_path / "release"
    spec = _spec(tmp_path, RELEASE=str(release))
    (Path(spec.source_dir) / "train.py").write_text(
        "import os, time\nprint('trained on', os.environ['SM_CURRENT_HOST'], flush=True)\n"
        "while not os.path.exists(os.environ['RELEASE']):\n    time.sleep(0.1)\n")
    first = backend.submit(spec, "queued-1", options={"queue": "team-a"}, detached=True)
    _until_both_hosts_trained(backend, first)
    second = backend.submit(spec, "queued-2", options={"queue": "team-a"}, detached=True)
    _wait_for(lambda: store.get(TRAINJOBS, "ml", "queued-2")["spec"].get("suspend") is True, "queued-2 suspended")
    waiting = backend.describe(second)
    assert (waiting.status, waiting.secondary_status) == (JobStatus.IN_PROGRESS, "Suspended"), waiting
    assert "waiting for the queue" in waiting.details["waiting"]
    assert not [pod for pod in store.listed(PODS, "ml") if pod["metadata"]["name"].startswith("queued-2")]
    release.write_text("go")
    assert backend.wait(first).status is JobStatus.COMPLETED
    assert backend.wait(second).status is JobStatus.COMPLETED  # admitted once queued-1 gave its 2 nodes back
    assert trainer.started["queued-2"] > trainer.started["queued-1"]
    assert store.get(TRAINJOBS, "ml", "queued-2")["spec"]["suspend"] is False


def _wait_for(condition: Any, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"waited {limit:.0f} s for {what}"
        time.sleep(0.05)


def test_a_two_node_hyperpod_job_completes_with_the_contract_on_every_host(cluster, tmp_path: Path) -> None:
    """The hyperpod flavour end to end: a HyperPodPyTorchJob, whose pods the stand-in operator runs as HyperPod's
    launcher runs its worker (GROUP_RANK, not Trainer's PET_* variables), completes with the SageMaker contract
    checked on both hosts (the script's assertions), both hosts' logs and host 1's model."""
    store, trainer, backend = cluster
    lines: list[str] = []
    handle = backend.submit(_spec(tmp_path), "hyperpod-1", options={"flavour": "hyperpod"}, log=lines.append)
    result = backend.wait(handle, log=lines.append)
    assert result.status is JobStatus.COMPLETED, (result, lines)
    assert [env["GROUP_RANK"] for env in trainer.environments["hyperpod-1"]] == ["0", "1"]
    assert not any(key.startswith("PET_") for env in trainer.environments["hyperpod-1"] for key in env)
    logged = "\n".join(lines)
    assert "HyperPodPyTorchJob hyperpod-1" in logged
    assert "[algo-1]" in logged and "trained on algo-1 of 2" in logged
    assert "[algo-2]" in logged and "trained on algo-2 of 2" in logged
    [made] = [job for job in store.listed(HYPERPODJOBS, "ml") if job["metadata"]["name"] == "hyperpod-1"]
    assert made["spec"]["replicaSpecs"][0]["replicas"] == 2 and "s3cr3t" not in json.dumps(made)
    assert store.get(TRAINJOBS, "ml", "hyperpod-1") is None
    assert [pod["metadata"]["name"] for pod in store.listed(PODS, "ml", "HPJob=hyperpod-1")] == [
        "hyperpod-1-pod-0", "hyperpod-1-pod-1"]
    shared = Path(backend.cluster.shared_dir) / "jobs" / "hyperpod-1" / "hosts"
    for host in ("algo-1", "algo-2"):
        assert (shared / host / "model" / f"{host}.txt").read_text() == host
    assert result.model_artifact and result.model_artifact.endswith("model.tar.gz")
    assert backend.status_of("hyperpod-1") is JobStatus.COMPLETED  # by name alone: the record keeps the flavour


def test_a_hyperpod_rerun_reattaches_another_owners_is_refused_and_stop_leaves_no_pod(cluster,
                                                                                      tmp_path: Path) -> None:
    store, _, backend = cluster
    hyperpod = {"flavour": "hyperpod"}
    spec = _spec(tmp_path, RUN_UNTIL_STOPPED="1")
    handle = backend.submit(spec, "hyperpod-2", options=hyperpod)
    _until_both_hosts_trained(backend, handle)
    again = backend.submit(spec, "hyperpod-2", options=hyperpod, if_exists="reattach")
    assert not again.created
    assert [job["metadata"]["name"] for job in store.listed(HYPERPODJOBS, "ml")
            if job["metadata"]["name"].startswith("hyperpod-2")] == ["hyperpod-2"]
    assert backend.describe(handle).status is JobStatus.IN_PROGRESS
    assert "deleted" in backend.stop(handle, "budget: the run's max_cost_usd was reached")
    assert store.listed(PODS, "ml", "HPJob=hyperpod-2") == []
    assert store.get(HYPERPODJOBS, "ml", "hyperpod-2") is None
    stopped = backend.describe(handle)
    assert stopped.status is JobStatus.STOPPED and "max_cost_usd" in str(stopped.failure_reason)
    store.put(HYPERPODJOBS, "ml", {"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
                                   "metadata": {"name": "theirs-2", "labels": {"team": "b"}},
                                   "spec": {"replicaSpecs": []}})
    with pytest.raises(SpecError) as refused:
        backend.submit(spec, "theirs-2", options=hyperpod)
    assert "job_name" in str(refused.value) and "HyperPodPyTorchJob" in str(refused.value)
    assert store.get(HYPERPODJOBS, "ml", "theirs-2")["spec"] == {"replicaSpecs": []}
