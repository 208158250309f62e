"""A flavour's jobs (Kubeflow Trainer's TrainJobs, HyperPod's HyperPodPyTorchJobs) and their pods through the API
server, with the official ``kubernetes`` client (`TrainJobs`); each kind of object is a row of `KINDS`.

The client is imported here only, when a cluster is reached (the ``trainops[kubernetes]`` extra). What this module
adds to the client is trainops' rules:

- create is idempotent and owned: a create answered 409 (the name is taken) follows the object only when it is this
  submission's (its ``trainops.dev/submission-token`` annotation is the token trainops made and kept); another
  owner's object is refused, naming the job, and never followed, changed or deleted;
- a failed call that proves nothing of the job (a timeout, a refused connection, a 5xx or 429 answer) is a
  `LookFailed`, which the kit's waits look at again; 404 is "no such job";
- delete is foreground: the TrainJob goes once its JobSet and pods are gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from trainops.backends.kit import LookFailed, Problem, SpecError
from trainops.backends.kubernetes.render import JOB_LABEL, MANAGED_BY, TOKEN_ANNOTATION
from trainops.backends.kubernetes.settings import Connection

GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
#: The label JobSet puts on every pod of the TrainJob's JobSet (named after the TrainJob).
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: The label HyperPod's training operator puts on every pod of a HyperPodPyTorchJob (its value: the job's name).
HYPERPOD_POD_LABEL = "HPJob"


@dataclass(frozen=True)
class Kind:
    """A kind of job object: its API group, version and plural, and the label naming the job on its pods."""

    kind: str
    group: str
    version: str
    plural: str
    pod_label: str


#: flavour -> the kind of object its jobs are.
KINDS = {
    "trainer": Kind("TrainJob", GROUP, VERSION, PLURAL, JOBSET_LABEL),
    "hyperpod": Kind("HyperPodPyTorchJob", "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", HYPERPOD_POD_LABEL),
}
#: Statuses of an answer that prove nothing of the job: asked again.
TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
#: Seconds one call may take (connect, read) before it is a failed look.
REQUEST_TIMEOUT = (5.0, 30.0)
T = TypeVar("T")


def open_client(connection: Connection) -> Any:
    """An ``ApiClient`` for the cluster (kubeconfig and context, or the pod's service account)."""
    from kubernetes import client, config

    if connection.source == "in-cluster":
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    return config.new_client_from_config(config_file=connection.path, context=connection.context)


class TrainJobs:
    """The jobs of one kind (default: TrainJobs) in one namespace, and their pods."""

    def __init__(self, api_client: Any, namespace: str, kind: Kind = KINDS["trainer"]):
        from kubernetes import client

        self.namespace = namespace
        self.kind = kind
        self._where = (kind.group, kind.version, namespace, kind.plural)
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return call()
        except ApiException as error:
            if error.status in TRANSIENT:
                raise LookFailed(f"{what}: the API server answered {error.status} {error.reason}") from error
            raise
        except HTTPError as error:  # refused, reset, timed out: urllib3's, under the client
            raise LookFailed(f"{what}: the API server could not be reached ({error})") from error

    def create(self, body: dict[str, Any], token: str) -> tuple[dict[str, Any], bool]:
        """(the TrainJob, whether this call created it): ``body`` created, or, when the name is taken, the object of
        that name if it is this submission's (``token``); else a `SpecError` naming the job."""
        from kubernetes.client.exceptions import ApiException

        name = body["metadata"]["name"]
        try:
            made = self._call(f"creating {self.kind.kind} {name}", lambda: self.custom.create_namespaced_custom_object(
                *self._where, body, _request_timeout=REQUEST_TIMEOUT))
            return dict(made), True
        except ApiException as error:
            if error.status != 409:
                raise
        found = self.get(name)
        if found is None:
            raise LookFailed(f"{self.kind.kind} {name} was taken, then gone before it could be read: submit again")
        metadata = found.get("metadata") or {}
        if (metadata.get("annotations") or {}).get(TOKEN_ANNOTATION) == token:
            return found, False
        raise SpecError(Problem("job_name", f"a {self.kind.kind} named {name!r} already exists in namespace "
                                            f"{self.namespace} and is not this submission's ({owner(found)}); "
                                            "trainops never follows, changes or deletes it: give another job "
                                            "name"), "kubernetes job")

    def get(self, name: str) -> dict[str, Any] | None:
        """The job called ``name``, or None when there is none."""
        from kubernetes.client.exceptions import ApiException

        try:
            found = self._call(f"reading {self.kind.kind} {name}", lambda: self.custom.get_namespaced_custom_object(
                *self._where, name, _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(found)

    def pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of job ``name`` (those its kind's pod label names), as the API returns them."""
        listed = self._call(f"listing the pods of {name}", lambda: self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{self.kind.pod_label}={name}", _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT))
        import json

        items: list[dict[str, Any]] = json.loads(listed.data).get("items") or []
        return items

    def log(self, pod: str) -> str:
        """What pod ``pod`` printed so far."""
        answer = self._call(f"reading the log of pod {pod}", lambda: self.core.read_namespaced_pod_log(
            pod, self.namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT))
        return str(answer.data.decode(errors="replace"))

    def delete(self, name: str) -> bool:
        """Delete job ``name`` in the foreground (its pods first); False when there was none."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            self._call(f"deleting {self.kind.kind} {name}", lambda: self.custom.delete_namespaced_custom_object(
                *self._where, name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"), _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True


def owner(found: dict[str, Any]) -> str:
    """Who made a job object, as far as its marks say (for the message that refuses it)."""
    metadata = found.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if labels.get(MANAGED_BY) == "trainops" and labels.get(JOB_LABEL):
        return "made by another trainops submission"
    return f"managed by {labels.get(MANAGED_BY) or 'someone else'}"
