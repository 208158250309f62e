"""mpirun plans: the toolkit's command on SageMaker, SMDDP's additions, custom options, the local simulation."""

from __future__ import annotations

import pytest

from trainops.runtime.contract import ContractError
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.mpi_plan import coordination_name, split_custom_mpi_options
from trainops.runtime.planner import build_plan


def mca(argv: list[str]) -> dict[str, str]:
    return {argv[i + 1]: argv[i + 2] for i, item in enumerate(argv) if item == "-mca"}


def forwarded(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, item in enumerate(argv) if item == "-x"]


def test_sagemaker_mpi_master_runs_the_toolkit_command(make_config):
    config = make_config("ml.p4d.24xlarge", hosts=2, distribution={"type": "mpi", "processes_per_host": 4})
    plan = build_plan(config, HostFacts(gpus=8, is_root=True))
    argv = plan.argv
    assert argv[:7] == ["mpirun", "--host", "algo-1:4,algo-2:4", "-np", "8", "--allow-run-as-root", "--tag-output"]
    assert mca(argv) == {"btl_tcp_if_include": "eth0", "oob_tcp_if_include": "eth0", "plm_rsh_no_tree_spawn": "1",
                         "pml": "ob1", "btl": "^openib", "orte_abort_on_non_zero_status": "1",
                         "btl_vader_single_copy_mechanism": "none"}
    assert argv[argv.index("-bind-to") + 1] == "none" and argv[argv.index("-map-by") + 1] == "slot"
    names = forwarded(argv)
    assert {"NCCL_SOCKET_IFNAME=eth0", "LD_LIBRARY_PATH", "PATH", "SM_HOSTS", "SM_HPS", "TRAINOPS_RECORD_DIR",
            "FI_PROVIDER", "MASTER_ADDR"} <= set(names)
    assert argv[-8:] == ["/usr/bin/python3", "-m", "trainops.runtime.rank", "/opt/ml/code/train.py",
                         "--epochs", "3", "--lr", "0.1"]
    assert "smddprun" not in argv
    assert plan.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and plan.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert plan.wait_for_hosts == ("algo-2",)


def test_smddp_adds_its_variables_and_smddprun_when_present(make_config):
    config = make_config("ml.p4d.24xlarge", hosts=2, distribution={"type": "smddp"})
    with_library = build_plan(config, HostFacts(gpus=8, smddprun="/opt/conda/bin/smddprun"))
    assert with_library.env["SMDATAPARALLEL_USE_HOMOGENEOUS"] == "1"
    assert with_library.env["SMDATAPARALLEL_SERVER_ADDR"] == "algo-1"
    assert with_library.env["SMDATAPARALLEL_SERVER_PORT"] == "7592"
    assert with_library.env["SAGEMAKER_INSTANCE_TYPE"] == "ml.p4d.24xlarge"
    assert with_library.env["FI_PROVIDER"] == "efa" and with_library.env["RDMAV_FORK_SAFE"] == "1"
    assert with_library.env["FI_EFA_USE_DEVICE_RDMA"] == "1" and with_library.env["NCCL_PROTO"] == "simple"
    rank_start = with_library.argv.index("/usr/bin/python3")
    assert with_library.argv[rank_start - 1] == "smddprun"
    assert "--oversubscribe" in with_library.argv
    assert mca(with_library.argv)["plm_rsh_num_concurrent"] == "2"
    without = build_plan(config, HostFacts(gpus=8))
    assert "smddprun" not in without.argv
    assert any("smddprun is not installed" in note for note in without.notes)


def test_single_host_smddp_uses_single_node_mode(make_config):
    plan = build_plan(make_config("ml.p4d.24xlarge", distribution={"type": "pytorchddp"}), HostFacts(gpus=8))
    assert plan.env["SMDATAPARALLEL_USE_SINGLENODE"] == "1"
    assert "SMDATAPARALLEL_SERVER_ADDR" not in plan.env
    # the toolkit's single-node SMDDP host list is the plain host name
    assert plan.argv[plan.argv.index("--host") + 1] == "algo-1"


def test_smddp_on_an_unsupported_type_is_noted(make_config):
    plan = build_plan(make_config("ml.g5.12xlarge", distribution={"type": "smddp"}), HostFacts(gpus=4))
    assert any("does not support ml.g5.12xlarge" in note for note in plan.notes)


def test_workers_start_nothing_and_wait_for_the_master(make_config):
    plan = build_plan(make_config("ml.p4d.24xlarge", hosts=4, current=3, distribution={"type": "mpi"}),
                      HostFacts(gpus=8))
    assert plan.mode == "mpi_worker" and plan.argv == [] and plan.wait_for_hosts == ("algo-1",)
    assert plan.env["SM_CURRENT_HOST"] == "algo-4"


def test_custom_options_are_split_and_the_known_one_becomes_a_variable(make_config):
    config = make_config("ml.c5.xlarge", distribution={"type": "mpi",
                                                        "custom_mpi_options": "--NCCL_DEBUG WARN -x 'A=b c' -v"})
    plan = build_plan(config, HostFacts())
    assert plan.env["NCCL_DEBUG"] == "WARN"
    tail = plan.argv[plan.argv.index("/usr/bin/python3") - 3:plan.argv.index("/usr/bin/python3")]
    assert tail == ["-x", "A=b c", "-v"]


@pytest.mark.parametrize("options", ["-x A=1; rm -rf /", "$(whoami)", "a | b", "`id`", "x > y", "a && b"])
def test_shell_metacharacters_are_rejected(options):
    with pytest.raises(ContractError, match="shell metacharacters"):
        split_custom_mpi_options(options)


def test_unbalanced_quotes_are_rejected():
    with pytest.raises(ContractError, match="check the quotes"):
        split_custom_mpi_options("-x 'A=1")


def test_local_master_runs_every_rank_on_this_machine(make_config):
    config = make_config("ml.p4d.24xlarge", hosts=2, distribution={"type": "mpi", "processes_per_host": 2},
                         local=True, host_addresses={"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"},
                         master_port=31000, job_name="job-7")
    plan = build_plan(config, HostFacts(is_root=True))
    assert plan.argv[:7] == ["mpirun", "--host", "localhost:4", "-np", "4", "--allow-run-as-root",
                             "--oversubscribe"]
    assert "btl_tcp_if_include" not in mca(plan.argv)
    assert forwarded(plan.argv) == []  # local ranks inherit mpirun's whole environment
    assert plan.env["MASTER_ADDR"] == "127.0.0.1" and plan.env["MASTER_PORT"] == "31000"
    assert plan.env["TRAINOPS_HOST_ENV_DIR"] == "/opt/ml/output/ranks/hosts"
    assert plan.coordination == coordination_name(config) == "trainops-mpi/job-7/31000"
    assert not {"FI_PROVIDER", "NCCL_SOCKET_IFNAME"} & set(plan.env)


def test_local_worker_knows_where_to_register(make_config):
    config = make_config("ml.c5.xlarge", hosts=2, current=1, distribution={"type": "mpi"}, local=True,
                         host_addresses={"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"}, master_port=31000,
                         job_name="job-7")
    plan = build_plan(config, HostFacts())
    assert plan.mode == "mpi_worker" and plan.coordination == "trainops-mpi/job-7/31000"


def test_a_local_host_runs_the_mpirun_trainops_found_and_says_clearly_when_there_is_none(make_config):
    """Issue 24 item 7: the local backend hands the runtime the image's mpirun it found in its own environment
    (`TRAINOPS_MPIRUN`, set after the job's Environment); that path is what runs, whatever the job's PATH says."""
    from trainops.runtime.host_facts import MPIRUN_SETTING, detect_host_facts

    config = make_config("ml.c5.xlarge", hosts=1, distribution={"type": "mpi", "processes_per_host": 2},
                         local=True, host_addresses={"algo-1": "127.0.0.1"}, master_port=31000, job_name="job-8")
    facts = detect_host_facts({MPIRUN_SETTING: "/opt/openmpi/bin/mpirun", "SM_NUM_GPUS": "0",
                               "PATH": "/fake/bin"})
    assert facts.mpirun == "/opt/openmpi/bin/mpirun"
    assert build_plan(config, facts).argv[0] == "/opt/openmpi/bin/mpirun"
    assert detect_host_facts({"SM_NUM_GPUS": "0"}).mpirun == "mpirun"  # SageMaker: the image's, by name
    with pytest.raises(ContractError, match="mpirun is not installed on this machine.*never on the job's PATH"):
        build_plan(config, HostFacts(mpirun=""))


def test_through_an_agent_every_host_is_reached_by_it_and_meets_in_a_shared_directory(make_config):
    """A Slurm job's nodes (the slurm backend sets the agent): mpirun reaches algo-1 and algo-2 through the agent,
    reads no batch system's allocation, forwards nothing with -x (each host's daemon has its own environment)."""
    agent = {"mpi_agent": "/fsx/jobs/j/slurm/mpi-agent", "mpi_meeting_dir": "/fsx/jobs/j/slurm/mpi/12.0"}
    config = make_config("ml.p4d.24xlarge", hosts=2, distribution={"type": "mpi", "processes_per_host": 2}, **agent)
    plan = build_plan(config, HostFacts(gpus=8, is_root=True))
    argv = plan.argv
    assert argv[:6] == ["mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4", "--allow-run-as-root"]
    assert "--leave-session-attached" in argv and forwarded(argv) == []
    options = mca(argv)
    assert options["plm"] == "rsh" and options["plm_rsh_agent"] == "/fsx/jobs/j/slurm/mpi-agent"
    assert options["ras"].startswith("^slurm") and options["plm_rsh_no_tree_spawn"] == "1"
    assert "btl_tcp_if_include" not in options  # the nodes' interfaces are the cluster's, not SageMaker's eth0
    assert plan.meeting_dir == "/fsx/jobs/j/slurm/mpi/12.0" and plan.wait_for_hosts == ("algo-2",)
    assert plan.env["TRAINOPS_HOST_ENV_DIR"] == "/fsx/jobs/j/slurm/mpi/12.0/hosts"
    assert plan.env["MASTER_ADDR"] == "algo-1" and not plan.coordination
    worker = build_plan(make_config("ml.p4d.24xlarge", hosts=2, current=1,
                                    distribution={"type": "mpi", "processes_per_host": 2}, **agent), HostFacts(gpus=8))
    assert (worker.mode, worker.argv, worker.meeting_dir) == ("mpi_worker", [], "/fsx/jobs/j/slurm/mpi/12.0")
    assert worker.wait_for_hosts == ("algo-1",)


def test_smddp_through_an_agent_keeps_its_variables(make_config):
    agent = {"mpi_agent": "/fsx/j/slurm/mpi-agent", "mpi_meeting_dir": "/fsx/j/slurm/mpi/1.0"}
    plan = build_plan(make_config("ml.p4d.24xlarge", hosts=2, distribution={"type": "smddp"}, **agent),
                      HostFacts(gpus=8, smddprun="/opt/conda/bin/smddprun"))
    assert plan.env["SMDATAPARALLEL_SERVER_ADDR"] == "algo-1" and mca(plan.argv)["plm_rsh_agent"].endswith("agent")
    assert plan.argv[plan.argv.index("/usr/bin/python3") - 1] == "smddprun" and forwarded(plan.argv) == []
