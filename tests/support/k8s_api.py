"""A small Kubernetes API server on 127.0.0.1 for the kubernetes backend's tests: TrainJobs, HyperPodPyTorchJobs and
pods, as the official client speaks to the real one (issue 44 item 4).

It keeps objects in memory and answers what the backend asks (and, for the preflight, any object put at an exact
path in `Store.paths`, or a 403 where that path holds ``"forbidden"``): create (201, or 409 ``AlreadyExists`` with a
``Status``), get (404 ``NotFound``), list with an equality label selector, delete (200; with
``propagationPolicy: Foreground`` the job's pods go with it), and a pod's ``log`` subresource. It stamps
``metadata.uid``, ``resourceVersion`` and ``creationTimestamp``. What it does not do, and a real cluster does:
authentication and RBAC, admission webhooks and schema validation, watches, the status subresource split,
scheduling and a kubelet (the tests' controller plays those parts by writing the store directly).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

TRAINJOBS = "trainjobs"
HYPERPODJOBS = "hyperpodpytorchjobs"
PODS = "pods"
#: Each job kind -> the label its controller puts on the job's pods (a foreground delete takes those pods too).
POD_LABELS = {TRAINJOBS: "jobset.sigs.k8s.io/jobset-name", HYPERPODJOBS: "HPJob"}
_PATH = re.compile(r"^/(?:apis/trainer\.kubeflow\.org/v1alpha1|apis/sagemaker\.amazonaws\.com/v1|api/v1)/"
                   r"namespaces/(?P<ns>[^/]+)/(?P<kind>trainjobs|hyperpodpytorchjobs|pods)"
                   r"(?:/(?P<name>[^/]+)(?:/(?P<sub>log))?)?$")


class Store:
    """The objects, by (kind, namespace, name), and each pod's log; one lock for all."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.logs: dict[tuple[str, str], str] = {}
        self.version = 0
        self.requests: list[tuple[str, str]] = []
        #: Objects served as they are at an exact path (GET only): a namespace, an API's resource list, a
        #: ClusterTrainingRuntime, a claim, a LocalQueue (what the preflight reads).
        self.paths: dict[str, Any] = {}

    def put(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.version += 1
            metadata = body.setdefault("metadata", {})
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            metadata["namespace"] = namespace
            metadata["resourceVersion"] = str(self.version)
            self.objects[(kind, namespace, metadata["name"])] = body
            return body

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.objects.get((kind, namespace, name))
            return json.loads(json.dumps(found)) if found is not None else None

    def update(self, kind: str, namespace: str, name: str, change: Any) -> None:
        """Apply ``change`` (a function of the object) to the stored object, if it is there."""
        with self.lock:
            found = self.objects.get((kind, namespace, name))
            if found is not None:
                change(found)
                self.version += 1
                found["metadata"]["resourceVersion"] = str(self.version)

    def listed(self, kind: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        wanted = dict(part.split("=", 1) for part in selector.split(",") if part) if selector else {}
        with self.lock:
            return [json.loads(json.dumps(body)) for (k, ns, _), body in sorted(self.objects.items())
                    if k == kind and ns == namespace
                    and all((body["metadata"].get("labels") or {}).get(key) == value
                            for key, value in wanted.items())]

    def delete(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            return self.objects.pop((kind, namespace, name), None)

    def append_log(self, namespace: str, pod: str, text: str) -> None:
        with self.lock:
            self.logs[(namespace, pod)] = self.logs.get((namespace, pod), "") + text


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}


class _Handler(BaseHTTPRequestHandler):
    store: Store

    def log_message(self, *args: Any) -> None:  # quiet: the tests read the store, not stderr
        return

    def _answer(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[re.Match[str] | None, dict[str, list[str]]]:
        url = urlparse(self.path)
        self.store.requests.append((self.command, url.path))
        return _PATH.match(url.path), parse_qs(url.query)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        found, query = self._route()
        fixed = self.store.paths.get(urlparse(self.path).path)
        if fixed == "forbidden":
            self._answer(403, _status(403, "Forbidden", "forbidden"))
            return
        if fixed is not None:
            self._answer(200, fixed)
            return
        if found is None:
            self._answer(404, _status(404, "NotFound", f"no route {self.path}"))
            return
        kind, namespace, name = found["kind"], found["ns"], found["name"]
        if name is None:
            items = self.store.listed(kind, namespace, (query.get("labelSelector") or [None])[0])
            self._answer(200, {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                               "items": items})
            return
        if found["sub"] == "log":
            if self.store.get(PODS, namespace, name) is None:
                self._answer(404, _status(404, "NotFound", f'pods "{name}" not found'))
                return
            with self.store.lock:
                text = self.store.logs.get((namespace, name), "")
            self._answer(200, text, "text/plain")
            return
        body = self.store.get(kind, namespace, name)
        if body is None:
            self._answer(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
        else:
            self._answer(200, body)

    def do_POST(self) -> None:  # noqa: N802
        found, _ = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if found is None or found["name"] is not None:
            self._answer(404, _status(404, "NotFound", f"no route {self.path}"))
            return
        kind, namespace, name = found["kind"], found["ns"], body.get("metadata", {}).get("name")
        with self.store.lock:
            exists = (kind, namespace, name) in self.store.objects
        if exists:
            self._answer(409, _status(409, "AlreadyExists", f'{kind}.trainer.kubeflow.org "{name}" already '
                                                            "exists"))
            return
        self._answer(201, self.store.put(kind, namespace, body))

    def do_DELETE(self) -> None:  # noqa: N802
        found, query = self._route()
        if found is None or found["name"] is None:
            self._answer(404, _status(404, "NotFound", f"no route {self.path}"))
            return
        kind, namespace, name = found["kind"], found["ns"], found["name"]
        length = int(self.headers.get("Content-Length") or 0)
        options = json.loads(self.rfile.read(length) or b"{}") if length else {}
        removed = self.store.delete(kind, namespace, name)
        if removed is None:
            self._answer(404, _status(404, "NotFound", f'{kind} "{name}" not found'))
            return
        policy = options.get("propagationPolicy") or (query.get("propagationPolicy") or [None])[0]
        if kind in POD_LABELS and policy == "Foreground":
            for pod in self.store.listed(PODS, namespace, f"{POD_LABELS[kind]}={name}"):
                self.store.delete(PODS, namespace, pod["metadata"]["name"])
        self._answer(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})


@contextmanager
def api_server(directory: Path) -> Iterator[tuple[Store, Path]]:
    """A server on 127.0.0.1 (a free port) and a kubeconfig for it under ``directory`` (context ``emulator``,
    namespace ``ml``): (the store, the kubeconfig's path). Stopped on exit."""
    store = Store()
    handler = type("Handler", (_Handler,), {"store": store})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    address = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": address}}],
        "users": [{"name": "tester", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester", "namespace": "ml"}}],
    }))
    try:
        yield store, kubeconfig
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
