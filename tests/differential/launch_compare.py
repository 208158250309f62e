"""trainops' launch plan (`python -m trainops.runtime launch --dry-run`) against what AWS's PyTorch and TensorFlow
toolkits launch.

Both sides are reduced to what decides the launch: the launcher (one process, torchrun, mpirun from the first host or
a waiting MPI worker), ranks per host, torchrun's rendezvous, mpirun's host list and process count, the user's
arguments, the variables the ranks get (EFA / NCCL / SMDDP / rendezvous) and the SM_* variables scripts read; for the
TensorFlow toolkit's cases (ids ``tf-*``) also the worker's TF_CONFIG, the parameter server the host starts (its
cluster and task index) and the master a worker host waits for before its parameter server stops.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

from differential.compare import Outcome, Verdict, differences
from differential.generate import _write_contract

#: Variables that change how ranks communicate; both sides must give the ranks the same values.
RANK_VARIABLES = ("NCCL_SOCKET_IFNAME", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE", "NCCL_PROTO",
                  "MASTER_ADDR", "MASTER_PORT", "SMDATAPARALLEL_USE_SINGLENODE", "SMDATAPARALLEL_USE_HOMOGENEOUS",
                  "SMDATAPARALLEL_SERVER_ADDR", "SMDATAPARALLEL_SERVER_PORT", "SAGEMAKER_INSTANCE_TYPE")
#: The SM_* variables user scripts read, compared as values (JSON ones decoded).
SCRIPT_VARIABLES = ("SM_HPS", "SM_USER_ARGS", "SM_NUM_GPUS", "SM_NUM_NEURONS", "SM_HOSTS", "SM_CURRENT_HOST",
                    "SM_CHANNEL_TRAIN", "SM_FRAMEWORK_PARAMS", "SM_CURRENT_INSTANCE_TYPE", "SM_HP_EPOCHS",
                    "SM_HP_LR", "SM_HP_B", "SM_CURRENT_INSTANCE_GROUP", "SM_CURRENT_INSTANCE_GROUP_HOSTS",
                    "SM_INSTANCE_GROUPS", "SM_INSTANCE_GROUPS_DICT", "SM_DISTRIBUTION_INSTANCE_GROUPS", "SM_IS_HETERO")
_MODES = {"Process": "plain", "TorchDistributed": "torchrun", "PyTorchXLA": "torchrun"}


def _decoded(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _forwarded(argv: list[str], env: dict[str, str]) -> dict[str, str]:
    """What mpirun's -x options give remote ranks: NAME=VALUE as written, NAME with the launcher's value."""
    forwarded = {}
    for index, word in enumerate(argv[:-1]):
        if word != "-x":
            continue
        item = argv[index + 1]
        name, _, value = item.partition("=")
        if "=" in item:
            forwarded[name] = value
        elif name in env:
            forwarded[name] = env[name]
    return forwarded


def _tensorflow(summary: dict[str, Any], script_env: dict[str, str], parameter_server: dict[str, Any] | None,
                waits_for_master: str | None) -> dict[str, Any]:
    summary["tf_config"] = _decoded(script_env.get("TF_CONFIG"))
    summary["parameter_server"] = parameter_server
    summary["waits_for_master"] = waits_for_master
    return summary


def _summary(mode: str, argv: list[str], env: dict[str, str], processes: int | None, user_args: list[str],
             script_env: dict[str, str]) -> dict[str, Any]:
    summary: dict[str, Any] = {"mode": mode, "user_args": list(user_args)}
    if mode != "plain":
        summary["processes_per_host"] = processes
    if mode == "torchrun":
        summary["torchrun"] = {name: _option(argv, f"--{name}") for name in
                               ("nnodes", "nproc_per_node", "master_addr", "master_port", "node_rank")}
        summary["neuron_parallel_compile"] = "neuron_parallel_compile" in argv
    if mode == "mpirun":
        summary["mpirun"] = {"host": _option(argv, "--host"), "np": _option(argv, "-np")}
        ranks = _forwarded(argv, env)
    elif mode == "mpi_worker":
        ranks = {}  # the master's mpirun starts this host's ranks with what it forwards
    else:
        ranks = env
    summary["rank_env"] = {name: ranks[name] for name in RANK_VARIABLES if name in ranks}
    summary["script_env"] = {name: _decoded(script_env.get(name)) for name in SCRIPT_VARIABLES
                             if name in script_env}
    return summary


def toolkit_summary(case: dict[str, Any]) -> dict[str, Any]:
    toolkit = case["toolkit"]
    command = toolkit["command"]
    env = {**toolkit["env_vars"], **toolkit["os_environ"]}
    if toolkit["runner"] in ("MPI", "SMDataParallel"):
        mode = "mpirun" if command else "mpi_worker"
    else:
        mode = _MODES[toolkit["runner"]]
    summary = _summary(mode, command, env, toolkit.get("processes_per_host"), toolkit["args"], toolkit["env_vars"])
    if case["id"].startswith("tf-"):
        _tensorflow(summary, toolkit["env_vars"], toolkit["parameter_server"], toolkit["waits_for_master"])
    return summary


def trainops_launch(case: dict[str, Any]) -> Outcome:
    """The trainops plan for the same contract, as `launch --dry-run` builds it (pure: nothing runs)."""
    from trainops.runtime.config import launch_config
    from trainops.runtime.contract import ContractError, read_contract
    from trainops.runtime.host_facts import HostFacts
    from trainops.runtime.planner import build_plan

    with tempfile.TemporaryDirectory(prefix="trainops-launch-") as directory:
        base = Path(directory) / "opt" / "ml"
        _write_contract(base, case)
        try:
            contract = read_contract(str(base), environ={})
            config = launch_config(contract, environ={}, python="<python>")
            facts = HostFacts(gpus=case["gpus"], neuron_cores=case["neuron_cores"], cpus=96, smddprun=None,
                              is_root=True)
            plan = build_plan(config, facts)
        except ContractError as error:
            return Outcome(False, error=str(error))
        text = json.dumps(plan.dry_run()).replace(str(base), "/opt/ml")
        dry_run = json.loads(text)
        summary = _summary(plan.mode, dry_run["argv"], dry_run["env"], plan.processes_per_host,
                           list(config.script_arguments), dry_run["env"])
        if case["id"].startswith("tf-"):
            server = None
            if plan.parameter_server:
                ps_config = json.loads(plan.parameter_server_env["TF_CONFIG"])
                server = {"cluster": ps_config["cluster"], "task_index": ps_config["task"]["index"]}
            waits = plan.wait_for_master.rpartition(":")[0] or None
            _tensorflow(summary, dry_run["env"], server, waits)
        return Outcome(True, value=summary)


def judge_launch(case: dict[str, Any]) -> Verdict:
    from differential.adjudications import LAUNCH_RULES

    oracle = Outcome(True, value=toolkit_summary(case))
    ours = trainops_launch(case)
    for rule in LAUNCH_RULES:
        if rule.applies(case, oracle, ours):
            oracle, ours = rule.normalise(case, copy.deepcopy(oracle), copy.deepcopy(ours))
            detail = _detail(oracle, ours)
            return Verdict(case["id"], "disagree" if detail else "adjudicated", rule.name, detail)
    detail = _detail(oracle, ours)
    return Verdict(case["id"], "disagree" if detail else "agree", "", detail)


def _detail(oracle: Outcome, ours: Outcome) -> str:
    if not ours.accepted:
        return f"the toolkit launches, trainops refuses: {ours.error[:300]}"
    return "; ".join(differences(oracle.value, ours.value))
