"""What a pod of a trainops TrainJob (or HyperPodPyTorchJob) works out from the variables its controller gives it.

Trainer's torch runtime gives every node's container ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (the
node's index in the JobSet's job, from its completion index) and ``PET_MASTER_ADDR`` / ``PET_MASTER_PORT`` (node 0's
stable name behind the JobSet's headless service, ``<job>-node-0-0.<job>``). trainops' runtime speaks SageMaker's
contract, whose hosts are ``algo-1`` .. ``algo-N``: node rank i is host ``algo-<i+1>``, and every host's address is
node i's stable name (the master's with its pod index replaced), so host 1 is the rendezvous as on SageMaker.

On HyperPod's EKS flavour the pod runs HyperPod's launcher (``hyperpodrun``), which starts this script as its one
worker once the training operator told it the node's rank: the worker has ``GROUP_RANK`` (the node's rank),
``MASTER_ADDR`` / ``MASTER_PORT`` (rank 0's pod) from the launcher, and ``NNODES`` / ``NPROC_PER_NODE`` from the
job's container (`hyperpod_node_of`). The launcher keeps every rank's address in
``/opt/ml/input/config/pod_resourceconfig.json`` (``ips``, by rank) when the operator sends them: read when whole.

Run as a file in a pod (``python3 -I -S <job>/runtime/trainops_k8s_node.py run <job>``), it runs the Slurm node
script laid out beside it (the job's files are laid out as for Slurm, `trainops.backends.slurm.layout`): node rank i
is that script's ``SLURM_NODEID`` i, the hosts' addresses its node list, node 0's address its launch node. So the
contract directory, the host's environment and ``logs/algo-<i+1>.log`` are the same on both engines. Host 1 then
packs the model where the job's output goes (Slurm's ``finish``: ``ended.json`` says where, or the root cause).

Standard library only: the pods need no trainops installed beyond the runtime.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The variables Trainer's torch runtime injects, all of which a node needs.
PET_VARIABLES = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
#: What a HyperPod node's worker needs: from the launcher (rank, master) and from the job's container (the sizes).
HYPERPOD_VARIABLES = ("GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "NNODES", "NPROC_PER_NODE")
#: Where HyperPod's launcher keeps the ranks' addresses (its ``ips``, by rank).
HYPERPOD_RESOURCE_CONFIG = "/opt/ml/input/config/pod_resourceconfig.json"
# Node 0's name: <jobset>-<replicated job>-<job index>-<pod index>[.<subdomain>...]
_POD_INDEX = re.compile(r"^(?P<head>.+)-(?P<index>0)(?P<tail>(\..*)?)\Z")


class NodeError(Exception):
    """The pod's environment is not what Trainer gives a node of a trainops job (the message says what)."""


@dataclass(frozen=True)
class Node:
    """One node of the job, in SageMaker's words."""

    index: int
    host: str
    hosts: tuple[str, ...]
    addresses: dict[str, str]
    processes_per_host: int
    master_port: int


def _whole(environ: Mapping[str, str], name: str, least: int) -> int:
    text = environ.get(name, "")
    if not text.strip().isdigit() or int(text) < least:
        raise NodeError(f"{name}={text!r} is not a whole number of at least {least}; the pod is not one Trainer's "
                        "torch runtime started (check the TrainJob's runtime)")
    return int(text)


def node_of(environ: Mapping[str, str]) -> Node:
    """This pod's node (`Node`) from Trainer's ``PET_*`` variables; `NodeError` naming what is missing."""
    missing = [name for name in PET_VARIABLES if not environ.get(name)]
    if missing:
        raise NodeError(f"{', '.join(missing)} not set; trainops' node command runs in a pod of a TrainJob whose "
                        "runtime is Trainer's torch runtime, which sets them")
    count = _whole(environ, "PET_NNODES", 1)
    rank = _whole(environ, "PET_NODE_RANK", 0)
    processes = _whole(environ, "PET_NPROC_PER_NODE", 1)
    port = _whole(environ, "PET_MASTER_PORT", 1)
    if rank >= count:
        raise NodeError(f"PET_NODE_RANK={rank} is not below PET_NNODES={count}")
    hosts = tuple(f"algo-{index + 1}" for index in range(count))
    master = environ["PET_MASTER_ADDR"]
    return Node(rank, hosts[rank], hosts, host_addresses(master, count), processes, port)


def hyperpod_node_of(environ: Mapping[str, str], resource_config: str = HYPERPOD_RESOURCE_CONFIG) -> Node:
    """This pod's node from what HyperPod's launcher gives its worker; `NodeError` naming what is missing."""
    missing = [name for name in HYPERPOD_VARIABLES if not environ.get(name)]
    if missing:
        raise NodeError(f"{', '.join(missing)} not set; on HyperPod trainops' node command runs as hyperpodrun's "
                        "worker in a pod of a HyperPodPyTorchJob trainops made (its container sets NNODES and "
                        "NPROC_PER_NODE)")
    count = _whole(environ, "NNODES", 1)
    rank = _whole(environ, "GROUP_RANK", 0)
    if rank >= count:
        raise NodeError(f"GROUP_RANK={rank} is not below NNODES={count}")
    hosts = tuple(f"algo-{index + 1}" for index in range(count))
    addresses = _launcher_addresses(resource_config, count) or host_addresses(environ["MASTER_ADDR"], count)
    return Node(rank, hosts[rank], hosts, addresses, _whole(environ, "NPROC_PER_NODE", 1),
                _whole(environ, "MASTER_PORT", 1))


def _launcher_addresses(path: str, count: int) -> dict[str, str] | None:
    """host -> address from HyperPod's launcher file, when it holds every rank's; else None."""
    import json

    try:
        with open(path) as handle:
            ips = json.load(handle).get("ips")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(ips, list) or len(ips) < count or not all(isinstance(ip, str) and ip for ip in ips[:count]):
        return None
    return {f"algo-{index + 1}": ips[index] for index in range(count)}


def node_here(environ: Mapping[str, str]) -> Node:
    """This pod's node: from Trainer's ``PET_*`` variables, else from HyperPod's launcher."""
    if environ.get("PET_NNODES") or not environ.get("GROUP_RANK"):
        return node_of(environ)
    return hyperpod_node_of(environ)


def host_addresses(master: str, count: int) -> dict[str, str]:
    """host -> the stable name of its pod: node 0's (``master``) with its pod index replaced by the node's. A
    master address of another form (an IP) names host 1 only; the others are then reached by rendezvous alone."""
    found = _POD_INDEX.match(master)
    if found is None:
        return {"algo-1": master}
    return {f"algo-{index + 1}": f"{found['head']}-{index}{found['tail']}" for index in range(count)}


#: The Slurm node script beside this one in the job's runtime directory.
SLURM_NODE_FILE = "trainops_slurm_node.py"


def slurm_environment(node: Node, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the Slurm node script reads, for this pod's node."""
    addresses = [node.addresses.get(host, host) for host in node.hosts]
    return {**environ, "SLURM_NODEID": str(node.index), "SLURM_JOB_NODELIST": ",".join(addresses),
            "SLURM_STEP_NODELIST": ",".join(addresses), "SLURM_LAUNCH_NODE_IPADDR": node.addresses["algo-1"],
            "SLURMD_NODENAME": environ.get("HOSTNAME", node.host)}


def _slurm_node() -> Any:
    """The Slurm node script beside this one, loaded as a module: its ``run`` and ``finish`` are called here rather
    than in a Python of their own, one interpreter start less on every pod's way to the runtime."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), SLURM_NODE_FILE)
    spec = importlib.util.spec_from_file_location("trainops_slurm_node", path)
    if spec is None or spec.loader is None:
        raise NodeError(f"{path} is not a Python file; the job's runtime directory is incomplete")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _become_the_runtime(slurm: Any, job_dir: str, environment: Mapping[str, str]) -> None:
    """Run this node's part as Slurm's node script runs it: it becomes the runtime (exec), never returns."""
    os.environ.clear()
    os.environ.update(environment)
    slurm.run(job_dir)


def main(argv: list[str]) -> int:
    """``run JOB_DIR``: this node's part of the job (a TrainJob's pod, or hyperpodrun's worker on HyperPod), as
    Slurm's node script runs it. A node other than host 1 becomes the runtime (exec: the pod's signals reach it
    directly); host 1 runs it in a child (fork), passing the pod's SIGTERM and SIGINT on (a stop, the deadline, an
    eviction), then packs the model where the job's output goes as Slurm's batch host does (``finish``, which writes
    ``ended.json``)."""
    if len(argv) != 2 or argv[0] != "run":
        print("usage: trainops_k8s_node.py run JOB_DIR", file=sys.stderr)
        return 2
    try:
        node = node_here(os.environ)
        slurm = _slurm_node()
    except NodeError as error:
        print(f"trainops: {error}", file=sys.stderr)
        return 2
    environment = slurm_environment(node, os.environ)
    if node.index != 0:
        _become_the_runtime(slurm, argv[1], environment)
        return 1  # not reached: the runtime took this process over
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        try:
            _become_the_runtime(slurm, argv[1], environment)
        except BaseException as error:  # noqa: BLE001 - the Slurm node script refused, or the exec failed
            print(f"trainops: {error}", file=sys.stderr, flush=True)
        finally:
            os._exit(127)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda received, _frame: os.kill(child, received))
    _, status = os.waitpid(child, 0)  # retried by Python across the forwarded signals (PEP 475)
    os.environ.update(environment)
    return int(slurm.finish(argv[1], os.waitstatus_to_exitcode(status)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
