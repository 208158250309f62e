"""From a contract directory and the environment to the launch config, and on to the same plan by either route."""

from __future__ import annotations

import json
import os

import pytest

from trainops.runtime.config import launch_config
from trainops.runtime.contract import ContractError, read_contract
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.planner import build_plan

LOCAL = {"TRAINOPS_LOCAL": "1", "TRAINOPS_HOST_ADDRESSES": json.dumps({"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}),
         "TRAINOPS_MASTER_PORT": "29555", "TRAINOPS_JOB_NAME": "job-1", "TRAINOPS_CHECKPOINT_DIR": "/tmp/ckpt"}


def config_of(base, environ=None):
    return launch_config(read_contract(base, environ or {}), environ or {}, python="/usr/bin/python3")


def test_config_decodes_the_contract(contract_dir):
    base = contract_dir(hosts=["algo-1", "algo-2"], current="algo-2",
                        hyperparameters={"epochs": 3, "name": "cnn", "sagemaker_job_name": "from-hp",
                                         "trainops_distribution": {"type": "torch_distributed"}})
    config = config_of(base, LOCAL)
    assert config.entry_point == f"{base}/code/train.py"
    assert config.user_hyperparameters == {"epochs": 3, "name": "cnn"}
    assert config.script_arguments == ["--epochs", "3", "--name", "cnn"]
    assert config.distribution["type"] == "torch_distributed"
    assert config.local and config.master_port == 29555 and config.job_name == "job-1"
    assert config.checkpoint_dir == "/tmp/ckpt"
    assert config.node_rank == 1 and not config.is_master
    assert config.address_of("algo-1") == "127.0.0.1"


def test_sagemaker_defaults(contract_dir):
    config = config_of(contract_dir(hyperparameters={"sagemaker_job_name": "from-hp"}))
    assert not config.local and config.rendezvous_port == 7777 and config.job_name == "from-hp"
    assert config.checkpoint_dir.endswith("/ml/checkpoints")


@pytest.mark.parametrize("environ, message", [
    ({"TRAINOPS_MASTER_PORT": "http"}, "TRAINOPS_MASTER_PORT"),
    ({"TRAINOPS_MASTER_PORT": "70000"}, "from 1 to 65535"),
    ({"TRAINOPS_HOST_ADDRESSES": "{"}, "not JSON"),
    ({"TRAINOPS_HOST_ADDRESSES": '{"algo-9": "127.0.0.1"}'}, "no address for algo-1"),
    ({"TRAINOPS_PROCESSES_PER_HOST": "0"}, "TRAINOPS_PROCESSES_PER_HOST"),
    ({"TRAINOPS_MPI_AGENT": "/job/slurm/mpi-agent"}, "TRAINOPS_MPI_MEETING_DIR"),
    ({"TRAINOPS_MPI_AGENT": "mpi-agent", "TRAINOPS_MPI_MEETING_DIR": "/job/mpi"}, "absolute path"),
])
def test_bad_local_variables_are_named(contract_dir, environ, message):
    with pytest.raises(ContractError, match=message):
        config_of(contract_dir(), environ)


def test_missing_entry_point(contract_dir, tmp_path):
    base = contract_dir()
    hyper = f"{base}/input/config/hyperparameters.json"
    with open(hyper, "w") as handle:
        json.dump({"epochs": "3"}, handle)
    with pytest.raises(ContractError, match="sagemaker_program is missing"):
        config_of(base)
    with open(hyper, "w") as handle:
        json.dump({"sagemaker_program": json.dumps("absent.py")}, handle)
    with pytest.raises(ContractError, match="'absent.py'.*not a file"):
        config_of(base)


def test_bad_distribution_is_a_contract_error(contract_dir):
    base = contract_dir(hyperparameters={"trainops_distribution": {"type": "horovod"}})
    with pytest.raises(ContractError, match="hyperparameters.json: trainops_distribution: unknown"):
        config_of(base)


# The same distribution, spelt by the trainops launcher and by the SDK for the toolkit, must give the same plan.
ROUTES = [
    ({"type": "torch_distributed"}, {"sagemaker_torch_distributed_enabled": True}),
    ({"type": "smddp"}, {"sagemaker_distributed_dataparallel_enabled": True}),
    ({"type": "smp", "parameters": {"hybrid_shard_degree": 4}},
     {"mp_parameters": {"hybrid_shard_degree": 4}, "sagemaker_torch_distributed_enabled": True,
      "sagemaker_distributed_dataparallel_enabled": False}),
    ({"type": "mpi", "processes_per_host": 2, "custom_mpi_options": "-x FOO=1"},
     {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
      "sagemaker_mpi_custom_mpi_options": "-x FOO=1"}),
    ({"type": "parameter_server"}, {"sagemaker_parameter_server_enabled": True}),
]


@pytest.mark.parametrize("canonical, toolkit", ROUTES, ids=[c["type"] for c, _ in ROUTES])
@pytest.mark.parametrize("current", ["algo-1", "algo-2"])
def test_toolkit_and_trainops_routes_give_the_same_plan(contract_dir, canonical, toolkit, current):
    hosts = ["algo-1", "algo-2"]
    script_mode = {"epochs": 3, "sagemaker_region": "us-east-1", "sagemaker_job_name": "job-1"}
    trainops = contract_dir(hosts=hosts, current=current, name="trainops", instance_type="ml.p4d.24xlarge",
                            hyperparameters={**script_mode, "trainops_distribution": canonical})
    facts = HostFacts(gpus=8, cpus=96, smddprun="/usr/local/bin/smddprun")
    first = build_plan(config_of(trainops), facts)
    assert first.env["TRAINOPS_DISTRIBUTION"]
    # The same directory, rewritten with the toolkit's keys: the comparison is about what the hyperparameters say.
    sdk = contract_dir(hosts=hosts, current=current, name="trainops", instance_type="ml.p4d.24xlarge",
                       hyperparameters={**script_mode, "sagemaker_instance_type": "ml.p4d.24xlarge",
                                        "sagemaker_container_log_level": 20, **toolkit})
    second = build_plan(config_of(sdk), facts)
    # SM_FRAMEWORK_PARAMS is the toolkit's view of the sagemaker_* hyperparameters themselves (issue 14), so it
    # differs by route by definition; everything that launches must not.
    assert json.loads(second.env.pop("SM_FRAMEWORK_PARAMS")) == {
        key: value for key, value in second_hyperparameters(toolkit).items()}
    assert json.loads(first.env.pop("SM_FRAMEWORK_PARAMS")) == {}
    if "mp_parameters" in toolkit:
        # The toolkit route hands SMP's parameters to the script as it does (--mp_parameters k=v); the trainops
        # launcher keeps them in the distribution and SM_HP_MP_PARAMETERS (issue 14).
        index = second.argv.index("--mp_parameters")
        assert second.argv[index + 1] == "hybrid_shard_degree=4"
        del second.argv[index:index + 2]
        assert json.loads(second.env["SM_HPS"])["mp_parameters"] == {"hybrid_shard_degree": 4}
        for name in ("SM_HPS", "SM_USER_ARGS", "SM_TRAINING_ENV"):
            first.env.pop(name)
            second.env.pop(name)
        second.env.pop("SM_HP_MP_PARAMETERS")
        first.env.pop("SM_HP_MP_PARAMETERS")
    assert first.dry_run() == second.dry_run()
    assert first == second


def second_hyperparameters(toolkit):
    return {"sagemaker_instance_type": "ml.p4d.24xlarge",
            **{key: value for key, value in toolkit.items() if key.startswith("sagemaker_")}}


# --- heterogeneous clusters (issue 27 item 3) ---------------------------------------------------------------------

def _with_groups(base: str, current: str, groups: list[tuple[str, list[str]]]) -> None:
    path = os.path.join(base, "input", "config", "resourceconfig.json")
    with open(path, encoding="utf-8") as handle:
        resource = json.load(handle)
    resource["instance_groups"] = [{"instance_group_name": name, "instance_type": "ml.c5.xlarge", "hosts": hosts}
                                   for name, hosts in groups]
    resource["current_group_name"] = next(name for name, hosts in groups if current in hosts)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(resource, handle)


@pytest.mark.parametrize("hyperparameters, current, expected, master", [
    # the named group's hosts, its first host the master, whichever group is listed first
    ({"sagemaker_mpi_enabled": True, "sagemaker_distribution_instance_groups": ["gpus"]}, "algo-3",
     ("algo-2", "algo-3"), "algo-2"),
    # a host of the other group is outside the distribution
    ({"sagemaker_mpi_enabled": True, "sagemaker_distribution_instance_groups": ["gpus"]}, "algo-1",
     ("algo-2", "algo-3"), "algo-2"),
    # no group named: the host's own group (the toolkit's default)
    ({"sagemaker_torch_distributed_enabled": True}, "algo-1", ("algo-1",), "algo-1"),
    # no strategy: every host
    ({}, "algo-2", None, "algo-1"),
])
def test_distribution_hosts_follow_the_instance_groups(contract_dir, hyperparameters, current, expected, master):
    hosts = ["algo-1", "algo-2", "algo-3"]
    base = contract_dir(hosts=hosts, current=current, hyperparameters=hyperparameters)
    _with_groups(base, current, [("cpus", ["algo-1"]), ("gpus", ["algo-2", "algo-3"])])
    config = launch_config(read_contract(base, {}), {})
    assert config.distribution_hosts == expected
    assert config.master_host == master
    assert config.in_distribution == (expected is None or current in expected)


def test_a_group_without_its_hosts_is_a_contract_error(contract_dir):
    base = contract_dir(hosts=["algo-1"], hyperparameters={"sagemaker_mpi_enabled": True})
    _with_groups(base, "algo-1", [("homogeneousCluster", ["algo-1"])])
    path = os.path.join(base, "input", "config", "resourceconfig.json")
    with open(path, encoding="utf-8") as handle:
        resource = json.load(handle)
    resource["instance_groups"][0]["hosts"] = "algo-1"
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(resource, handle)
    with pytest.raises(ContractError, match="instance group 'homogeneousCluster' needs 'hosts'"):
        launch_config(read_contract(base, {}), {})


def test_a_v3_command_runs_in_a_shell_in_the_code_directory(contract_dir):
    from trainops.runtime.environment import script_environment

    base = contract_dir(hyperparameters={"trainops_command": "python train.py --name 'a b'", "lr": 0.1,
                                         "trainops_script_arguments": "v3"})
    config = config_of(base, LOCAL)
    plan = build_plan(config, HostFacts(gpus=0, neuron_cores=0, cpus=2))
    # as v3's sm_train.sh evals it: one shell per host, in the code directory, the user's arguments in the line
    assert plan.argv[1:] == ["-c", "python train.py --name 'a b'"] and plan.argv[0].endswith("sh")
    assert plan.cwd == f"{base}/code" and plan.processes_per_host == 1
    environment = script_environment(config, 0, 0, 2)
    assert json.loads(environment["SM_HPS"]) == {"lr": 0.1}  # hyperparameters in SM_HPS only, as in v3
    assert environment["SM_USER_ENTRY_POINT"] == ""  # v3: SM_ENTRY_SCRIPT is "" for a command
    hyper = f"{base}/input/config/hyperparameters.json"
    with open(hyper, "w") as handle:
        json.dump({"trainops_command": json.dumps(" ")}, handle)
    with pytest.raises(ContractError, match="trainops_command must be the shell command"):
        config_of(base, LOCAL)
