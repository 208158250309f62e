"""Where the cluster is (`KubernetesCluster`, the kubernetes backend's context) and how it is found.

The settings bind the backend and travel in every handle, so ``trainops status NAME`` finds a job with them alone:

- ``kubeconfig``: the kubeconfig file (default: ``$KUBECONFIG``, else ``~/.kube/config`` when it exists, else the
  pod's service account: how a KFP step or an Airflow worker running in the cluster reaches it);
- ``context``: the kubeconfig's context (default: its current one);
- ``namespace``: where the TrainJobs go (default: the context's namespace, else the service account's, else
  ``default``);
- ``shared_dir`` with ``shared_pvc``: a directory trainops and every pod see at the same path (FSx for Lustre, EFS,
  any ReadWriteMany claim), and the claim mounted there in every pod; the job's files live under it as on Slurm.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainops.backends.kit import Problem, SpecError

#: The settings that say where the cluster is: the backend's context, carried by every handle.
CLUSTER_SETTINGS = ("kubeconfig", "context", "namespace", "shared_dir", "shared_pvc")
#: Where a pod finds its service account (the in-cluster configuration the official client reads).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_NAMESPACE = "default"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


@dataclass(frozen=True)
class Connection:
    """How the cluster is reached: ``source`` ``kubeconfig`` (``path``, ``context``) or ``in-cluster`` (the
    service account under ``path``), and the namespace the jobs go to."""

    source: str
    path: str
    context: str | None
    namespace: str


@dataclass(frozen=True)
class KubernetesCluster:
    """Where a cluster's trainops jobs go (the kubernetes backend's context); see the module's docstring."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    shared_dir: str | None = None
    shared_pvc: str | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        for name in ("kubeconfig", "context"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip() or "\0" in value):
                problems.append(Problem(name, f"{value!r} is not a {name}"))
        if self.namespace is not None and not (isinstance(self.namespace, str) and len(self.namespace) <= 63
                                               and _DNS_LABEL.match(self.namespace)):
            problems.append(Problem("namespace", f"{self.namespace!r} is not a namespace name (a DNS label: "
                                                 "lower-case letters, digits and '-', at most 63)"))
        if self.shared_dir is not None and not (isinstance(self.shared_dir, str)
                                                and os.path.isabs(self.shared_dir) and "\0" not in self.shared_dir):
            problems.append(Problem("shared_dir", f"{self.shared_dir!r} is not an absolute path: every pod mounts "
                                                  "the shared claim at this same path"))
        if self.shared_pvc is not None and not (isinstance(self.shared_pvc, str) and len(self.shared_pvc) <= 253
                                                and _DNS_SUBDOMAIN.match(self.shared_pvc)):
            problems.append(Problem("shared_pvc", f"{self.shared_pvc!r} is not a PersistentVolumeClaim name "
                                                  "(lower-case letters, digits, '-' and '.')"))
        if problems:
            raise SpecError(problems, "kubernetes backend settings")

    def given(self) -> dict[str, str]:
        """The settings given (a handle's location)."""
        return {name: value for name in CLUSTER_SETTINGS if (value := getattr(self, name)) is not None}

    def check_shared(self) -> None:
        """Refuse a job without the shared volume: every pod reads the job's files and writes its model there."""
        problems = [Problem(name, "is not set; the kubernetes backend needs the shared volume every pod mounts "
                                  "(-o shared_dir=/fsx/you/trainops -o shared_pvc=fsx-claim)")
                    for name in ("shared_dir", "shared_pvc") if getattr(self, name) is None]
        if problems:
            raise SpecError(problems, "kubernetes backend settings")

    def connection(self, environ: Mapping[str, str] | None = None, home: str | None = None,
                   service_account_dir: str = SERVICE_ACCOUNT_DIR) -> Connection:
        """How the cluster is reached with these settings (see the module's docstring for the defaults).

        Raises `SpecError` naming ``kubeconfig`` when there is neither a kubeconfig nor a service account."""
        environ = os.environ if environ is None else environ
        path = self.kubeconfig or _first_kubeconfig(environ.get("KUBECONFIG", ""))
        if path is None:
            default = Path(home or Path.home()) / ".kube" / "config"
            path = str(default) if default.is_file() else None
        if path is not None:
            if not Path(path).expanduser().is_file():
                raise SpecError(Problem("kubeconfig", f"{path} is not a file; give the cluster's kubeconfig "
                                                      "(-o kubeconfig=PATH or $KUBECONFIG)"),
                                "kubernetes backend settings")
            config = _read_kubeconfig(Path(path).expanduser())
            context = self.context or config.get("current-context")
            namespace = self.namespace or _context_namespace(config, context) or DEFAULT_NAMESPACE
            return Connection("kubeconfig", str(Path(path).expanduser()), context, namespace)
        account = Path(service_account_dir)
        if (account / "token").is_file() and environ.get("KUBERNETES_SERVICE_HOST"):
            namespace = self.namespace or _read_text(account / "namespace") or DEFAULT_NAMESPACE
            return Connection("in-cluster", str(account), None, namespace)
        raise SpecError(Problem("kubeconfig", "no cluster found: $KUBECONFIG is not set, ~/.kube/config does not "
                                              "exist and this is not a pod with a service account; give "
                                              "-o kubeconfig=PATH"), "kubernetes backend settings")


def _first_kubeconfig(value: str) -> str | None:
    """The first file of ``$KUBECONFIG`` (a list, as kubectl reads it; the official client reads the first)."""
    for part in value.split(os.pathsep):
        if part.strip():
            return part.strip()
    return None


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise SpecError(Problem("kubeconfig", f"{path} cannot be read as a kubeconfig ({error})"),
                        "kubernetes backend settings") from error
    return loaded if isinstance(loaded, dict) else {}


def _context_namespace(config: Mapping[str, Any], context: str | None) -> str | None:
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == context:
            namespace = (entry.get("context") or {}).get("namespace")
            return namespace if isinstance(namespace, str) and namespace else None
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
