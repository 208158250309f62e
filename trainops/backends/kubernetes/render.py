"""The ``trainer.kubeflow.org/v1alpha1`` TrainJob a trainops job becomes (`train_job`).

What ``trainops render --backend kubernetes`` prints is what ``run`` creates, but for the submission token (made when
the job is submitted) and the user the pods run as (the submitter's, `run_as`):

- named after the job (`names.check_name`), in the cluster's namespace, marked as trainops' (`MANAGED_BY`, the job's
  name as a label, the submission token as an annotation: how a re-run tells its own object from another owner's);
- ``runtimeRef`` the ClusterTrainingRuntime (default ``torch-distributed``), ``activeDeadlineSeconds`` = ``max_run``;
- ``trainer``: the image, ``numNodes`` = ``instance_count``, ``numProcPerNode``, the accelerators of the instance type
  as the node's resources (NVIDIA GPUs, EFA interfaces, Neuron devices, from the catalog), the spec's environment
  (secret values masked: the pods read them from the shared volume) and its hyperparameters (``SM_HPS``, as
  SageMaker gives them), and the command every node runs: trainops' node
  script on the shared volume (`node`: host ``algo-<rank+1>`` from Trainer's ``PET_*`` variables);
- a runtime patch (trainops' own manager) mounting the shared claim at ``shared_dir`` in every node's pod, with the
  service account, node selector and tolerations, and the pods running as the submitting user (the job's files on
  the shared volume are that user's alone, mode 0700, as on Slurm); the Kueue queue and priority as labels.
"""

from __future__ import annotations

import json
import posixpath
from typing import TYPE_CHECKING, Any

from trainops.backends.kit import Problem, SpecError, instance_type
from trainops.backends.kubernetes.names import check_name
from trainops.backends.kubernetes.options import DEFAULT_RUNTIME, KubernetesOptions
from trainops.backends.kubernetes.settings import KubernetesCluster
from trainops.spec.images import resolve_training_image
from trainops.spec.secrets import masked_environment

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND = "TrainJob"
#: trainops' marks on what it creates.
MANAGED_BY = "app.kubernetes.io/managed-by"
JOB_LABEL = "trainops.dev/job"
TOKEN_ANNOTATION = "trainops.dev/submission-token"
#: The runtime patch's manager (Trainer keys patches by manager) and what the patch names.
PATCH_MANAGER = "trainops.dev/trainops"
NODE = "node"  # the torch runtime's replicated job and its container
SHARED_VOLUME = "trainops-shared"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: Extended resources of the device plugins: NVIDIA's, AWS's EFA and Neuron plugins.
GPU, EFA, NEURON = "nvidia.com/gpu", "vpc.amazonaws.com/efa", "aws.amazon.com/neuron"
#: The node script's path under the job's directory, run by every pod's Python.
NODE_SCRIPT = posixpath.join("runtime", "trainops_k8s_node.py")
UNSUBMITTED_TOKEN = "(made when the job is submitted)"


def job_dir(cluster: KubernetesCluster, name: str) -> str:
    """The job's directory on the shared volume (as on Slurm: ``<shared_dir>/jobs/<name>``)."""
    return posixpath.join(str(cluster.shared_dir), "jobs", name)


def run_as() -> dict[str, int]:
    """The pods' user and group: the submitting user's, who owns the job's files on the shared volume."""
    import os

    return {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}


def train_job(spec: JobSpec, name: str, options: KubernetesOptions, cluster: KubernetesCluster, namespace: str,
              token: str | None = None) -> dict[str, Any]:
    """The TrainJob of ``spec`` named ``name``; `SpecError` naming every field the engine refuses."""
    image, known = checked(spec, name, options, cluster)
    directory = job_dir(cluster, name)
    environment = environment_of(spec)
    trainer: dict[str, Any] = {
        "image": image,
        "command": ["python3", "-I", "-S", posixpath.join(directory, NODE_SCRIPT), "run", directory],
        "numNodes": spec.host_count(),
        "numProcPerNode": processes_per_node(spec, options),
        "env": [{"name": key, "value": str(value)} for key, value in environment.items()],
    }
    resources = resources_of(known)
    if resources:
        trainer["resourcesPerNode"] = {"limits": resources, "requests": dict(resources)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata_of(name, namespace, options, token),
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                           "name": options.runtime or DEFAULT_RUNTIME},
            "activeDeadlineSeconds": int(spec.max_run),
            "trainer": trainer,
            "runtimePatches": [_runtime_patch(options, cluster)],
        },
    }


def checked(spec: JobSpec, name: str, options: KubernetesOptions, cluster: KubernetesCluster) -> tuple[str, Any]:
    """(the pods' image, the instance type's catalog entry or None): what every flavour's object needs, or a
    `SpecError` naming every field the engine refuses."""
    check_name(name)
    cluster.check_shared()
    problems: list[Problem] = []
    image = _image(spec, options, problems)
    if spec.instance_groups:
        problems.append(Problem("instance_groups", "the job's nodes are alike: give instance_type and "
                                                   "instance_count instead of instance groups"))
    known = instance_type(spec.instance_type) if spec.instance_type else None
    if spec.instance_type and known is None:
        problems.append(Problem("instance_type", f"{spec.instance_type!r} is not in trainops' instance catalog; "
                                                 "the kubernetes backend reads its accelerators from there"))
    if problems:
        raise SpecError(problems, "kubernetes job")
    return image, known


def metadata_of(name: str, namespace: str, options: KubernetesOptions, token: str | None) -> dict[str, Any]:
    """The metadata of the job's object (a TrainJob or a HyperPodPyTorchJob): its labels (`labels_of`) and the
    submission token a later look knows its own job by (a placeholder in a rendered, unsubmitted job)."""
    return {"name": name, "namespace": namespace, "labels": labels_of(name, options),
            "annotations": {TOKEN_ANNOTATION: token or UNSUBMITTED_TOKEN}}


def labels_of(name: str, options: KubernetesOptions) -> dict[str, str]:
    """trainops' marks and the Kueue labels (queue, priority) of the job's object."""
    labels = {MANAGED_BY: "trainops", JOB_LABEL: name}
    if options.queue:
        labels[QUEUE_LABEL] = options.queue
    if options.priority_class:
        labels[PRIORITY_LABEL] = options.priority_class
    return labels


def processes_per_node(spec: JobSpec, options: KubernetesOptions) -> int:
    """Ranks per node: the option, else the distribution's ``processes_per_host``, else the instance type's GPUs
    (or Neuron cores), else one."""
    if options.processes_per_host:
        return int(options.processes_per_host)
    given = getattr(spec.distribution, "processes_per_host", None)
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    known = instance_type(spec.instance_type) if spec.instance_type else None
    if known is not None:
        return known.gpus or known.neuron_cores or 1
    return 1


def _image(spec: JobSpec, options: KubernetesOptions, problems: list[Problem]) -> str:
    if options.image:
        return options.image
    if spec.image_uri:
        return spec.image_uri
    if spec.framework_version and spec.region and spec.instance_type:
        try:
            return resolve_training_image(spec.framework, spec.framework_version, spec.py_version,
                                          spec.instance_type, spec.region)
        except (ValueError, SpecError) as error:
            problems.append(Problem("image", f"no training image for this spec ({error}); give -o image=IMAGE"))
            return ""
    problems.append(Problem("image", "no image for the pods: give -o image=IMAGE, the spec's image_uri, or its "
                                     "framework_version with region (the AWS training image SageMaker would run)"))
    return ""


def environment_of(spec: JobSpec) -> dict[str, Any]:
    """The environment the TrainJob shows: secret values masked, in what is printed and in what is made alike (a
    TrainJob is readable by whoever may list them); the pods read the real values from each host's environment file
    on the shared volume (mode 0600, laid out as for Slurm), which the node script lays over the pod's."""
    environment: dict[str, Any] = masked_environment(dict(spec.environment or {}))
    environment["SM_HPS"] = json.dumps(spec.hyperparameters or {}, sort_keys=True, default=str)
    return environment


def resources_of(known: Any) -> dict[str, str]:
    if known is None:
        return {}
    resources = {}
    if known.gpus:
        resources[GPU] = str(known.gpus)
    if known.neuron_devices:
        resources[NEURON] = str(known.neuron_devices)
    if known.efa and known.efa_interfaces:
        resources[EFA] = str(known.efa_interfaces)
    return resources


def _runtime_patch(options: KubernetesOptions, cluster: KubernetesCluster) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "volumes": [{"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": cluster.shared_pvc}}],
        "containers": [{"name": NODE, "volumeMounts": [{"name": SHARED_VOLUME,
                                                        "mountPath": cluster.shared_dir}]}],
        "securityContext": run_as(),
    }
    if options.service_account:
        pod["serviceAccountName"] = options.service_account
    if options.node_selector:
        pod["nodeSelector"] = dict(options.node_selector)
    if options.tolerations:
        pod["tolerations"] = [dict(toleration) for toleration in options.tolerations]
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}]}}}}
