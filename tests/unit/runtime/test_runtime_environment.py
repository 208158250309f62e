"""The SM_* variables, EFA settings and the child environment."""

from __future__ import annotations

import json

from trainops.runtime.environment import (
    child_environment,
    env_name,
    env_value,
    network_environment,
    script_environment,
)


def test_script_environment_has_what_toolkit_scripts_read(make_config):
    config = make_config("ml.g5.12xlarge", hosts=2, current=1,
                         channels={"train": "/opt/ml/input/data/train", "val-set": "/opt/ml/input/data/val-set"},
                         user_hyperparameters={"epochs": 3, "opts": {"b": 1}, "name": "x"})
    env = script_environment(config, gpus=4, neuron_cores=0, cpus=48)
    assert env["SM_HOSTS"] == '["algo-1","algo-2"]'
    assert env["SM_CURRENT_HOST"] == "algo-2"
    assert env["SM_NUM_GPUS"] == "4" and env["SM_NUM_NEURONS"] == "0" and env["SM_NUM_CPUS"] == "48"
    assert env["SM_CHANNELS"] == '["train","val-set"]'
    assert env["SM_CHANNEL_TRAIN"] == "/opt/ml/input/data/train"
    assert env["SM_CHANNEL_VAL_SET"] == "/opt/ml/input/data/val-set"
    assert env["SM_MODEL_DIR"] == "/opt/ml/model" and env["SM_OUTPUT_DATA_DIR"] == "/opt/ml/output/data"
    assert json.loads(env["SM_HPS"]) == {"epochs": 3, "opts": {"b": 1}, "name": "x"}
    assert env["SM_HP_EPOCHS"] == "3" and env["SM_HP_OPTS"] == '{"b":1}' and env["SM_HP_NAME"] == "x"
    assert env["SM_USER_ENTRY_POINT"] == "train.py"
    training_env = json.loads(env["SM_TRAINING_ENV"])
    assert training_env["current_host"] == "algo-2" and training_env["num_gpus"] == 4


def test_env_encoding_helpers():
    assert env_value("text") == "text"
    assert env_value({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert env_value(True) == "true"
    assert env_name("val-set.v2") == "VAL_SET_V2"


def test_network_settings_follow_the_catalog(make_config):
    # torchrun, as AWS's toolkit sets it (issue 14; tests/differential compares every launcher)
    assert network_environment(make_config("ml.p5.48xlarge")) == {
        "FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "NCCL_SOCKET_IFNAME": "eth0", "FI_EFA_USE_DEVICE_RDMA": "1",
        "RDMAV_FORK_SAFE": "1"}
    assert network_environment(make_config("ml.g5.12xlarge")) == {
        "FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "NCCL_SOCKET_IFNAME": "eth0"}
    assert network_environment(make_config("ml.c5.xlarge")) == {"NCCL_PROTO": "simple", "NCCL_SOCKET_IFNAME": "eth0"}
    assert network_environment(make_config("ml.c5.xlarge"), "plain") == {"NCCL_SOCKET_IFNAME": "eth0"}
    assert network_environment(make_config("ml.p4d.24xlarge"), "mpirun") == {
        "FI_PROVIDER": "efa", "NCCL_PROTO": "simple", "NCCL_SOCKET_IFNAME": "eth0", "FI_EFA_USE_DEVICE_RDMA": "1"}
    assert network_environment(make_config("ml.g5.xlarge"), "smddp") == {
        "FI_PROVIDER": "efa", "RDMAV_FORK_SAFE": "1", "NCCL_SOCKET_IFNAME": "eth0"}
    assert network_environment(make_config("local_gpu")) == {}
    assert network_environment(make_config("ml.p5.48xlarge", local=True)) == {}


def test_child_environment_keeps_everything_the_parent_has():
    parent = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
              "PATH": "/usr/bin", "SM_CURRENT_HOST": "stale"}
    child = child_environment(parent, {"SM_CURRENT_HOST": "algo-1", "TRAINOPS_LAUNCH_MODE": "plain"})
    assert child["NCCL_NVLS_ENABLE"] == "0" and child["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert child["NVSHMEM_DISABLE_NVLS"] == "1" and child["PATH"] == "/usr/bin"
    assert child["SM_CURRENT_HOST"] == "algo-1" and child["TRAINOPS_LAUNCH_MODE"] == "plain"


def test_plans_never_set_nvls_variables(make_config):
    from trainops.runtime.host_facts import HostFacts
    from trainops.runtime.planner import build_plan

    for distribution in ({"type": "torch_distributed"}, {"type": "smddp"}, {"type": "none"}):
        plan = build_plan(make_config("ml.p5.48xlarge", hosts=2, distribution=distribution), HostFacts(gpus=8))
        assert not [name for name in plan.env if "NVLS" in name or "MULTICAST" in name]
