"""TrainJobs and their pods through the API server, with the official ``kubernetes`` client (`TrainJobs`).

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
from typing import Any, TypeVar

from trainops.backends.kit import LookFailed, Problem, SpecError
from trainops.backends.kubernetes.render import JOB_LABEL, MANAGED_BY, TOKEN_ANNOTATION
from trainops.backends.kubernetes.settings import Connection

GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
#: The label JobSet puts on every pod of the TrainJob's JobSet (named after the TrainJob).
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
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
    """The TrainJobs of one namespace and their pods."""

    def __init__(self, api_client: Any, namespace: str):
        from kubernetes import client

        self.namespace = namespace
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
            made = self._call(f"creating TrainJob {name}", lambda: self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, body, _request_timeout=REQUEST_TIMEOUT))
            return dict(made), True
        except ApiException as error:
            if error.status != 409:
                raise
        found = self.get(name)
        if found is None:
            raise LookFailed(f"TrainJob {name} was taken, then gone before it could be read: submit again")
        metadata = found.get("metadata") or {}
        if (metadata.get("annotations") or {}).get(TOKEN_ANNOTATION) == token:
            return found, False
        raise SpecError(Problem("job_name", f"a TrainJob named {name!r} already exists in namespace "
                                            f"{self.namespace} and is not this submission's ({owner(found)}); "
                                            "trainops never follows, changes or deletes it: give another job "
                                            "name"), "kubernetes job")

    def get(self, name: str) -> dict[str, Any] | None:
        """The TrainJob called ``name``, or None when there is none."""
        from kubernetes.client.exceptions import ApiException

        try:
            found = self._call(f"reading TrainJob {name}", lambda: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name, _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(found)

    def pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of TrainJob ``name`` (those of its JobSet), as the API returns them."""
        listed = self._call(f"listing the pods of {name}", lambda: self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{JOBSET_LABEL}={name}", _preload_content=False,
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
        """Delete TrainJob ``name`` in the foreground (its pods first); False when there was none."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            self._call(f"deleting TrainJob {name}", lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"), _request_timeout=REQUEST_TIMEOUT))
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True


def owner(found: dict[str, Any]) -> str:
    """Who made a TrainJob, as far as its marks say (for the message that refuses it)."""
    metadata = found.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if labels.get(MANAGED_BY) == "trainops" and labels.get(JOB_LABEL):
        return "made by another trainops submission"
    return f"managed by {labels.get(MANAGED_BY) or 'someone else'}"
