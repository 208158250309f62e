"""mpirun plans: plain MPI, SMDDP's AllReduce path (``smddp`` with ``launcher: mpirun``, ``pytorchddp``) and SMP v1.

On SageMaker this is the AWS toolkit's command: from the first host, ``mpirun --host algo-1:P,algo-2:P -np N*P`` with
its MCA options and ``-x`` forwarding; the other hosts start no ranks themselves (Open MPI starts theirs) and wait for
the master. SMDDP adds its ``SMDATAPARALLEL_*`` variables, EFA settings and ``smddprun`` when the image has it.

A local simulation has one machine and no ssh: the master host's launcher runs every rank of the job on localhost
(``--oversubscribe``), each rank's wrapper takes its simulated host from ``OMPI_COMM_WORLD_RANK`` and applies that
host's environment, which the other hosts' launchers hand over when they register with the master
(:mod:`trainops.runtime.mpi_coordination`; docs/contracts.md, section 3).

Through an agent (``TRAINOPS_MPI_AGENT``: a Slurm job's nodes, which have no ssh between them either): mpirun on the
first host reaches each host, ``algo-N`` included, through the agent (Open MPI's ``plm_rsh_agent``; the slurm
backend's starts the daemon with ``srun`` on the host's node, with mpirun's environment), so every rank runs on its
own host. The hosts meet in a directory they all see (``TRAINOPS_MPI_MEETING_DIR``) the way local hosts meet on a
socket: each hands over its environment, which its ranks apply, and gets the outcome.

Custom MPI options are split like a shell would (``shlex``) and passed as arguments; shell metacharacters are an
error, as in the job spec.
"""

from __future__ import annotations

import os
import shlex

from trainops.runtime import catalog
from trainops.runtime.config import LaunchConfig
from trainops.runtime.contract import ContractError
from trainops.runtime.distributions import names_where
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.plan import (
    LaunchPlan,
    base_plan,
    common_environment,
    processes_per_host,
    rank_command,
    require_python_script,
)

#: The same set the job spec rejects (trainops.spec.base.SHELL_METACHARACTERS); the runtime cannot import pydantic.
SHELL_METACHARACTERS = frozenset(";&|`$<>(){}!\n\r\\*?")

#: The remote-shell agent a local simulation names (it is never started: every rank runs on localhost).
LOCAL_RSH_AGENT = "/bin/false"

#: A batch system's allocation Open MPI would read (its ``ras`` components) and launch through instead of the
#: agent: mpirun through an agent runs inside a Slurm job, on the contract's hosts only.
ALLOCATIONS_LEFT_ALONE = "^slurm,gridengine,tm,lsf,alps"

#: SMDDP's server port on the master host in multi-host jobs (the toolkit's value).
SMDDP_SERVER_PORT = 7592

_SMDDP_TYPES = names_where(smddp=True)


def split_custom_mpi_options(options: str, source: str = "custom_mpi_options") -> tuple[dict[str, str], list[str]]:
    """Split custom mpirun options into ``(known, rest)``: ``known`` holds the toolkit's own option ``--NCCL_DEBUG
    LEVEL`` (it becomes ``-x NCCL_DEBUG=LEVEL``), ``rest`` the arguments passed to mpirun as they are. Raises
    :class:`ContractError` on shell metacharacters or unbalanced quotes."""
    found = sorted(SHELL_METACHARACTERS.intersection(options))
    if found:
        shown = " ".join(repr(char) for char in found)
        raise ContractError(f"{source}: contains shell metacharacters ({shown}); options are split like a shell "
                            "would and passed as arguments, never run through a shell: remove them")
    try:
        words = shlex.split(options)
    except ValueError as error:
        raise ContractError(f"{source}: cannot be split into arguments ({error}): check the quotes") from None
    known: dict[str, str] = {}
    rest: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--NCCL_DEBUG" and index + 1 < len(words):
            known["NCCL_DEBUG"] = words[index + 1]
            index += 2
            continue
        if word.startswith("--NCCL_DEBUG="):
            known["NCCL_DEBUG"] = word.split("=", 1)[1]
        else:
            rest.append(word)
        index += 1
    return known, rest


def smddp_environment(config: LaunchConfig) -> dict[str, str]:
    """SMDDP's variables: single-node or homogeneous mode, and for several hosts its server address and port and the
    instance type; on SageMaker also ``FI_PROVIDER=efa`` and ``RDMAV_FORK_SAFE=1``, which the toolkit always sets for
    SMDDP (EFA details per instance type come from :func:`environment.network_environment`)."""
    env: dict[str, str] = {}
    if len(config.training_hosts) == 1:
        env["SMDATAPARALLEL_USE_SINGLENODE"] = "1"
    else:
        env["SMDATAPARALLEL_USE_HOMOGENEOUS"] = "1"
        env["SMDATAPARALLEL_SERVER_ADDR"] = config.address_of(config.master_host)
        env["SMDATAPARALLEL_SERVER_PORT"] = str(SMDDP_SERVER_PORT)
        env["SAGEMAKER_INSTANCE_TYPE"] = config.instance_type
    return env


def coordination_name(config: LaunchConfig) -> str:
    """The name (a Linux abstract socket) on which a local simulation's hosts meet the master's launcher: unique per
    job and rendezvous port, so concurrent local jobs never meet each other."""
    return f"trainops-mpi/{config.job_name or 'job'}/{config.rendezvous_port}"


def _mca(name: str, value: str) -> list[str]:
    return ["-mca", name, value]


def mpirun_plan(config: LaunchConfig, facts: HostFacts) -> LaunchPlan:
    """The mpirun plan for this host: the whole job's command on the first host, a waiting ``mpi_worker`` plan on the
    others."""
    require_python_script(config, "mpirun")
    distribution = config.distribution
    kind = distribution["type"]
    options = str(distribution.get("custom_mpi_options") or "")
    known, custom = split_custom_mpi_options(options, f"distribution.custom_mpi_options ({kind})")
    processes = processes_per_host(config, facts)
    hosts = config.training_hosts
    total = processes * len(hosts)
    smddp = kind in _SMDDP_TYPES
    env = common_environment(config, facts, "mpirun", processes)
    env["MASTER_ADDR"] = config.address_of(config.master_host)
    env["MASTER_PORT"] = str(config.rendezvous_port)
    if smddp:
        env.update(smddp_environment(config))
    env.update(known)
    notes: list[str] = []
    meeting = config.mpi_meeting_dir if config.mpi_agent and not config.local else ""
    if meeting:
        env["TRAINOPS_HOST_ENV_DIR"] = os.path.join(meeting, "hosts")
    if not config.is_master:
        if config.local:
            env["TRAINOPS_COORDINATION"] = coordination_name(config)
        return base_plan(config, "mpi_worker", [], env, processes, wait_for_hosts=(config.master_host,),
                          coordination=coordination_name(config) if config.local else "", meeting_dir=meeting)
    if facts.is_root:
        # Open MPI 4 refuses root without both the flag and these two variables.
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if not facts.mpirun:
        raise ContractError("mpirun is not installed on this machine (trainops looked next to the image's Python, "
                            "on its own PATH and in the system directories, never on the job's PATH): install Open "
                            "MPI (apt-get install openmpi-bin), or choose a torchrun distribution")
    # Locally the image's mpirun as trainops found it (`HostFacts.mpirun`, an absolute path); on SageMaker the name,
    # found on the container's PATH as AWS's toolkit finds it.
    argv = [facts.mpirun]
    if config.local:
        env["TRAINOPS_HOST_ENV_DIR"] = os.path.join(config.record_dir, "hosts")
        env["TRAINOPS_COORDINATION"] = coordination_name(config)
        argv += ["--host", f"localhost:{total}", "-np", str(total), "--allow-run-as-root", "--oversubscribe"]
        # Every rank is on this machine: mpirun needs no ssh (it would look for one on the job's PATH and give up
        # where that PATH has none), and started by its absolute path it must not prefix the ranks' PATH with its
        # own directory (--noprefix): the ranks see the PATH the job asked for, as under the image's mpirun.
        argv += ["--noprefix", *_mca("plm_rsh_agent", LOCAL_RSH_AGENT)]
    elif meeting:
        # Every host, the first one included, is reached through the agent, which gives Open MPI's daemon mpirun's
        # environment (no -x: each rank then applies its own host's); the daemons stay in the foreground of the
        # agent's command (--leave-session-attached), so the batch system tracks and stops them with the job.
        argv += ["--host", ",".join(f"{host}:{processes}" for host in hosts), "-np", str(total),
                 "--allow-run-as-root", "--leave-session-attached"]
        argv += _mca("plm", "rsh") + _mca("plm_rsh_agent", config.mpi_agent) + _mca("plm_rsh_no_tree_spawn", "1")
        argv += _mca("ras", ALLOCATIONS_LEFT_ALONE)
    else:
        interface = config.network_interface
        # The toolkit's host list: plain names for one process per host (MPI) or one host (SMDDP), host:slots else.
        plain_names = processes == 1 if not smddp else len(hosts) == 1
        host_list = ",".join(hosts) if plain_names else ",".join(f"{host}:{processes}" for host in hosts)
        argv += ["--host", host_list, "-np", str(total), "--allow-run-as-root", "--tag-output"]
        if smddp:
            argv.append("--oversubscribe")
        argv += _mca("btl_tcp_if_include", interface) + _mca("oob_tcp_if_include", interface)
        argv += _mca("plm_rsh_no_tree_spawn", "1")
        if smddp:
            argv += _mca("plm_rsh_num_concurrent", str(len(hosts)))
    argv += ["-bind-to", "none", "-map-by", "slot"]
    argv += _mca("pml", "ob1") + _mca("btl", "^openib") + _mca("orte_abort_on_non_zero_status", "1")
    # Containers forbid the cross-memory-attach single copy (ptrace); the toolkit turns it off for SMDDP too.
    argv += _mca("btl_vader_single_copy_mechanism", "none")
    if not config.local and not meeting:
        # Remote ranks get only what -x forwards (local ones inherit mpirun's whole environment).
        argv += ["-x", f"NCCL_SOCKET_IFNAME={config.network_interface}", "-x", "LD_LIBRARY_PATH", "-x", "PATH"]
        for name in sorted(env):
            if name not in ("PATH", "LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME") and not name.startswith("OMPI_"):
                argv += ["-x", name]
    argv += custom
    if smddp:
        if facts.smddprun:
            argv.append("smddprun")
        else:
            notes.append("smddprun is not installed on this host: ranks start without it")
    argv += rank_command(config)
    instance = catalog.lookup(config.instance_type)
    if smddp and not config.local and instance is not None and not instance.smddp_supported:
        notes.append(f"SMDDP does not support {config.instance_type} (AWS documentation)")
    return base_plan(config, "mpirun", argv, env, processes, wait_for_hosts=tuple(hosts[1:]),
                      coordination=coordination_name(config) if config.local else "", meeting_dir=meeting,
                      notes=notes)
