"""TrainJobs through the API server with the official client, against the emulator of tests/support/k8s_api.py
(issue 44 item 3: idempotent and owned create, failed looks, foreground delete)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.k8s_api import PODS, TRAINJOBS, Store, api_server

from trainops.backends.kubernetes.cluster import JOBSET_LABEL, TrainJobs, open_client
from trainops.backends.kubernetes.options import KubernetesOptions
from trainops.backends.kubernetes.preflight import notes
from trainops.backends.kubernetes.render import TOKEN_ANNOTATION, train_job
from trainops.backends.kubernetes.settings import KubernetesCluster
from trainops.backends.looks import is_failed_look
from trainops.errors import SpecError
from trainops.spec.job import JobSpec

CLUSTER = {"shared_dir": "/fsx/t", "shared_pvc": "fsx"}


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[Store, TrainJobs]]:
    with api_server(tmp_path) as (store, kubeconfig):
        connection = KubernetesCluster(kubeconfig=str(kubeconfig), **CLUSTER).connection({})
        assert (connection.context, connection.namespace) == ("emulator", "ml")
        yield store, TrainJobs(open_client(connection), connection.namespace)


def _body(name: str, token: str) -> dict[str, Any]:
    spec = JobSpec(entry_point="t.py", instance_type="ml.g5.xlarge", instance_count=2, image_uri="i")
    return train_job(spec, name, KubernetesOptions(), KubernetesCluster(**CLUSTER), "ml", token)


def test_create_then_get(emulator: tuple[Store, TrainJobs]) -> None:
    store, jobs = emulator
    made, created = jobs.create(_body("digits-1", "token-a"), "token-a")
    assert created and made["metadata"]["uid"]
    assert jobs.get("digits-1")["metadata"]["annotations"][TOKEN_ANNOTATION] == "token-a"  # type: ignore[index]
    assert jobs.get("digits-2") is None
    assert store.get(TRAINJOBS, "ml", "digits-1") is not None


def test_a_create_answered_409_follows_this_submissions_object(emulator: tuple[Store, TrainJobs]) -> None:
    store, jobs = emulator
    first, _ = jobs.create(_body("digits-1", "token-a"), "token-a")
    again, created = jobs.create(_body("digits-1", "token-a"), "token-a")
    assert not created and again["metadata"]["uid"] == first["metadata"]["uid"]
    assert len(store.listed(TRAINJOBS, "ml")) == 1


def test_another_owners_object_is_refused_and_left_alone(emulator: tuple[Store, TrainJobs]) -> None:
    store, jobs = emulator
    theirs = store.put(TRAINJOBS, "ml", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                         "metadata": {"name": "digits-1", "labels": {"team": "b"}},
                                         "spec": {"runtimeRef": {"name": "torch-distributed"}}})
    with pytest.raises(SpecError) as refused:
        jobs.create(_body("digits-1", "token-a"), "token-a")
    assert "job_name" in str(refused.value) and "never follows" in str(refused.value)
    assert store.get(TRAINJOBS, "ml", "digits-1") == theirs
    assert ("DELETE", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/digits-1") not in store.requests


def test_another_trainops_submissions_object_is_refused_too(emulator: tuple[Store, TrainJobs]) -> None:
    _, jobs = emulator
    jobs.create(_body("digits-1", "token-a"), "token-a")
    with pytest.raises(SpecError) as refused:
        jobs.create(_body("digits-1", "token-b"), "token-b")
    assert "another trainops submission" in str(refused.value)


def test_pods_logs_and_a_foreground_delete(emulator: tuple[Store, TrainJobs]) -> None:
    store, jobs = emulator
    jobs.create(_body("digits-1", "token-a"), "token-a")
    for index in range(2):
        store.put(PODS, "ml", {"metadata": {"name": f"digits-1-node-0-{index}", "labels": {
            JOBSET_LABEL: "digits-1"}}, "status": {"phase": "Running"}})
    store.put(PODS, "ml", {"metadata": {"name": "other-node-0-0", "labels": {JOBSET_LABEL: "other"}}})
    store.append_log("ml", "digits-1-node-0-1", "epoch 1\n")
    assert [pod["metadata"]["name"] for pod in jobs.pods("digits-1")] == ["digits-1-node-0-0", "digits-1-node-0-1"]
    assert jobs.log("digits-1-node-0-1") == "epoch 1\n"
    assert jobs.delete("digits-1") is True
    assert jobs.get("digits-1") is None and jobs.pods("digits-1") == []
    assert [pod["metadata"]["name"] for pod in store.listed(PODS, "ml")] == ["other-node-0-0"]
    assert jobs.delete("digits-1") is False


def test_an_unreachable_server_is_a_failed_look(tmp_path: Path) -> None:
    with api_server(tmp_path) as (_, kubeconfig):
        connection = KubernetesCluster(kubeconfig=str(kubeconfig)).connection({})
    jobs = TrainJobs(open_client(connection), "ml")  # the server is gone: its port refuses connections
    with pytest.raises(Exception) as failed:
        jobs.get("digits-1")
    assert is_failed_look(failed.value)


def _healthy(store: Store) -> None:
    store.paths.update({
        "/api/v1/namespaces/ml": {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "ml"}},
        "/apis/trainer.kubeflow.org/v1alpha1": {"kind": "APIResourceList", "groupVersion":
                                                "trainer.kubeflow.org/v1alpha1", "resources": [
            {"name": "trainjobs", "singularName": "trainjob", "namespaced": True, "kind": "TrainJob",
             "verbs": ["create", "get", "list", "delete"]}]},
        "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed": {
            "kind": "ClusterTrainingRuntime", "metadata": {"name": "torch-distributed"}},
        "/api/v1/namespaces/ml/persistentvolumeclaims/fsx": {"kind": "PersistentVolumeClaim",
                                                            "metadata": {"name": "fsx"},
                                                            "status": {"phase": "Bound"}},
        "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/localqueues/team-a": {"kind": "LocalQueue",
                                                                         "metadata": {"name": "team-a"}},
    })


def test_the_preflight_finds_nothing_on_a_ready_cluster(emulator: tuple[Store, TrainJobs]) -> None:
    store, jobs = emulator
    _healthy(store)
    assert notes(jobs.custom.api_client, "ml", "torch-distributed", "fsx", "team-a") == []
    assert all(method == "GET" for method, _ in store.requests)  # read-only


def test_the_preflight_notes_what_is_missing_and_what_it_could_not_read(emulator: tuple[Store, TrainJobs]
                                                                         ) -> None:
    store, jobs = emulator
    _healthy(store)
    store.paths["/api/v1/namespaces/ml/persistentvolumeclaims/fsx"]["status"]["phase"] = "Pending"
    store.paths["/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/localqueues/team-a"] = "forbidden"
    found = notes(jobs.custom.api_client, "ml", "torch-gpu", "fsx", "team-a")
    assert any("no ClusterTrainingRuntime 'torch-gpu'" in note for note in found), found
    assert any("fsx is Pending" in note for note in found), found
    assert any("could not read Kueue LocalQueue team-a (403" in note for note in found), found
    del store.paths["/apis/trainer.kubeflow.org/v1alpha1"]
    assert any("does not serve trainer.kubeflow.org/v1alpha1" in note
               for note in notes(jobs.custom.api_client, "ml", "torch-distributed", None, None))
