"""The kubernetes backend's TrainJob (issue 44 item 2): what `trainops render --backend kubernetes` prints, checked
against Kubeflow Trainer's published model (kubeflow-trainer-api 2.3.0) and field by field."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from kubernetes_objects import SHARED, shared_backend, spec_of

from trainops.backends import backend_class, get_backend
from trainops.backends.kubernetes.backend import KubernetesBackend
from trainops.backends.kubernetes.names import check_name
from trainops.backends.kubernetes.options import KubernetesOptions
from trainops.backends.kubernetes.render import EFA, GPU, NEURON, TOKEN_ANNOTATION, train_job
from trainops.backends.kubernetes.settings import KubernetesCluster
from trainops.cli import main
from trainops.errors import SpecError
from trainops.spec.secrets import MASK

_spec, _backend = spec_of, shared_backend


def _published(document: dict) -> dict:
    """The document as Kubeflow Trainer's published model reads it and writes it back: a field the model does not
    have, or a value of the wrong type, does not survive (or raises)."""
    from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob

    model = TrainerV1alpha1TrainJob.from_dict(document)
    assert model is not None
    written: dict = model.to_dict()
    return json.loads(json.dumps(written, default=str))


def test_the_rendered_train_job_validates_against_the_published_model() -> None:
    rendered = _backend().render_request(_spec(), "digits-1", options={
        "queue": "team-a-queue", "priority_class": "high", "service_account": "trainer",
        "node_selector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]})
    assert _published(rendered) == rendered
    assert rendered["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and rendered["kind"] == "TrainJob"


def test_the_train_job_carries_the_spec() -> None:
    rendered = _backend().render_request(_spec(hyperparameters={"epochs": 3}, environment={"MODE": "fast"}),
                                         "digits-1")
    metadata, spec = rendered["metadata"], rendered["spec"]
    assert metadata["name"] == "digits-1" and metadata["namespace"] == "team-a"
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "trainops"
    assert metadata["labels"]["trainops.dev/job"] == "digits-1"
    assert TOKEN_ANNOTATION in metadata["annotations"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": "torch-distributed"}
    assert spec["activeDeadlineSeconds"] == 7200
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 8  # ml.p4d.24xlarge: 8 A100s
    assert trainer["image"] == "example.org/train:1"
    assert trainer["resourcesPerNode"]["limits"] == {GPU: "8", EFA: "4"}
    assert trainer["resourcesPerNode"]["requests"] == trainer["resourcesPerNode"]["limits"]
    env = {item["name"]: item["value"] for item in trainer["env"]}
    assert env["MODE"] == "fast" and json.loads(env["SM_HPS"]) == {"epochs": 3}
    assert trainer["command"] == ["python3", "-I", "-S", "/fsx/me/trainops/jobs/digits-1/runtime/trainops_k8s_node.py",
                                  "run", "/fsx/me/trainops/jobs/digits-1"]


def test_the_shared_claim_is_mounted_in_every_node_by_a_runtime_patch() -> None:
    rendered = _backend().render_request(_spec(), "digits-1", options={"service_account": "trainer"})
    [patch] = rendered["spec"]["runtimePatches"]
    [node] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "trainops-shared", "persistentVolumeClaim": {"claimName": "fsx-claim"}}]
    assert pod["containers"] == [{"name": "node", "volumeMounts": [{"name": "trainops-shared",
                                                                    "mountPath": "/fsx/me/trainops"}]}]
    assert pod["serviceAccountName"] == "trainer"
    assert set(pod) == {"volumes", "containers", "serviceAccountName", "securityContext"}


def test_kueue_labels_and_scheduling_options() -> None:
    rendered = _backend().render_request(_spec(), "digits-1", options={
        "queue": "team-a-queue", "priority_class": "high", "node_selector": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]})
    labels = rendered["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a-queue"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"
    pod = rendered["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]


def test_ranks_per_node_follow_the_option_then_the_distribution_then_the_accelerators() -> None:
    backend = _backend()
    assert backend.render_request(_spec(), "a", options={"processes_per_host": 2})["spec"]["trainer"][
        "numProcPerNode"] == 2
    torch = _spec(distribution={"type": "torch_distributed", "processes_per_host": 4})
    assert backend.render_request(torch, "a")["spec"]["trainer"]["numProcPerNode"] == 4
    neuron = backend.render_request(_spec(instance_type="ml.trn1.32xlarge"), "a")["spec"]["trainer"]
    assert neuron["resourcesPerNode"]["limits"][NEURON] == "16"
    assert neuron["numProcPerNode"] == 32  # trn1.32xlarge: 32 NeuronCores
    cpu = backend.render_request(_spec(instance_type="ml.m5.xlarge"), "a")["spec"]["trainer"]
    assert cpu["numProcPerNode"] == 1 and "resourcesPerNode" not in cpu


def test_secret_values_never_reach_the_train_job() -> None:
    spec = _spec(environment={"WANDB_API_KEY": "s3cr3t"})
    printed = _backend().render_request(spec, "digits-1")
    env = {item["name"]: item["value"] for item in printed["spec"]["trainer"]["env"]}
    assert env["WANDB_API_KEY"] == MASK
    made = train_job(spec, "digits-1", KubernetesOptions(), KubernetesCluster(**SHARED), "team-a", "token-1")
    assert {item["name"]: item["value"] for item in made["spec"]["trainer"]["env"]}["WANDB_API_KEY"] == MASK
    assert "s3cr3t" not in json.dumps(made)
    assert made["metadata"]["annotations"][TOKEN_ANNOTATION] == "token-1"


def test_the_pods_run_as_the_submitting_user() -> None:
    import os

    rendered = _backend().render_request(_spec(), "digits-1")
    pod = rendered["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}


@pytest.mark.parametrize("name", ["Digits-1", "digits_1", "1digits", "digits-", "x" * 64, ""])
def test_a_name_kubernetes_would_refuse_is_refused(name: str) -> None:
    with pytest.raises(SpecError) as refused:
        check_name(name)
    assert "job_name" in str(refused.value)


def test_a_name_kubernetes_accepts_passes() -> None:
    assert check_name("digits-20261207-0402") == "digits-20261207-0402"
    assert check_name("a" * 63) == "a" * 63


def test_render_refuses_a_bad_name_with_exit_2_before_anything(tmp_path, capsys) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("entry_point: train.py\ninstance_type: ml.g5.xlarge\nimage_uri: example.org/train:1\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = main(["render", str(spec), "--backend", "kubernetes", "--job-name", "Digits_1",
                 "-o", "shared_dir=/fsx/t", "-o", "shared_pvc=fsx"])
    assert code == 2
    assert "job_name" in capsys.readouterr().err


def test_render_prints_the_train_job(tmp_path, capsys) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("entry_point: train.py\ninstance_type: ml.g5.xlarge\ninstance_count: 2\n"
                    "image_uri: example.org/train:1\nmax_run: 600\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    code = main(["render", str(spec), "--backend", "kubernetes", "--job-name", "digits-1",
                 "-o", "shared_dir=/fsx/t", "-o", "shared_pvc=fsx", "-o", "namespace=ml"])
    out = capsys.readouterr().out
    assert code == 0, out
    printed = json.loads(out[out.index("{"):])
    assert printed["kind"] == "TrainJob" and printed["spec"]["trainer"]["numNodes"] == 2
    assert printed["spec"]["activeDeadlineSeconds"] == 600
    assert _published(printed) == printed


def test_the_shared_volume_and_an_image_are_required() -> None:
    backend = get_backend("kubernetes", options={"namespace": "ml"})
    with pytest.raises(SpecError) as refused:
        backend.render_request(_spec(), "digits-1")
    assert "shared_dir" in str(refused.value) and "shared_pvc" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        _backend().render_request(_spec(image_uri=None), "digits-1")
    assert "image" in str(refused.value)


@pytest.mark.parametrize(("options", "field"), [
    ({"flavour": "slurm"}, "flavour"), ({"queue": "Team A"}, "queue"), ({"processes_per_host": 0},
                                                                          "processes_per_host"),
    ({"node_selector": {"pool": "a b"}}, "node_selector.pool"),
    ({"tolerations": [{"key": "gpu", "operator": "Maybe"}]}, "tolerations[0].operator"),
    ({"tolerations": [{"key": "gpu", "colour": "red"}]}, "tolerations[0]"),
    ({"channel_overrides": {"train": "relative/dir"}}, "channel_overrides"),
    ({"checkpoint_key": "../other"}, "checkpoint_key"),
])
def test_bad_options_are_refused_naming_the_field(options: dict, field: str) -> None:
    with pytest.raises(SpecError) as refused:
        KubernetesOptions.parse(options)
    assert field in str(refused.value)


def test_settings_are_checked() -> None:
    with pytest.raises(SpecError) as refused:
        get_backend("kubernetes", options={"namespace": "Team_A", "shared_dir": "relative", "shared_pvc": "A B"})
    for field in ("namespace", "shared_dir", "shared_pvc"):
        assert field in str(refused.value)


def test_the_backend_is_registered_and_rendering_needs_no_kubernetes_client() -> None:
    assert backend_class("kubernetes") is KubernetesBackend
    program = ("import sys\nfrom trainops.backends import get_backend\nfrom trainops.spec.job import JobSpec\n"
               "b = get_backend('kubernetes', options={'shared_dir': '/s', 'shared_pvc': 'c', 'namespace': 'n'})\n"
               "b.render_request(JobSpec(entry_point='t.py', instance_type='ml.g5.xlarge', image_uri='i'), 'j')\n"
               "print('kubernetes' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_reaching_no_cluster_names_kubeconfig(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(SpecError) as refused:
        _backend().status_of("digits-1")
    assert "kubeconfig" in str(refused.value)


def test_what_the_jobs_files_cannot_hold_is_refused_before_anything() -> None:
    with pytest.raises(SpecError) as refused:
        _backend().render_request(_spec(disable_output_compression=True, output_path="s3://bucket/out"), "digits-1")
    assert "disable_output_compression" in str(refused.value) and "output_path" in str(refused.value)
    assert "kubernetes backend" in str(refused.value)


def test_a_channel_not_in_the_spec_is_refused_before_anything() -> None:
    with pytest.raises(SpecError) as refused:
        _backend().render_request(_spec(), "digits-1", options={"channel_overrides": {"train": "/fsx/me/data"}})
    assert "channel_overrides.train" in str(refused.value)


def test_a_poller_looks_at_most_five_seconds_apart() -> None:
    """A deferred task's trigger looks sooner than a long check_interval (a look is two reads of the API server),
    never later than the interval it asked for."""
    from trainops.backends.kit import JobHandle, JobResult, JobStatus

    backend = _backend()
    handle = JobHandle("kubernetes", "digits-1")
    running = JobResult("kubernetes", "digits-1", JobStatus.IN_PROGRESS, secondary_status="Created")
    assert backend.next_look_seconds(handle, running, 30.0) == 5.0
    assert backend.next_look_seconds(handle, running, 2.0) == 2.0
