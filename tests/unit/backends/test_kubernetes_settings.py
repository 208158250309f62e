"""Where the kubernetes backend finds its cluster (kubeconfig, context, namespace) and what each pod works out from
Trainer's PET_* variables (issue 44 items 1 and 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainops.backends.kubernetes.node import NodeError, host_addresses, node_of, slurm_environment
from trainops.backends.kubernetes.settings import KubernetesCluster
from trainops.errors import SpecError

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: work
contexts:
- name: work
  context: {cluster: c, user: u, namespace: ml-team}
- name: other
  context: {cluster: c, user: u}
"""


def _kubeconfig(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KUBECONFIG)
    return path


def test_kubeconfig_comes_from_the_variable_first(tmp_path: Path) -> None:
    given = _kubeconfig(tmp_path / "from-env")
    _kubeconfig(tmp_path / "home" / ".kube" / "config")
    found = KubernetesCluster().connection({"KUBECONFIG": f"{given}:/elsewhere"}, home=str(tmp_path / "home"))
    assert (found.source, found.path, found.context, found.namespace) == ("kubeconfig", str(given), "work",
                                                                          "ml-team")


def test_then_the_home_kubeconfig_with_a_context_and_namespace_given(tmp_path: Path) -> None:
    home = _kubeconfig(tmp_path / ".kube" / "config")
    found = KubernetesCluster(context="other").connection({}, home=str(tmp_path))
    assert (found.path, found.context, found.namespace) == (str(home), "other", "default")
    assert KubernetesCluster(namespace="mine").connection({}, home=str(tmp_path)).namespace == "mine"


def test_then_the_pods_service_account(tmp_path: Path) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text("pipelines\n")
    found = KubernetesCluster().connection({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, home=str(tmp_path),
                                           service_account_dir=str(account))
    assert (found.source, found.namespace) == ("in-cluster", "pipelines")


def test_no_cluster_at_all_is_an_error_naming_kubeconfig(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as refused:
        KubernetesCluster().connection({}, home=str(tmp_path), service_account_dir=str(tmp_path / "none"))
    assert "kubeconfig" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        KubernetesCluster(kubeconfig=str(tmp_path / "missing")).connection({}, home=str(tmp_path))
    assert "is not a file" in str(refused.value)


PET = {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "8", "PET_NODE_RANK": "1",
       "PET_MASTER_ADDR": "digits-1-node-0-0.digits-1", "PET_MASTER_PORT": "29400"}


def test_a_node_is_host_algo_rank_plus_one_with_every_hosts_address() -> None:
    node = node_of(PET)
    assert (node.index, node.host, node.hosts) == (1, "algo-2", ("algo-1", "algo-2", "algo-3"))
    assert node.addresses == {"algo-1": "digits-1-node-0-0.digits-1", "algo-2": "digits-1-node-0-1.digits-1",
                              "algo-3": "digits-1-node-0-2.digits-1"}
    assert (node.processes_per_host, node.master_port) == (8, 29400)


def test_a_master_given_as_an_address_names_host_one_only() -> None:
    assert host_addresses("10.1.2.3", 2) == {"algo-1": "10.1.2.3"}


@pytest.mark.parametrize(("change", "says"), [
    ({"PET_NODE_RANK": None}, "PET_NODE_RANK not set"), ({"PET_NODE_RANK": "3"}, "not below"),
    ({"PET_NNODES": "two"}, "PET_NNODES"),
])
def test_a_pod_without_trainers_variables_is_told_what_is_missing(change: dict, says: str) -> None:
    environ = {key: value for key, value in {**PET, **change}.items() if value is not None}
    with pytest.raises(NodeError) as refused:
        node_of(environ)
    assert says in str(refused.value)


def test_a_node_becomes_the_slurm_node_script_of_its_rank() -> None:
    environment = slurm_environment(node_of(PET), {**PET, "HOSTNAME": "digits-1-node-0-1"})
    assert environment["SLURM_NODEID"] == "1"
    assert environment["SLURM_JOB_NODELIST"].split(",") == ["digits-1-node-0-0.digits-1",
                                                            "digits-1-node-0-1.digits-1",
                                                            "digits-1-node-0-2.digits-1"]
    assert environment["SLURM_LAUNCH_NODE_IPADDR"] == "digits-1-node-0-0.digits-1"
    assert environment["SLURMD_NODENAME"] == "digits-1-node-0-1"
