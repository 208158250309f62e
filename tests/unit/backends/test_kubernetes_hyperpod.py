"""The kubernetes backend's hyperpod flavour (issue 44 item 2): the HyperPodPyTorchJob `trainops render --backend
kubernetes -o flavour=hyperpod` prints, field by field; what a node works out from HyperPod's launcher; a
HyperPodPyTorchJob's conditions in trainops' words. The object against sagemaker-hyperpod 3.12.0's published model:
tests/system/test_kubernetes_hyperpod_model.py; a job run end to end on the emulator: test_kubernetes_emulator.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from kubernetes_objects import shared_backend, spec_of

from trainops.backends.kubernetes.hyperpod import INSTANCE_TYPE_LABEL
from trainops.backends.kubernetes.node import NodeError, hyperpod_node_of, node_here
from trainops.backends.kubernetes.options import DEFAULT_MAX_RETRY, KubernetesOptions
from trainops.backends.kubernetes.render import EFA, GPU, NEURON, TOKEN_ANNOTATION
from trainops.backends.kubernetes.status import standing
from trainops.backends.states import JobStatus
from trainops.cli import main
from trainops.errors import SpecError
from trainops.spec.retries import RetryBudgets
from trainops.spec.secrets import MASK

HYPERPOD = {"flavour": "hyperpod"}

_spec, _backend = spec_of, shared_backend


def _pod(rendered: dict) -> dict:
    [replica] = rendered["spec"]["replicaSpecs"]
    pod: dict = replica["template"]["spec"]
    return pod


def test_the_job_carries_the_spec_as_the_hyperpod_cli_lays_it_out() -> None:
    rendered = _backend().render_request(_spec(hyperparameters={"epochs": 3}, environment={"MODE": "fast"}),
                                         "digits-1", options=HYPERPOD)
    assert rendered["apiVersion"] == "sagemaker.amazonaws.com/v1" and rendered["kind"] == "HyperPodPyTorchJob"
    metadata, spec = rendered["metadata"], rendered["spec"]
    assert metadata["name"] == "digits-1" and metadata["namespace"] == "team-a"
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "trainops"
    assert metadata["labels"]["trainops.dev/job"] == "digits-1"
    assert TOKEN_ANNOTATION in metadata["annotations"]
    assert spec["nprocPerNode"] == "8"  # ml.p4d.24xlarge: 8 A100s, as a string
    [replica] = spec["replicaSpecs"]
    assert (replica["name"], replica["replicas"]) == ("pod", 2)
    assert spec["runPolicy"]["activeDeadlineSeconds"] == 7200
    assert spec["runPolicy"]["jobMaxRetryCount"] == DEFAULT_MAX_RETRY == RetryBudgets().infrastructure
    assert spec["runPolicy"]["cleanPodPolicy"] == "None"
    assert spec["runPolicy"]["ttlSecondsAfterFinished"] > 0  # the model's 0 would delete it before a look
    pod = _pod(rendered)
    [container] = pod["containers"]
    assert container["image"] == "example.org/train:1"
    assert container["command"] == ["hyperpodrun", "--nnodes=2", "--nproc-per-node=1",
                                    "/fsx/me/trainops/jobs/digits-1/runtime/trainops_k8s_node.py", "run",
                                    "/fsx/me/trainops/jobs/digits-1"]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["MODE"] == "fast" and json.loads(env["SM_HPS"]) == {"epochs": 3}
    assert (env["NNODES"], env["NPROC_PER_NODE"]) == ("2", "8")
    assert container["resources"] == {"requests": {GPU: "8", EFA: "4"}, "limits": {GPU: "8", EFA: "4"}}
    assert pod["nodeSelector"] == {INSTANCE_TYPE_LABEL: "ml.p4d.24xlarge"}
    assert pod["securityContext"] == {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}


def test_the_shared_claim_is_mounted_and_the_scheduling_options_reach_the_pods() -> None:
    rendered = _backend().render_request(_spec(), "digits-1", options={
        **HYPERPOD, "queue": "team-a-queue", "priority_class": "high", "service_account": "trainer",
        "node_selector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]})
    pod = _pod(rendered)
    assert pod["volumes"] == [{"name": "trainops-shared", "persistentVolumeClaim": {"claimName": "fsx-claim"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "trainops-shared", "mountPath": "/fsx/me/trainops"}]
    assert pod["serviceAccountName"] == "trainer"
    assert pod["nodeSelector"] == {INSTANCE_TYPE_LABEL: "ml.p4d.24xlarge", "pool": "gpu"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    for labels in (rendered["metadata"]["labels"], rendered["spec"]["replicaSpecs"][0]["template"]["metadata"][
            "labels"]):  # Kueue's labels on the job and on its pods, as the HyperPod CLI puts them
        assert labels["kueue.x-k8s.io/queue-name"] == "team-a-queue"
        assert labels["kueue.x-k8s.io/priority-class"] == "high"


def test_ranks_and_accelerators_per_node() -> None:
    backend = _backend()
    neuron = backend.render_request(_spec(instance_type="ml.trn1.32xlarge"), "a", options=HYPERPOD)
    assert neuron["spec"]["nprocPerNode"] == "32"
    assert _pod(neuron)["containers"][0]["resources"]["limits"][NEURON] == "16"
    cpu = backend.render_request(_spec(instance_type="ml.m5.xlarge"), "a", options=HYPERPOD)
    assert cpu["spec"]["nprocPerNode"] == "1" and "resources" not in _pod(cpu)["containers"][0]
    given = backend.render_request(_spec(), "a", options={**HYPERPOD, "processes_per_host": 2})
    assert given["spec"]["nprocPerNode"] == "2"
    assert {item["name"]: item["value"] for item in _pod(given)["containers"][0]["env"]}["NPROC_PER_NODE"] == "2"


def test_max_retry_is_the_operators_restarts_and_only_the_hyperpod_flavours() -> None:
    rendered = _backend().render_request(_spec(), "a", options={**HYPERPOD, "max_retry": 0})
    assert rendered["spec"]["runPolicy"]["jobMaxRetryCount"] == 0
    for options, field in (({"flavour": "hyperpod", "max_retry": -1}, "max_retry"),
                           ({"flavour": "hyperpod", "max_retry": True}, "max_retry"),
                           ({"max_retry": 2}, "max_retry")):
        with pytest.raises(SpecError) as refused:
            KubernetesOptions.parse(options)
        assert field in str(refused.value)


def test_secret_values_never_reach_the_job() -> None:
    printed = _backend().render_request(_spec(environment={"WANDB_API_KEY": "s3cr3t"}), "digits-1",
                                        options=HYPERPOD)
    env = {item["name"]: item["value"] for item in _pod(printed)["containers"][0]["env"]}
    assert env["WANDB_API_KEY"] == MASK and "s3cr3t" not in json.dumps(printed)


def test_what_the_engine_refuses_is_refused_before_anything() -> None:
    with pytest.raises(SpecError) as refused:
        _backend().render_request(_spec(image_uri=None), "Digits_1", options=HYPERPOD)
    assert "job_name" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        _backend().render_request(_spec(image_uri=None), "digits-1", options=HYPERPOD)
    assert "image" in str(refused.value)


def test_render_prints_the_hyperpod_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("entry_point: train.py\ninstance_type: ml.g5.xlarge\ninstance_count: 2\n"
                    "image_uri: example.org/train:1\nmax_run: 600\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = main(["render", str(spec), "--backend", "kubernetes", "--job-name", "digits-1", "-o", "flavour=hyperpod",
                 "-o", "shared_dir=/fsx/t", "-o", "shared_pvc=fsx", "-o", "namespace=ml", "-o", "max_retry=1"])
    out = capsys.readouterr().out
    assert code == 0, out
    printed = json.loads(out[out.index("{"):])
    assert printed["kind"] == "HyperPodPyTorchJob" and printed["spec"]["replicaSpecs"][0]["replicas"] == 2
    assert printed["spec"]["runPolicy"] == {"activeDeadlineSeconds": 600, "cleanPodPolicy": "None",
                                            "jobMaxRetryCount": 1, "ttlSecondsAfterFinished": 86400}


def test_a_node_works_out_its_host_from_what_hyperpods_launcher_gives_its_worker(tmp_path: Path) -> None:
    environ = {"GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "23456", "NNODES": "3",
               "NPROC_PER_NODE": "8", "RANK": "1", "WORLD_SIZE": "3"}
    node = hyperpod_node_of(environ, str(tmp_path / "absent.json"))
    assert (node.index, node.host, node.hosts) == (1, "algo-2", ("algo-1", "algo-2", "algo-3"))
    assert node.addresses == {"algo-1": "10.0.0.5"} and node.processes_per_host == 8
    launcher_file = tmp_path / "pod_resourceconfig.json"  # the launcher's addresses, by rank, when the operator sent them
    launcher_file.write_text(json.dumps({"ips": ["10.0.0.5", "10.0.0.6", "10.0.0.7"], "ips_timestamp": "1"}))
    assert hyperpod_node_of(environ, str(launcher_file)).addresses == {
        "algo-1": "10.0.0.5", "algo-2": "10.0.0.6", "algo-3": "10.0.0.7"}
    launcher_file.write_text(json.dumps({"ips": ["10.0.0.5"]}))  # not every rank's yet: the master's alone
    assert hyperpod_node_of(environ, str(launcher_file)).addresses == {"algo-1": "10.0.0.5"}
    trainer = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "0",
               "PET_MASTER_ADDR": "j-node-0-0.j", "PET_MASTER_PORT": "29400"}
    assert node_here(trainer).host == "algo-1"


@pytest.mark.parametrize(("environ", "named"), [
    ({"GROUP_RANK": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1"}, "NNODES"),
    ({"GROUP_RANK": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1", "NNODES": "2", "NPROC_PER_NODE": "1"}, "GROUP_RANK"),
    ({"GROUP_RANK": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1", "NNODES": "x", "NPROC_PER_NODE": "1"}, "NNODES"),
])
def test_a_node_refuses_an_environment_hyperpods_launcher_did_not_give(environ: dict, named: str,
                                                                      tmp_path: Path) -> None:
    with pytest.raises(NodeError) as refused:
        hyperpod_node_of(environ, str(tmp_path / "absent.json"))
    assert named in str(refused.value)


def test_a_hyperpod_jobs_conditions_in_trainops_words() -> None:
    def job(*conditions: tuple[str, str]) -> dict:
        return {"status": {"conditions": [{"type": kind, "status": held} for kind, held in conditions]}}

    done = standing(job(("Created", "True"), ("Running", "True"), ("Completed", "True")))
    assert (done.status, done.secondary_status) == (JobStatus.COMPLETED, "Complete")
    restarting = standing(job(("Created", "True"), ("Running", "True"), ("Restarting", "True")), [{}])
    assert (restarting.status, restarting.secondary_status) == (JobStatus.IN_PROGRESS, "Restarting")
    assert "restarting" in restarting.details["waiting"]
    again = standing(job(("Created", "True"), ("Restarting", "True"), ("Running", "True")), [{}])
    assert (again.status, again.secondary_status) == (JobStatus.IN_PROGRESS, "Created")
    failed = standing({**job(("Created", "True"), ("Failed", "True")), "spec": {}})
    assert failed.status is JobStatus.FAILED
