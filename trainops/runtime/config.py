"""The launch configuration: everything the contract and the environment say about this launch, as plain data.

``launch_config(contract, environ)`` reads; it never probes hardware and never writes ``os.environ`` (the torchelastic
layering: parse -> config -> plan -> run). The local-run variables it reads are in docs/contracts.md, section 3.

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops.runtime.contract import Contract, ContractError
from trainops.runtime.hyperparameters import (
    ARGUMENTS_KEY,
    COMMAND_KEY,
    DistributionError,
    decode_value,
    distribution_from_hyperparameters,
    framework_parameters,
    script_arguments,
    user_hyperparameters,
    v3_script_arguments,
)

#: The rendezvous port of AWS's toolkit (torchrun ``--master_port``), used whenever no local port is given.
SAGEMAKER_MASTER_PORT = 7777


def healthcheck_requested(environ: Mapping[str, str], hyperparameters: Mapping[str, Any], hosts: Any = (),
              instance_type: str = "") -> bool:
    """Whether the job runs the health check before training. Asked for explicitly: ``TRAINOPS_HEALTHCHECK`` in its
    environment (``1``/``0``; render sets it from the spec's ``health_check``) or the hyperparameter
    ``trainops_healthcheck``. Otherwise on by default for multi-node GPU jobs on SageMaker, where one slow GPU slows
    every host for the whole run; off on the local backend (its simulated hosts share one machine) and for one host."""
    from trainops.runtime.hyperparameters import decode_value

    for raw in (environ.get("TRAINOPS_HEALTHCHECK"), decode_value(hyperparameters.get("trainops_healthcheck"))):
        if raw is None or str(raw).strip() == "":
            continue
        if raw is True or str(raw).strip().lower() in _YES:
            return True
        if raw is False or str(raw).strip().lower() in _NO:
            return False
    if environ.get("TRAINOPS_LOCAL") == "1" or len(list(hosts)) < 2 or not instance_type:
        return False
    from trainops.runtime import catalog

    instance = catalog.lookup(instance_type)
    return bool(instance and instance.gpus)


_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")


@dataclass(frozen=True)
class LaunchConfig:
    """One host's launch, decided from the contract and the environment; input of :func:`planner.build_plan`."""

    base_dir: str
    hosts: tuple[str, ...]
    current_host: str
    instance_type: str
    network_interface: str
    current_group: str | None
    distribution: dict[str, Any]
    entry_point: str  # absolute path of the user's script
    code_dir: str
    user_hyperparameters: dict[str, Any]
    script_arguments: list[str]
    channels: dict[str, str]
    model_dir: str
    output_dir: str
    output_data_dir: str
    input_dir: str
    input_config_dir: str
    checkpoint_dir: str
    record_dir: str
    failure_path: str
    success_path: str
    resource_config: dict[str, Any] = field(default_factory=dict)
    framework_params: dict[str, Any] = field(default_factory=dict)  # SM_FRAMEWORK_PARAMS (sagemaker_* flags)
    input_data_config: dict[str, Any] = field(default_factory=dict)
    local: bool = False
    host_addresses: dict[str, str] = field(default_factory=dict)
    master_port: int | None = None
    job_name: str = ""
    region: str = ""
    processes_per_host_override: int | None = None
    neuron_parallel_compile: bool = False
    healthcheck: bool = False  # run trainops.runtime.healthcheck before the ranks start (opt-in)
    log_prefix: str | None = None
    inherited_pythonpath: str = ""
    #: Whether the environment (the spec's, or this machine's) sets the ranks' thread count, or asks to leave it to
    #: the libraries (``TRAINOPS_LOCAL_THREADS=0``): then a local launch leaves it alone (`plan.local_thread_share`).
    threads_given: bool = False
    python: str = sys.executable
    #: The hosts of the instance groups that run the distribution (heterogeneous clusters), sorted; None: every host.
    distribution_hosts: tuple[str, ...] | None = None
    #: mpirun through an agent (``TRAINOPS_MPI_AGENT``, set by the slurm backend): the program that starts Open MPI's
    #: daemon on another host (``AGENT HOST COMMAND...``, as ``ssh`` does on SageMaker), and the directory every host
    #: sees where the hosts of the launch meet (``TRAINOPS_MPI_MEETING_DIR``, `mpi_coordination.MeetingDirectory`).
    mpi_agent: str = ""
    mpi_meeting_dir: str = ""

    @property
    def training_hosts(self) -> tuple[str, ...]:
        """The hosts the distribution spans: those of its instance groups, else every host (the toolkit's
        ``distribution_hosts``)."""
        return self.hosts if self.distribution_hosts is None else self.distribution_hosts

    @property
    def in_distribution(self) -> bool:
        """Whether this host takes part in the distribution; a host of another instance group (a data-loading group
        of a heterogeneous cluster) runs the script as one plain process, as the toolkit does."""
        return self.current_host in self.training_hosts

    @property
    def node_rank(self) -> int:
        """This host's index among the training hosts, sorted (SageMaker's ranking); outside them, among all hosts."""
        hosts = self.training_hosts if self.in_distribution else self.hosts
        return hosts.index(self.current_host)

    @property
    def master_host(self) -> str:
        """The first training host in sorted order: where rank 0 runs and torchrun / mpirun rendezvous (the first
        host of the distribution's instance group, whichever group the resource config lists first)."""
        hosts = self.training_hosts or self.hosts
        return hosts[0]

    @property
    def is_master(self) -> bool:
        return self.current_host == self.master_host

    def address_of(self, host: str) -> str:
        """How a host is reached: its entry in ``TRAINOPS_HOST_ADDRESSES`` locally, its name on SageMaker."""
        return self.host_addresses.get(host, host)

    @property
    def rendezvous_port(self) -> int:
        """``TRAINOPS_MASTER_PORT`` locally, else the toolkit's 7777."""
        return self.master_port if self.master_port is not None else SAGEMAKER_MASTER_PORT


def _positive_int(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name)
    if text is None or text.strip() == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ContractError(f"environment variable {name}={text!r}: expected a positive integer") from None
    if value < 1 or value > 65535:
        raise ContractError(f"environment variable {name}={text!r}: expected an integer from 1 to 65535")
    return value


def _host_addresses(environ: Mapping[str, str], hosts: tuple[str, ...]) -> dict[str, str]:
    text = environ.get("TRAINOPS_HOST_ADDRESSES")
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise ContractError("environment variable TRAINOPS_HOST_ADDRESSES: not JSON; expected "
                            '{"algo-1": "127.0.0.1", ...}') from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ContractError('environment variable TRAINOPS_HOST_ADDRESSES: expected {"algo-1": "127.0.0.1", ...}')
    missing = [host for host in hosts if host not in value]
    if missing:
        raise ContractError(f"environment variable TRAINOPS_HOST_ADDRESSES has no address for {', '.join(missing)}")
    return dict(value)


def _entry_point(contract: Contract, hyperparameters: Mapping[str, Any]) -> tuple[str, str]:
    hyper_path = os.path.join(contract.input_config_dir, "hyperparameters.json")
    command = decode_value(hyperparameters.get(COMMAND_KEY))
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise ContractError(f"{hyper_path}: hyperparameter {COMMAND_KEY} must be the shell command to run")
        if contract.code_dir is None:
            raise ContractError(f"no code directory under {contract.base_dir}: put the training code in "
                                "input/data/trainops_code/ or code/, or set TRAINOPS_CODE_DIR")
        # v3's sm_train.sh is run by bash and evals the command there; a host without bash gets POSIX sh.
        return shutil.which("bash") or "/bin/sh", contract.code_dir
    program = decode_value(hyperparameters.get("sagemaker_program"))
    if not isinstance(program, str) or not program.strip():
        raise ContractError(f"{hyper_path}: hyperparameter sagemaker_program is missing: set it to the training "
                            "script's file name, relative to the code directory")
    if contract.code_dir is None:
        raise ContractError(f"no code directory under {contract.base_dir}: put the training code in "
                            "input/data/trainops_code/ or code/, or set TRAINOPS_CODE_DIR")
    path = os.path.normpath(os.path.join(contract.code_dir, program))
    if not os.path.isfile(path):
        raise ContractError(f"entry point {program!r} (hyperparameter sagemaker_program) is not a file in the code "
                            f"directory {contract.code_dir}")
    return path, contract.code_dir


def distribution_hosts(contract: Contract, distribution: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The hosts a distribution spans, as AWS's training toolkit decides them: the instance groups the distribution
    names (``sagemaker_distribution_instance_groups``; with none named, the current host's group when a strategy is
    enabled), each group's hosts from ``resourceconfig.json``. None when every host takes part: no strategy, or a
    resource config without instance groups (a hand-made local contract)."""
    groups_config = contract.resource_config.get("instance_groups") or []
    if distribution["type"] == "none" or not isinstance(groups_config, list) or not groups_config:
        return None
    named = distribution.get("instance_groups")
    wanted = list(named) if named else [contract.current_group or "homogeneousCluster"]
    hosts: list[str] = []
    for group in groups_config:
        if not isinstance(group, Mapping) or group.get("instance_group_name") not in wanted:
            continue
        members = group.get("hosts")
        if not isinstance(members, list) or not all(isinstance(host, str) for host in members):
            raise ContractError(f"{os.path.join(contract.input_config_dir, 'resourceconfig.json')}: instance group "
                                f"{group.get('instance_group_name')!r} needs 'hosts', a list of host names")
        hosts += [host for host in members if host in contract.hosts and host not in hosts]
    if not named and not hosts:
        return None  # the current group is not described: every host, as before instance groups existed
    return tuple(sorted(hosts))


def _arguments(hyperparameters: Mapping[str, Any], user: dict[str, Any]) -> list[str]:
    """The script's arguments: a v3 command's shell gets ``-c <command>`` (hyperparameters reach it in SM_HPS only,
    as in v3); a v3 entry script v3's drivers' ``--key value``; any other the toolkit's."""
    command = decode_value(hyperparameters.get(COMMAND_KEY))
    if command is not None:
        return ["-c", str(command)]
    if decode_value(hyperparameters.get(ARGUMENTS_KEY)) == "v3":
        return v3_script_arguments(hyperparameters)
    return script_arguments(user)


def launch_config(contract: Contract, environ: Mapping[str, str] | None = None,
                  python: str | None = None) -> LaunchConfig:
    """Decide this host's launch from its contract and the environment. Raises :class:`ContractError` (exit 2) on
    anything malformed: the message says which file or variable, and what to do."""
    environ = os.environ if environ is None else environ
    hyperparameters = contract.hyperparameters
    try:
        distribution = distribution_from_hyperparameters(hyperparameters)
    except DistributionError as error:
        raise ContractError(f"{os.path.join(contract.input_config_dir, 'hyperparameters.json')}: {error}") from None
    entry_point, code_dir = _entry_point(contract, hyperparameters)
    # With the toolkit's hyperparameters, mp_parameters is a user hyperparameter (--mp_parameters k=v,...), as the
    # toolkit passes it; the trainops launcher carries SMP's parameters in the distribution and SM_HP_MP_PARAMETERS
    # only, so scripts written for trainops keep their own arguments.
    user = user_hyperparameters(hyperparameters)
    job_name = environ.get("TRAINOPS_JOB_NAME") or decode_value(hyperparameters.get("sagemaker_job_name")) or ""
    region = decode_value(hyperparameters.get("sagemaker_region")) or environ.get("AWS_REGION", "")
    return LaunchConfig(
        base_dir=contract.base_dir,
        hosts=contract.hosts,
        current_host=contract.current_host,
        instance_type=contract.instance_type,
        network_interface=contract.network_interface,
        current_group=contract.current_group,
        distribution=distribution,
        entry_point=entry_point,
        code_dir=code_dir,
        user_hyperparameters=user,
        script_arguments=_arguments(hyperparameters, user),
        channels=dict(contract.channels),
        model_dir=contract.model_dir,
        output_dir=contract.output_dir,
        output_data_dir=contract.output_data_dir,
        input_dir=contract.input_dir,
        input_config_dir=contract.input_config_dir,
        checkpoint_dir=os.path.abspath(environ.get("TRAINOPS_CHECKPOINT_DIR") or contract.default_checkpoint_dir),
        record_dir=contract.record_dir,
        failure_path=contract.failure_path,
        success_path=contract.success_path,
        resource_config=dict(contract.resource_config),
        framework_params=framework_parameters(hyperparameters),
        input_data_config=dict(contract.input_data_config),
        local=environ.get("TRAINOPS_LOCAL") == "1",
        host_addresses=_host_addresses(environ, contract.hosts),
        master_port=_positive_int(environ, "TRAINOPS_MASTER_PORT"),
        job_name=str(job_name),
        region=str(region),
        processes_per_host_override=_positive_int(environ, "TRAINOPS_PROCESSES_PER_HOST"),
        neuron_parallel_compile=bool(distribution.get("neuron_parallel_compile"))
        or environ.get("RUN_NEURON_PARALLEL_COMPILE") == "1",
        healthcheck=healthcheck_requested(environ, hyperparameters, contract.hosts, contract.instance_type),
        log_prefix=environ.get("TRAINOPS_LOG_PREFIX"),
        inherited_pythonpath=environ.get("PYTHONPATH", ""),
        threads_given="OMP_NUM_THREADS" in environ or environ.get("TRAINOPS_LOCAL_THREADS") == "0",
        python=python or sys.executable,
        distribution_hosts=distribution_hosts(contract, distribution),
        **_mpi_agent(environ),
    )


def _mpi_agent(environ: Mapping[str, str]) -> dict[str, str]:
    """``TRAINOPS_MPI_AGENT`` and ``TRAINOPS_MPI_MEETING_DIR``: both or neither, both absolute paths."""
    agent, meeting = environ.get("TRAINOPS_MPI_AGENT", ""), environ.get("TRAINOPS_MPI_MEETING_DIR", "")
    if not agent and not meeting:
        return {}
    for name, value in (("TRAINOPS_MPI_AGENT", agent), ("TRAINOPS_MPI_MEETING_DIR", meeting)):
        if not os.path.isabs(value):
            raise ContractError(f"environment variable {name}={value!r}: mpirun through an agent needs both "
                                "TRAINOPS_MPI_AGENT and TRAINOPS_MPI_MEETING_DIR, each an absolute path")
    return {"mpi_agent": agent, "mpi_meeting_dir": meeting}
