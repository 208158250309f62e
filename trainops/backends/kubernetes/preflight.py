"""A read-only look at the cluster before a TrainJob is created (`notes`): what would keep the job from running.

It reads, never writes: the namespace, the API version of the kind trainops creates (``trainer.kubeflow.org/v1alpha1``
served, with ``trainjobs``; for the hyperpod flavour ``sagemaker.amazonaws.com/v1`` with ``hyperpodpytorchjobs``), the
ClusterTrainingRuntime a TrainJob names, the shared claim (``Bound``) and, with a queue, Kueue's LocalQueue. Each
finding is a note for the person submitting; a read that fails (no permission to read that kind, a timeout, an API
the cluster does not serve) is a note too, never a refusal: the create itself is the authority on what the cluster
accepts. The reads go out together (threads): on a real cluster each is a round trip to the API server, and the
person submitting waits for the slowest, not for their sum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainops.backends.kubernetes.cluster import GROUP, KINDS, VERSION, Kind

KUEUE = ("kueue.x-k8s.io", "v1beta1", "localqueues")
RUNTIMES = "clustertrainingruntimes"


#: What installs each kind of object, for the note that the cluster does not serve it.
INSTALLS = {"TrainJob": "install Kubeflow Trainer v2",
            "HyperPodPyTorchJob": "install HyperPod's training operator (the EKS add-on) on the HyperPod cluster"}


def notes(api_client: Any, namespace: str, runtime: str | None, claim: str | None, queue: str | None,
          kind: Kind = KINDS["trainer"]) -> list[str]:
    """What a read-only look at the cluster found that may keep the job from running (empty: nothing); ``runtime``
    is the ClusterTrainingRuntime a TrainJob names (None: the kind names none)."""
    from kubernetes import client

    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    timeout = (5.0, 10.0)
    api = f"{kind.group}/{kind.version}"
    reads: dict[str, tuple[str, Callable[[], Any]]] = {
        "namespace": (f"namespace {namespace}", lambda: core.read_namespace(namespace, _request_timeout=timeout)),
        "api": (f"the {api} API", lambda: custom.get_api_resources(kind.group, kind.version,
                                                                   _request_timeout=timeout)),
    }
    if runtime:
        reads["runtime"] = (f"ClusterTrainingRuntime {runtime}", lambda: custom.get_cluster_custom_object(
            GROUP, VERSION, RUNTIMES, runtime, _request_timeout=timeout))
    if claim:
        reads["claim"] = (f"PersistentVolumeClaim {claim}", lambda: core.read_namespaced_persistent_volume_claim(
            claim, namespace, _preload_content=False, _request_timeout=timeout))
    if queue:
        group, version, plural = KUEUE
        reads["queue"] = (f"Kueue LocalQueue {queue}", lambda: custom.get_namespaced_custom_object(
            group, version, namespace, plural, queue, _request_timeout=timeout))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(reads)) as pool:
        answers = dict(zip(reads, pool.map(lambda item: _read(*item), reads.values()), strict=True))
    found: list[str] = []
    for key, (value, note) in answers.items():
        if note:
            found.append(note)
        if key == "namespace" and value is None:
            found.append(f"namespace {namespace} does not exist: create it or give -o namespace=NAME")
        elif key == "api" and (value is None or (value and kind.plural not in {
                item.name for item in value.resources or []})):
            found.append(f"the cluster does not serve {api} {kind.kind}s: {INSTALLS.get(kind.kind, 'install it')}")
        elif key == "runtime" and value is None:
            found.append(f"no ClusterTrainingRuntime {runtime!r}: install it or give -o runtime=NAME")
        elif key == "claim" and value is None:
            found.append(f"no PersistentVolumeClaim {claim!r} in namespace {namespace}: shared_pvc names the claim "
                         "mounted at shared_dir in every pod")
        elif key == "claim" and value:
            import json

            phase = (json.loads(value.data).get("status") or {}).get("phase")
            if phase != "Bound":
                found.append(f"PersistentVolumeClaim {claim} is {phase or 'not Bound'}: the pods wait until it is "
                             "Bound")
        elif key == "queue" and value is None:
            found.append(f"no Kueue LocalQueue {queue!r} in namespace {namespace}: the job would wait forever")
    return found


def _read(what: str, call: Callable[[], Any]) -> tuple[Any, str | None]:
    """(what the read answered, None) | (None, None) for a 404 | (False, the note saying it could not be read)."""
    from kubernetes.client.exceptions import ApiException

    try:
        return call(), None
    except ApiException as error:
        if error.status == 404:
            return None, None
        return False, f"could not read {what} ({error.status} {error.reason}); not checked"
    except Exception as error:  # noqa: BLE001 - a failed read is a note, never a refusal
        return False, f"could not read {what} ({type(error).__name__}); not checked"
