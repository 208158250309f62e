"""The launch plan: the exact command line and environment additions that start one host's ranks.

``build_plan(config, facts)`` is pure: the same config and host facts always give the same plan, and nothing is
probed, written or started. It follows what AWS's training toolkits do (reference.md, "The container contract"):

- ``torch_distributed``, ``pytorchxla``, SMP v2 and SMDDP's AllGather path: torchrun (``torch.distributed.run``) with
  static rendezvous, ``--node_rank`` = index in the sorted host list, master = first host; on Trainium over
  NeuronCores, optionally under ``neuron_parallel_compile``;
- ``mpi``, ``pytorchddp``, SMDDP's AllReduce path and SMP v1: mpirun from the first host (see :mod:`mpi_plan`);
- ``parameter_server``: on several hosts, a TensorFlow parameter-server process on every host (task ``ps``) beside
  the one worker process (``master`` on the first host, ``worker`` elsewhere), both with ``TF_CONFIG``; on one host
  neither (the toolkit enables parameter servers only with several hosts);
- ``multi_worker_mirrored_strategy``: one process per host with ``TF_CONFIG`` (every host a ``worker``);
- ``none``: one plain process.

In a heterogeneous cluster only the hosts of the distribution's instance group launch the distribution; the first of
them is the master, and hosts of other groups run the script as one plain process (the toolkit's
``distribution_hosts``).

Every rank runs under :mod:`trainops.runtime.rank`, which records how it ended (the failure file's root cause).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from trainops.runtime import catalog
from trainops.runtime.config import LaunchConfig
from trainops.runtime.contract import ContractError
from trainops.runtime.distributions import names_where
from trainops.runtime.environment import env_value, network_environment, script_environment
from trainops.runtime.host_facts import HostFacts

RANK_MODULE = "trainops.runtime.rank"
TORCH_LAUNCHER_MODULE = "trainops.runtime.torch_launcher"
PARAMETER_SERVER_MODULE = "trainops.runtime.parameter_server"

#: The ports the AWS TensorFlow toolkit gives the TF_CONFIG cluster on SageMaker: parameter-server jobs' master and
#: workers, their parameter servers, and MultiWorkerMirroredStrategy's workers.
TF_WORKER_PORT = 2222
TF_PS_PORT = 2223
TF_MWMS_PORT = 8890

#: Line prefix of each rank's output in local runs (``TRAINOPS_LOG_PREFIX`` overrides; empty disables).
DEFAULT_LOCAL_LOG_PREFIX = "[{host} rank {rank}] "

_TORCHRUN_TYPES = names_where(launch="torchrun")
_MPIRUN_TYPES = names_where(launch="mpirun")
_PER_HOST_TYPES = names_where(launch="per_host")
_CHOICE_TYPES = names_where(launch="choice")
_SMDDP_TYPES = names_where(smddp=True)


@dataclass(frozen=True)
class LaunchPlan:
    """What to run on this host. ``argv`` is executed without a shell, with the parent's environment plus ``env``.

    ``mode`` is ``plain`` (one process), ``torchrun``, ``mpirun`` (this host starts every rank of the job) or
    ``mpi_worker`` (another host's mpirun starts this host's ranks; ``argv`` is empty and the launcher waits).
    """

    mode: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    processes_per_host: int
    world_size: int
    node_rank: int
    hosts: tuple[str, ...]
    current_host: str
    local: bool
    record_dir: str
    failure_path: str
    success_path: str
    wait_for_hosts: tuple[str, ...] = ()  # mpirun master: the worker hosts that must be ready first
    coordination: str = ""  # local mpirun: the rendezvous name master and workers meet on
    meeting_dir: str = ""  # mpirun through an agent: the directory every host sees, where the hosts meet
    notes: list[str] = field(default_factory=list)  # human-readable remarks (e.g. smddprun not installed)
    healthcheck: bool = False  # run the GPU health check on this host before starting the ranks
    # TensorFlow parameter servers: the command of this host's parameter-server process (started before the worker,
    # stopped after it), what its environment adds over ``env``, and for a host other than the master the master's
    # worker address, which this host waits to see closed before it stops its parameter server (the toolkit's order).
    parameter_server: tuple[str, ...] = ()
    parameter_server_env: dict[str, str] = field(default_factory=dict)
    wait_for_master: str = ""

    @property
    def master_host(self) -> str:
        return self.hosts[0]

    def dry_run(self) -> dict[str, Any]:
        """The plan as ``launch --dry-run`` prints it: ``{"argv": [...], "env": {...}}`` (env: only what the launch
        adds or overrides, keys sorted), and for parameter-server jobs ``parameter_server``: its argv and what its
        environment adds over ``env``."""
        shown: dict[str, Any] = {"argv": list(self.argv), "env": {key: self.env[key] for key in sorted(self.env)}}
        if self.parameter_server:
            shown["parameter_server"] = {
                "argv": list(self.parameter_server),
                "env": {key: self.parameter_server_env[key] for key in sorted(self.parameter_server_env)}}
        return shown


def distribution_kind(distribution: dict[str, Any]) -> str:
    """Which launcher a canonical distribution needs: ``torchrun``, ``mpirun``, ``per_host`` or ``plain``."""
    kind = distribution["type"]
    if kind in _TORCHRUN_TYPES:
        return "torchrun"
    if kind in _MPIRUN_TYPES:
        return "mpirun"
    if kind in _CHOICE_TYPES:
        return str(distribution["launcher"])
    if kind in _PER_HOST_TYPES:
        return "per_host"
    return "plain"


def is_neuron_host(config: LaunchConfig, facts: HostFacts) -> bool:
    """Whether this host trains on Trainium: NeuronCores detected, or a Neuron instance type and no GPUs."""
    instance = catalog.lookup(config.instance_type)
    return facts.neuron_cores > 0 or (facts.gpus == 0 and instance is not None and instance.accelerator == "neuron")


def processes_per_host(config: LaunchConfig, facts: HostFacts) -> int:
    """Ranks per host: ``TRAINOPS_PROCESSES_PER_HOST``, else the distribution's ``processes_per_host``, else one per
    GPU, else one per NeuronCore, else 1. Plain and TF_CONFIG launches always run one process per host."""
    kind = distribution_kind(config.distribution)
    if kind in ("plain", "per_host"):
        return 1
    if config.processes_per_host_override:
        return config.processes_per_host_override
    configured = config.distribution.get("processes_per_host")
    if configured:
        return int(configured)
    return facts.gpus or facts.neuron_cores or 1


def rank_command(config: LaunchConfig) -> list[str]:
    """How one rank starts the user's script: under the rank wrapper, with the script's ``--key value`` arguments."""
    return [config.python, "-m", RANK_MODULE, config.entry_point, *config.script_arguments]


def _pythonpath(config: LaunchConfig, facts: HostFacts) -> str:
    # The code directory first (sibling modules import, as with the toolkit), trainops where the ranks would not
    # find it otherwise, then whatever the parent had: nothing of the parent's is dropped.
    entries = [config.code_dir]
    if facts.runtime_path:
        entries.append(facts.runtime_path)
    entries += [entry for entry in config.inherited_pythonpath.split(os.pathsep) if entry]
    unique: list[str] = []
    for entry in entries:
        if entry not in unique:
            unique.append(entry)
    return os.pathsep.join(unique)


def common_environment(config: LaunchConfig, facts: HostFacts, mode: str, processes: int) -> dict[str, str]:
    """The additions every mode shares: the ``SM_*`` variables, EFA/NCCL settings, and the ``TRAINOPS_*`` variables
    the rank wrapper and ``trainops.runtime.init()`` read (docs/contracts.md, section 3)."""
    env = script_environment(config, facts.gpus, facts.neuron_cores, facts.cpus)
    launcher = mode
    if mode == "mpirun" and config.distribution["type"] in _SMDDP_TYPES:
        launcher = "smddp"
    if config.distribution["type"] not in _PER_HOST_TYPES:
        # The TensorFlow strategies are the TensorFlow toolkit's, which sets neither NCCL's interface nor a PyTorch
        # rendezvous address; every other launch gets what AWS's PyTorch container sets for every process.
        env.update(network_environment(config, launcher))
        if not config.local:
            env["MASTER_ADDR"] = config.address_of(config.master_host)
            env["MASTER_PORT"] = str(config.rendezvous_port)
    env.update({
        "PYTHONPATH": _pythonpath(config, facts),
        "PYTHONUNBUFFERED": "1",
        "TRAINOPS_BASE_DIR": config.base_dir,
        "TRAINOPS_DISTRIBUTION": env_value(config.distribution),
        "TRAINOPS_DISTRIBUTION_HOSTS": env_value(list(config.training_hosts)),
        "TRAINOPS_LAUNCH_MODE": mode,
        "TRAINOPS_NODE_RANK": str(config.node_rank),
        "TRAINOPS_PROCESSES_PER_HOST": str(processes),
        "TRAINOPS_RECORD_DIR": config.record_dir,
    })
    if config.local and config.log_prefix is None:
        env["TRAINOPS_LOG_PREFIX"] = DEFAULT_LOCAL_LOG_PREFIX
    if config.local and not config.threads_given:
        env["OMP_NUM_THREADS"] = str(local_thread_share(facts.cpus, len(config.hosts), processes))
    return env


def local_thread_share(cpus: int, hosts: int, processes: int) -> int:
    """The threads each rank of a local job gets: this machine's CPUs shared by every rank of every emulated host
    (they all run here), at least one. Without it each rank would start one thread per CPU (torch's intra-op pool and
    OpenMP read ``OMP_NUM_THREADS``; torchrun sets 1 only when it starts several ranks): on 2 cores, 2 hosts of one
    rank trained the digits example 2.5-7x slower than with one thread each (bench/reliability_threads.py)."""
    return max(1, cpus // max(1, hosts * processes))


def base_plan(config: LaunchConfig, mode: str, argv: list[str], env: dict[str, str], processes: int,
               world_size: int | None = None, **extra: Any) -> LaunchPlan:
    """A plan with the fields every mode fills the same way (for the plan builders here and in ``mpi_plan``)."""
    hosts = config.training_hosts if config.in_distribution else config.hosts
    return LaunchPlan(
        mode=mode, argv=argv, env=env, cwd=config.code_dir, processes_per_host=processes,
        world_size=processes * len(hosts) if world_size is None else world_size,
        node_rank=config.node_rank, hosts=hosts,
        current_host=config.current_host, local=config.local, record_dir=config.record_dir,
        failure_path=config.failure_path, success_path=config.success_path, healthcheck=config.healthcheck, **extra)


def require_python_script(config: LaunchConfig, launcher: str) -> None:
    """Refuse (exit 2) a non-Python entry point for a launcher that can only start Python scripts."""
    if not config.entry_point.endswith(".py"):
        raise ContractError(f"entry point {os.path.basename(config.entry_point)!r}: {launcher} launches Python "
                            "scripts only; use a .py entry point")


def torchrun_plan(config: LaunchConfig, facts: HostFacts) -> LaunchPlan:
    """torchrun with static rendezvous: ``--nnodes``, ``--nproc_per_node`` and, with more than one host, the master
    (first host; locally its ``TRAINOPS_HOST_ADDRESSES`` entry), ``--master_port`` (7777 or
    ``TRAINOPS_MASTER_PORT``) and ``--node_rank``. Trainium adds the ``neuron_parallel_compile`` prefix on request."""
    require_python_script(config, "torchrun")
    processes = processes_per_host(config, facts)
    env = common_environment(config, facts, "torchrun", processes)
    if config.distribution["type"] == "pytorchxla":
        env["PJRT_DEVICE"] = "CUDA" if facts.gpus else ("NEURON" if is_neuron_host(config, facts) else "CPU")
    argv: list[str] = []
    if config.neuron_parallel_compile and is_neuron_host(config, facts):
        argv.append("neuron_parallel_compile")
    argv += [config.python, "-m", TORCH_LAUNCHER_MODULE, "--nnodes", str(len(config.training_hosts)),
             "--nproc_per_node", str(processes)]
    if len(config.training_hosts) > 1:
        argv += ["--master_addr", config.address_of(config.master_host), "--master_port",
                 str(config.rendezvous_port), "--node_rank", str(config.node_rank)]
    # torchrun runs the wrapper as a module (-m); the wrapper then runs the user's script in-process.
    argv += ["-m", RANK_MODULE, config.entry_point, *config.script_arguments]
    return base_plan(config, "torchrun", argv, env, processes)


def parameter_servers_enabled(config: LaunchConfig) -> bool:
    """Parameter servers run only with more than one host (the toolkit's rule): on one host the job is a plain
    TensorFlow process without ``TF_CONFIG``."""
    return config.distribution["type"] == "parameter_server" and len(config.training_hosts) > 1


def _tf_ports(config: LaunchConfig) -> tuple[dict[str, int], dict[str, int]]:
    """Worker and parameter-server ports per host: the toolkit's fixed ports on SageMaker; locally, ports derived from
    ``TRAINOPS_MASTER_PORT`` so that simulated hosts on one machine do not collide."""
    hosts = list(config.training_hosts)
    if config.local and config.master_port is not None:
        count = len(hosts)
        return ({host: config.master_port + 1 + index for index, host in enumerate(hosts)},
                {host: config.master_port + 1 + count + index for index, host in enumerate(hosts)})
    worker = TF_MWMS_PORT if config.distribution["type"] == "multi_worker_mirrored_strategy" else TF_WORKER_PORT
    return {host: worker for host in hosts}, {host: TF_PS_PORT for host in hosts}


def tf_config(config: LaunchConfig, parameter_server_task: bool = False) -> dict[str, Any]:
    """The TensorFlow cluster spec for this host, in the AWS TensorFlow toolkit's shape (``"environment": "cloud"``).
    Parameter servers: the first training host is ``master`` (port 2222), the others ``worker``, and every training
    host also runs a ``ps`` task (port 2223); ``parameter_server_task`` gives the ``ps`` task's own view.
    MultiWorkerMirroredStrategy: every training host is a ``worker`` (port 8890)."""
    hosts = list(config.training_hosts)
    worker_ports, ps_ports = _tf_ports(config)

    def addresses(names: list[str], ports: dict[str, int]) -> list[str]:
        return [f"{config.address_of(name)}:{ports[name]}" for name in names]

    if config.distribution["type"] == "multi_worker_mirrored_strategy":
        return {"cluster": {"worker": addresses(hosts, worker_ports)}, "environment": "cloud",
                "task": {"index": hosts.index(config.current_host), "type": "worker"}}
    cluster: dict[str, Any] = {"master": addresses(hosts[:1], worker_ports)}
    if len(hosts) > 1:
        cluster["ps"] = addresses(hosts, ps_ports)
        cluster["worker"] = addresses(hosts[1:], worker_ports)
    if parameter_server_task:
        task = {"index": hosts.index(config.current_host), "type": "ps"}
    elif config.is_master:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": hosts[1:].index(config.current_host), "type": "worker"}
    return {"cluster": cluster, "environment": "cloud", "task": task}


def plain_plan(config: LaunchConfig, facts: HostFacts) -> LaunchPlan:
    """One process on this host: the script under the rank wrapper (or run directly when it is not Python), with
    ``TF_CONFIG`` for the TensorFlow strategies, and beside it the parameter-server process of a parameter-server
    job on several hosts. A host outside the distribution's instance group always runs this plan, plainly."""
    kind = distribution_kind(config.distribution) if config.in_distribution else "plain"
    env = common_environment(config, facts, "plain", 1)
    tensorflow = kind == "per_host" and (config.distribution["type"] == "multi_worker_mirrored_strategy"
                                          or parameter_servers_enabled(config))
    extra: dict[str, Any] = {}
    if tensorflow:
        cluster = tf_config(config)
        env["TF_CONFIG"] = env_value(cluster)
        if parameter_servers_enabled(config):
            extra["parameter_server"] = (config.python, "-m", PARAMETER_SERVER_MODULE)
            extra["parameter_server_env"] = {"TF_CONFIG": env_value(tf_config(config, parameter_server_task=True))}
            if not config.is_master:
                extra["wait_for_master"] = cluster["cluster"]["master"][0]
    if config.entry_point.endswith(".py"):
        argv = rank_command(config)
    else:
        argv = [config.entry_point, *config.script_arguments]
    # Without a distribution each host runs on its own: the world of one process is that process.
    return base_plan(config, "plain", argv, env, 1, world_size=len(config.training_hosts) if tensorflow else 1,
                     **extra)


def with_catalog_neuron_cores(config: LaunchConfig, facts: HostFacts) -> tuple[HostFacts, str]:
    """The host facts with the catalog's NeuronCore count when no probe found any on a Trainium type (the driver's
    sysfs and ``neuron-ls`` missing or not answering; AWS's toolkit hard-codes 64 for ml.trn2.48xlarge), and a note
    saying so; the facts unchanged, and no note, otherwise."""
    instance = catalog.lookup(config.instance_type)
    if facts.neuron_cores or facts.gpus or instance is None or instance.accelerator != "neuron" \
            or not instance.neuron_cores:
        return facts, ""
    if config.local:
        # A simulated Trainium host on a machine without Neuron devices: one process, not the catalog's count.
        return facts, (f"no NeuronCores on this machine: {config.instance_type} runs as if it had none here (on "
                       f"SageMaker: the catalog's {instance.neuron_cores}); set SM_NUM_NEURONS to simulate them")
    note = (f"no NeuronCores found by probing this host: using the instance catalog's {instance.neuron_cores} "
            f"for {config.instance_type}")
    return dataclasses.replace(facts, neuron_cores=instance.neuron_cores), note
