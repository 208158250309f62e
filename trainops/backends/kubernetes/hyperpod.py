"""The ``sagemaker.amazonaws.com/v1`` HyperPodPyTorchJob a trainops job becomes on SageMaker HyperPod's EKS flavour
(`hyperpod_job`, ``-o flavour=hyperpod``).

It is the object the HyperPod CLI (``hyp create hyp-pytorch-job``, PyPI ``sagemaker-hyperpod``) would create for the
same job, checked against that package's published model in the tests:

- named after the job, marked as trainops' (labels, the submission token as an annotation), Kueue's queue and
  priority labels on the job and its pods, as the CLI puts them;
- ``nprocPerNode`` (a string) the ranks per node, one replica spec ``pod`` of ``replicas`` = ``instance_count``;
- ``runPolicy``: ``jobMaxRetryCount`` the operator's in-place restarts after a fault (``max_retry``, default trainops'
  infrastructure budget), ``activeDeadlineSeconds`` = ``max_run``, ``cleanPodPolicy: None`` as the CLI sets it, and
  the ended job kept a day (``ttlSecondsAfterFinished``) so a poller sees how it ended;
- the pod: the image, the instance type as HyperPod labels its nodes (``node.kubernetes.io/instance-type:
  ml.<type>``), its GPUs, EFA interfaces and Neuron devices, the shared claim mounted at ``shared_dir``, the pods
  running as the submitting user, and the command: HyperPod's launcher ``hyperpodrun`` (PyPI
  ``hyperpod-elastic-agent``, which the operator requires in the image: it talks to the launcher in every pod) with one
  worker per node, trainops' node script (`node`), which builds the SageMaker contract from what the launcher gives
  that worker (``GROUP_RANK``, the node's rank from the operator; ``MASTER_ADDR``) and the job's ``NNODES`` and
  ``NPROC_PER_NODE``. The node script then starts the node's ranks as on the other engines.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from trainops.backends.kubernetes.options import DEFAULT_MAX_RETRY, KubernetesOptions
from trainops.backends.kubernetes.render import (
    NODE_SCRIPT,
    SHARED_VOLUME,
    checked,
    environment_of,
    job_dir,
    metadata_of,
    processes_per_node,
    resources_of,
    run_as,
)
from trainops.backends.kubernetes.settings import KubernetesCluster

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

API_VERSION = "sagemaker.amazonaws.com/v1"
KIND = "HyperPodPyTorchJob"
#: The replica spec's and the container's names, as the HyperPod CLI names them.
REPLICA, CONTAINER = "pod", "pytorch-job-container"
#: The node label HyperPod puts on its nodes (its value: the ``ml.`` instance type).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: HyperPod's launcher in the image (``hyperpod-elastic-agent``): the operator assigns each pod its rank through it.
LAUNCHER = "hyperpodrun"
#: How long an ended job is kept (the model's default, 0, would delete it before a poller saw how it ended).
KEEP_SECONDS = 86400


def hyperpod_job(spec: JobSpec, name: str, options: KubernetesOptions, cluster: KubernetesCluster, namespace: str,
                 token: str | None = None) -> dict[str, Any]:
    """The HyperPodPyTorchJob of ``spec`` named ``name``; `SpecError` naming every field the engine refuses."""
    image, known = checked(spec, name, options, cluster)
    directory = job_dir(cluster, name)
    nodes = spec.host_count()
    processes = processes_per_node(spec, options)
    environment = {**environment_of(spec), "NNODES": nodes, "NPROC_PER_NODE": processes}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        # One worker per node: trainops' node script, which starts the node's ranks itself.
        "command": [LAUNCHER, f"--nnodes={nodes}", "--nproc-per-node=1",
                    posixpath.join(directory, NODE_SCRIPT), "run", directory],
        "env": [{"name": key, "value": str(value)} for key, value in environment.items()],
        "volumeMounts": [{"name": SHARED_VOLUME, "mountPath": str(cluster.shared_dir)}],
    }
    resources = resources_of(known)
    if resources:
        container["resources"] = {"requests": resources, "limits": dict(resources)}
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": SHARED_VOLUME, "persistentVolumeClaim": {"claimName": cluster.shared_pvc}}],
        "securityContext": run_as(),
    }
    selector = {INSTANCE_TYPE_LABEL: spec.instance_type} if spec.instance_type else {}
    selector.update(options.node_selector or {})
    if selector:
        pod["nodeSelector"] = selector
    if options.service_account:
        pod["serviceAccountName"] = options.service_account
    if options.tolerations:
        pod["tolerations"] = [dict(toleration) for toleration in options.tolerations]
    metadata = metadata_of(name, namespace, options, token)
    retries = DEFAULT_MAX_RETRY if options.max_retry is None else int(options.max_retry)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "nprocPerNode": str(processes),
            "replicaSpecs": [{"name": REPLICA, "replicas": nodes, "spares": 0,
                              "template": {"metadata": {"labels": dict(metadata["labels"])}, "spec": pod}}],
            "runPolicy": {"activeDeadlineSeconds": int(spec.max_run), "cleanPodPolicy": "None",
                          "jobMaxRetryCount": retries, "ttlSecondsAfterFinished": KEEP_SECONDS},
        },
    }
