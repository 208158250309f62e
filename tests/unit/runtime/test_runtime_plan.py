"""Launch plans for every mode on p4d, p5, g5, trn1, trn2 and a CPU type, with 1 and 4 hosts, this host first and
not first. Plans are pure: each test builds a config and host facts by hand."""

from __future__ import annotations

import json

import pytest

from trainops.runtime import catalog
from trainops.runtime.contract import ContractError
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.plan import distribution_kind, processes_per_host
from trainops.runtime.planner import build_plan

INSTANCE_TYPES = ["ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.12xlarge", "ml.trn1.32xlarge", "ml.trn2.48xlarge",
                  "ml.c5.xlarge"]
# (hosts, index of this host in sorted order): one host; four hosts as the first; four hosts as the third.
PLACES = [(1, 0), (4, 0), (4, 2)]
DISTRIBUTIONS = [
    {"type": "torch_distributed"},
    {"type": "pytorchxla"},
    {"type": "smp", "launcher": "torchrun", "parameters": {"tensor_parallel_degree": 2}},
    {"type": "smddp", "launcher": "torchrun"},
    {"type": "smddp", "launcher": "mpirun"},
    {"type": "pytorchddp"},
    {"type": "mpi"},
    {"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2}},
    {"type": "parameter_server"},
    {"type": "multi_worker_mirrored_strategy"},
    {"type": "none"},
]


def facts_for(instance_type: str) -> HostFacts:
    """What detection finds on a real instance of this type (the catalog's accelerator counts)."""
    instance = catalog.lookup(instance_type)
    return HostFacts(gpus=instance.gpus, neuron_cores=instance.neuron_cores, cpus=instance.vcpus)


def value_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def distribution_id(distribution: dict) -> str:
    return distribution["type"] + (f"-{distribution['launcher']}" if "launcher" in distribution else "")


@pytest.mark.parametrize("distribution", DISTRIBUTIONS, ids=distribution_id)
@pytest.mark.parametrize("hosts, current", PLACES, ids=["1host", "4hosts-first", "4hosts-third"])
@pytest.mark.parametrize("instance_type", INSTANCE_TYPES)
def test_plan_for_every_mode_instance_and_place(make_config, instance_type, hosts, current, distribution):
    config = make_config(instance_type, hosts=hosts, current=current, distribution=distribution)
    facts = facts_for(instance_type)
    instance = catalog.lookup(instance_type)
    plan = build_plan(config, facts)
    kind = distribution_kind(config.distribution)
    expected_per_host = 1 if kind in ("plain", "per_host") else (instance.gpus or instance.neuron_cores or 1)
    this_host = f"algo-{current + 1}"

    assert plan.current_host == this_host
    assert plan.node_rank == current
    assert plan.processes_per_host == expected_per_host
    assert plan.env["SM_CURRENT_HOST"] == this_host
    assert plan.env["SM_HOSTS"] == json.dumps([f"algo-{i + 1}" for i in range(hosts)], separators=(",", ":"))
    assert plan.env["SM_NUM_GPUS"] == str(instance.gpus)
    assert plan.env["SM_NUM_NEURONS"] == str(instance.neuron_cores)
    assert plan.env["TRAINOPS_NODE_RANK"] == str(current)
    assert json.loads(plan.env["TRAINOPS_DISTRIBUTION"]) == config.distribution
    assert plan.cwd == config.code_dir
    # The toolkit's variables per launcher (issue 14, checked against sagemaker-training in tests/differential):
    # NCCL_SOCKET_IFNAME always; EFA settings on EFA types for torchrun and mpirun (SMDDP: FI_PROVIDER always),
    # nothing more for one plain process; torchrun always NCCL_PROTO=simple.
    smddp = kind == "mpirun" and distribution["type"] in ("smddp", "pytorchddp")
    if kind == "per_host":
        # the TensorFlow strategies: the TensorFlow toolkit sets no NCCL interface and no PyTorch rendezvous
        assert not {"NCCL_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "FI_PROVIDER"} & set(plan.env)
    else:
        assert plan.env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert ("FI_PROVIDER" in plan.env) == (kind in ("torchrun", "mpirun") and instance.efa or smddp)
        assert ("FI_EFA_USE_DEVICE_RDMA" in plan.env) == (kind in ("torchrun", "mpirun") and instance.gpudirect_rdma)
        assert ("NCCL_PROTO" in plan.env) == (kind == "torchrun" or kind == "mpirun" and instance.efa)

    wrapper = ["-m", "trainops.runtime.rank", config.entry_point, "--epochs", "3", "--lr", "0.1"]
    if kind == "torchrun":
        assert plan.mode == "torchrun"
        assert plan.argv[1:3] == ["-m", "trainops.runtime.torch_launcher"]
        assert value_after(plan.argv, "--nnodes") == str(hosts)
        assert value_after(plan.argv, "--nproc_per_node") == str(expected_per_host)
        assert plan.argv[-len(wrapper):] == wrapper
        if hosts > 1:
            assert value_after(plan.argv, "--master_addr") == "algo-1"
            assert value_after(plan.argv, "--master_port") == "7777"
            assert value_after(plan.argv, "--node_rank") == str(current)
        else:
            assert not {"--master_addr", "--master_port", "--node_rank"} & set(plan.argv)
        assert plan.world_size == hosts * expected_per_host
    elif kind == "mpirun":
        if current == 0:
            assert plan.mode == "mpirun" and plan.argv[0] == "mpirun"
            plain_names = expected_per_host == 1 if not smddp else hosts == 1  # the toolkit's host list
            assert value_after(plan.argv, "--host") == ",".join(
                f"algo-{i + 1}" if plain_names else f"algo-{i + 1}:{expected_per_host}" for i in range(hosts))
            assert value_after(plan.argv, "-np") == str(hosts * expected_per_host)
            assert plan.argv[-len(wrapper):] == wrapper
            assert plan.wait_for_hosts == tuple(f"algo-{i + 1}" for i in range(1, hosts))
            # Remote ranks only see what -x forwards: every variable of the plan is forwarded.
            forwarded = {plan.argv[i + 1].split("=")[0] for i, item in enumerate(plan.argv) if item == "-x"}
            assert {name for name in plan.env if not name.startswith("OMPI_")} <= forwarded
        else:
            assert plan.mode == "mpi_worker" and plan.argv == []
            assert plan.wait_for_hosts == ("algo-1",)
        assert plan.env["MASTER_ADDR"] == "algo-1"
        assert plan.env["MASTER_PORT"] == "7777"
    else:
        assert plan.mode == "plain"
        assert plan.argv == ["/usr/bin/python3", *wrapper]
        if kind == "per_host" and (hosts > 1 or distribution["type"] == "multi_worker_mirrored_strategy"):
            tf_config = json.loads(plan.env["TF_CONFIG"])
            assert tf_config["task"]["type"] in ("master", "worker")
            assert tf_config["environment"] == "cloud"
            # a parameter-server job on several hosts starts a parameter server on every host
            assert bool(plan.parameter_server) == (distribution["type"] == "parameter_server")
        else:
            # the toolkit enables parameter servers only with several hosts: one host gets neither TF_CONFIG nor ps
            assert not plan.parameter_server
            assert "TF_CONFIG" not in plan.env


def test_two_p4d_hosts_torchrun_plan_matches_the_toolkit_command(make_config):
    config = make_config("ml.p4d.24xlarge", hosts=2, current=1, distribution={"type": "torch_distributed"})
    plan = build_plan(config, HostFacts(gpus=8, cpus=96))
    assert plan.argv == [
        "/usr/bin/python3", "-m", "trainops.runtime.torch_launcher", "--nnodes", "2", "--nproc_per_node", "8",
        "--master_addr", "algo-1", "--master_port", "7777", "--node_rank", "1",
        "-m", "trainops.runtime.rank", "/opt/ml/code/train.py", "--epochs", "3", "--lr", "0.1"]
    assert {key: plan.env[key] for key in ("FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE", "NCCL_PROTO",
                                           "NCCL_SOCKET_IFNAME")} == {
        "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "RDMAV_FORK_SAFE": "1", "NCCL_PROTO": "simple",
        "NCCL_SOCKET_IFNAME": "eth0"}
    assert plan.world_size == 16


def test_hosts_rank_in_string_order(make_config):
    hosts = [f"algo-{index}" for index in range(1, 13)]
    config = make_config("ml.g5.12xlarge", hosts=hosts, current=sorted(hosts).index("algo-2"),
                         distribution={"type": "torch_distributed"})
    plan = build_plan(config, HostFacts(gpus=4))
    # algo-1, algo-10, algo-11, algo-12, algo-2: algo-2 is the fifth host.
    assert value_after(plan.argv, "--node_rank") == "4"
    assert value_after(plan.argv, "--master_addr") == "algo-1"


def test_no_efa_settings_on_non_efa_types(make_config):
    config = make_config("ml.g5.xlarge", hosts=2, distribution={"type": "torch_distributed"})
    plan = build_plan(config, HostFacts(gpus=1))
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE"} & set(plan.env)
    # what the toolkit sets for torchrun on every type
    assert plan.env["NCCL_SOCKET_IFNAME"] == "eth0" and plan.env["NCCL_PROTO"] == "simple"


def test_local_runs_resolve_hosts_and_port_and_carry_no_efa_settings(make_config):
    addresses = {"algo-1": "127.0.0.1", "algo-2": "127.0.0.2"}
    config = make_config("ml.p4d.24xlarge", hosts=2, current=1, distribution={"type": "torch_distributed"},
                         local=True, host_addresses=addresses, master_port=29876)
    plan = build_plan(config, HostFacts(gpus=0, cpus=2))
    assert value_after(plan.argv, "--master_addr") == "127.0.0.1"
    assert value_after(plan.argv, "--master_port") == "29876"
    assert value_after(plan.argv, "--nproc_per_node") == "1"  # no GPU on this machine
    assert not {"FI_PROVIDER", "NCCL_SOCKET_IFNAME", "NCCL_PROTO"} & set(plan.env)
    assert plan.env["TRAINOPS_LOG_PREFIX"] == "[{host} rank {rank}] "


def test_processes_per_host_order_of_precedence(make_config):
    facts = HostFacts(gpus=8, neuron_cores=0)
    configured = make_config(distribution={"type": "mpi", "processes_per_host": 2})
    assert processes_per_host(configured, facts) == 2
    overridden = make_config(distribution={"type": "mpi", "processes_per_host": 2}, processes_per_host_override=3)
    assert processes_per_host(overridden, facts) == 3
    assert processes_per_host(make_config(distribution={"type": "mpi"}), facts) == 8
    assert processes_per_host(make_config(distribution={"type": "mpi"}), HostFacts(neuron_cores=32)) == 32
    assert processes_per_host(make_config(distribution={"type": "mpi"}), HostFacts()) == 1
    assert processes_per_host(make_config(distribution={"type": "none"}, processes_per_host_override=4), facts) == 1


def test_detected_counts_not_the_catalog_decide_processes(make_config):
    # SM_NUM_GPUS=2 on a p4d (say, a partitioned host) means 2 ranks: detection wins over the instance type.
    config = make_config("ml.p4d.24xlarge", distribution={"type": "torch_distributed"})
    assert value_after(build_plan(config, HostFacts(gpus=2)).argv, "--nproc_per_node") == "2"


def test_trainium_without_a_probe_answer_uses_the_catalog_and_says_so(make_config):
    # issue 27 item 7: the toolkit hard-codes 64 for ml.trn2.48xlarge; trainops takes the catalog's count
    config = make_config("ml.trn2.48xlarge", hosts=2, distribution={"type": "torch_distributed"})
    plan = build_plan(config, HostFacts(neuron_cores=0, cpus=192))
    assert value_after(plan.argv, "--nproc_per_node") == "64" and plan.env["SM_NUM_NEURONS"] == "64"
    assert plan.notes[0] == ("no NeuronCores found by probing this host: using the instance catalog's 64 for "
                             "ml.trn2.48xlarge")
    # a probe that answers wins, and no note is made
    probed = build_plan(config, HostFacts(neuron_cores=32))
    assert value_after(probed.argv, "--nproc_per_node") == "32" and not probed.notes
    # a simulated host on this machine keeps one process, and says why
    local = build_plan(make_config("ml.trn2.48xlarge", distribution={"type": "torch_distributed"}, local=True),
                       HostFacts())
    assert value_after(local.argv, "--nproc_per_node") == "1" and "SM_NUM_NEURONS" in local.notes[0]


def test_trainium_runs_over_neuron_cores_with_optional_parallel_compile(make_config):
    config = make_config("ml.trn1.32xlarge", hosts=2, distribution={"type": "torch_distributed",
                                                                     "neuron_parallel_compile": True},
                         neuron_parallel_compile=True)
    plan = build_plan(config, HostFacts(neuron_cores=32))
    assert plan.argv[0] == "neuron_parallel_compile"
    assert value_after(plan.argv, "--nproc_per_node") == "32"
    plain = build_plan(make_config("ml.trn1.32xlarge", distribution={"type": "torch_distributed"}),
                       HostFacts(neuron_cores=32))
    assert plain.argv[0] == "/usr/bin/python3"


def test_parallel_compile_is_ignored_off_trainium(make_config):
    config = make_config("ml.p5.48xlarge", distribution={"type": "torch_distributed"}, neuron_parallel_compile=True)
    assert build_plan(config, HostFacts(gpus=8)).argv[0] == "/usr/bin/python3"


def test_pytorchxla_sets_the_pjrt_device(make_config):
    gpu = build_plan(make_config("ml.p4d.24xlarge", distribution={"type": "pytorchxla"}), HostFacts(gpus=8))
    trn = build_plan(make_config("ml.trn1.32xlarge", distribution={"type": "pytorchxla"}), HostFacts(neuron_cores=32))
    cpu = build_plan(make_config("ml.c5.xlarge", distribution={"type": "pytorchxla"}), HostFacts())
    assert (gpu.env["PJRT_DEVICE"], trn.env["PJRT_DEVICE"], cpu.env["PJRT_DEVICE"]) == ("CUDA", "NEURON", "CPU")


def test_smp_parameters_reach_the_script_through_the_toolkit_variable(make_config):
    parameters = {"hybrid_shard_degree": 8, "tensor_parallel_degree": 1}
    config = make_config("ml.p5.48xlarge", hosts=2, distribution={"type": "smp", "parameters": parameters})
    plan = build_plan(config, HostFacts(gpus=8))
    assert json.loads(plan.env["SM_HP_MP_PARAMETERS"]) == parameters
    assert plan.mode == "torchrun"
    assert "--mp_parameters" not in plan.argv  # a framework key never becomes a script argument


def test_parameter_server_tf_config(make_config):
    hosts = 3
    master = build_plan(make_config("ml.c5.xlarge", hosts=hosts, current=0,
                                    distribution={"type": "parameter_server"}), HostFacts())
    worker = build_plan(make_config("ml.c5.xlarge", hosts=hosts, current=2,
                                    distribution={"type": "parameter_server"}), HostFacts())
    master_config = json.loads(master.env["TF_CONFIG"])
    assert master_config["cluster"] == {"master": ["algo-1:2222"], "worker": ["algo-2:2222", "algo-3:2222"],
                                        "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"]}
    assert master_config["task"] == {"type": "master", "index": 0}
    assert master_config["environment"] == "cloud"
    assert json.loads(worker.env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    # every host runs a parameter-server process: task ps, index = the host's place, GPUs hidden by the server
    for plan, index in ((master, 0), (worker, 2)):
        assert plan.parameter_server == ("/usr/bin/python3", "-m", "trainops.runtime.parameter_server")
        ps_config = json.loads(plan.parameter_server_env["TF_CONFIG"])
        assert ps_config["task"] == {"type": "ps", "index": index}
        assert ps_config["cluster"] == master_config["cluster"]
        assert plan.dry_run()["parameter_server"]["argv"] == list(plan.parameter_server)
    # a worker stops its parameter server only once the master's worker address has closed (the toolkit's wait)
    assert master.wait_for_master == "" and worker.wait_for_master == "algo-1:2222"


def test_parameter_server_on_one_host_is_a_plain_process(make_config):
    plan = build_plan(make_config("ml.c5.xlarge", hosts=1, distribution={"type": "parameter_server"}), HostFacts())
    assert plan.mode == "plain" and "TF_CONFIG" not in plan.env and not plan.parameter_server
    assert "parameter_server" not in plan.dry_run()


def test_multi_worker_mirrored_strategy_uses_the_toolkit_port_and_environment(make_config):
    for hosts in (1, 2):
        config = make_config("ml.p4d.24xlarge", hosts=hosts, current=hosts - 1,
                             distribution={"type": "multi_worker_mirrored_strategy"})
        tf_config = json.loads(build_plan(config, HostFacts(gpus=8)).env["TF_CONFIG"])
        assert tf_config == {"cluster": {"worker": [f"algo-{i + 1}:8890" for i in range(hosts)]},
                             "environment": "cloud", "task": {"index": hosts - 1, "type": "worker"}}


def test_local_tf_config_ports_do_not_collide(make_config):
    config = make_config("ml.c5.xlarge", hosts=2, current=1, distribution={"type": "multi_worker_mirrored_strategy"},
                         local=True, host_addresses={"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}, master_port=30000)
    tf_config = json.loads(build_plan(config, HostFacts()).env["TF_CONFIG"])
    assert tf_config == {"cluster": {"worker": ["127.0.0.1:30001", "127.0.0.1:30002"]}, "environment": "cloud",
                         "task": {"type": "worker", "index": 1}}


def test_no_distribution_runs_one_plain_process_per_host(make_config):
    plan = build_plan(make_config("ml.p4d.24xlarge", hosts=2, current=1), HostFacts(gpus=8))
    assert plan.mode == "plain" and plan.world_size == 1
    assert plan.argv == ["/usr/bin/python3", "-m", "trainops.runtime.rank", "/opt/ml/code/train.py",
                         "--epochs", "3", "--lr", "0.1"]


def test_non_python_entry_points_run_directly_only_without_a_launcher(make_config):
    shell = make_config(entry_point="/opt/ml/code/train.sh")
    assert build_plan(shell, HostFacts()).argv == ["/opt/ml/code/train.sh", "--epochs", "3", "--lr", "0.1"]
    with pytest.raises(ContractError, match="torchrun launches Python scripts only"):
        build_plan(make_config(entry_point="/opt/ml/code/train.sh", distribution={"type": "torch_distributed"}),
                   HostFacts())


def test_pythonpath_keeps_what_the_parent_had(make_config):
    config = make_config(inherited_pythonpath="/opt/extra:/opt/more")
    plan = build_plan(config, HostFacts(runtime_path="/srv/trainops"))
    assert plan.env["PYTHONPATH"] == "/opt/ml/code:/srv/trainops:/opt/extra:/opt/more"


def test_plans_are_pure(make_config):
    config = make_config("ml.p4d.24xlarge", hosts=4, current=2, distribution={"type": "smddp"})
    facts = HostFacts(gpus=8, smddprun="/usr/local/bin/smddprun", is_root=True)
    assert build_plan(config, facts) == build_plan(config, facts)


def test_dry_run_shape(make_config):
    dry = build_plan(make_config(), HostFacts()).dry_run()
    assert set(dry) == {"argv", "env"}
    assert list(dry["env"]) == sorted(dry["env"])
    assert all(isinstance(value, str) for value in dry["env"].values())


@pytest.mark.parametrize("hosts", [2, 3, 5])
def test_local_tensorflow_ports_stay_inside_the_block_the_local_backend_reserves(make_config, hosts):
    # The local backend reserves local_ports_needed(hosts) ports from the master port on; a TF_CONFIG port outside
    # that block is one no reservation protects.
    from trainops.runtime.distributions import local_ports_needed
    from trainops.runtime.plan import tf_config

    addresses = {f"algo-{index + 1}": "127.0.0.1" for index in range(hosts)}
    config = make_config("ml.c5.xlarge", hosts=hosts, distribution={"type": "parameter_server"}, local=True,
                         host_addresses=addresses, master_port=25000)
    cluster = tf_config(config)["cluster"]
    used = {int(address.rsplit(":", 1)[1]) for role in cluster.values() for address in role} | {25000}
    assert used == set(range(25000, 25000 + local_ports_needed(hosts)))
