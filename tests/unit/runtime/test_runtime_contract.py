"""Reading one host's contract directory."""

from __future__ import annotations

import json
import os

import pytest

from trainops.runtime.contract import ContractError, base_directory, find_code_dir, read_contract


def test_reads_hosts_in_sagemaker_order_and_the_channels(contract_dir):
    hosts = ["algo-2", "algo-1", "algo-10", "algo-11"]
    base = contract_dir(hosts=hosts, current="algo-10", hyperparameters={"epochs": 3},
                        instance_type="ml.p4d.24xlarge", channels=("train", "test", "trainops_code"))
    contract = read_contract(base, environ={})
    assert contract.hosts == ("algo-1", "algo-10", "algo-11", "algo-2")
    assert contract.current_host == "algo-10"
    assert contract.instance_type == "ml.p4d.24xlarge"
    assert contract.network_interface == "eth0"
    assert contract.hyperparameters["epochs"] == "3"
    # The code channel carries trainops' own input, not the user's data.
    assert contract.channels == {"test": os.path.join(base, "input", "data", "test"),
                                 "train": os.path.join(base, "input", "data", "train")}
    assert contract.record_dir == os.path.join(base, "output", "ranks")


def test_base_directory_honours_sagemaker_base_dir(tmp_path):
    assert base_directory({}) == "/opt/ml"
    assert base_directory({"SAGEMAKER_BASE_DIR": str(tmp_path)}) == str(tmp_path)


def test_missing_resourceconfig_says_which_file_and_what_to_do(tmp_path):
    with pytest.raises(ContractError) as error:
        read_contract(str(tmp_path), environ={})
    message = str(error.value)
    assert os.path.join(str(tmp_path), "input", "config", "resourceconfig.json") in message
    assert "SAGEMAKER_BASE_DIR" in message
    assert error.value.exit_code == 2


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read"),
    ('["a"]', "expected a JSON object"),
    ('{"current_host": "algo-3", "hosts": ["algo-1"]}', "must be one of 'hosts'"),
    ('{"current_host": "algo-1", "hosts": []}', "non-empty list"),
])
def test_malformed_resourceconfig(tmp_path, content, message):
    config_dir = tmp_path / "input" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "resourceconfig.json").write_text(content)
    with pytest.raises(ContractError, match=message):
        read_contract(str(tmp_path), environ={})


def test_missing_hyperparameters_and_inputdataconfig_read_as_empty(tmp_path):
    config_dir = tmp_path / "input" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    contract = read_contract(str(tmp_path), environ={})
    assert contract.hyperparameters == {} and contract.input_data_config == {} and contract.channels == {}


def test_code_directory_lookup_order(tmp_path):
    base = tmp_path / "ml"
    (base / "code").mkdir(parents=True)
    assert find_code_dir(str(base), {}) == str(base / "code")
    (base / "input" / "data" / "trainops_code").mkdir(parents=True)
    assert find_code_dir(str(base), {}) == str(base / "input" / "data" / "trainops_code")
    explicit = tmp_path / "elsewhere"
    explicit.mkdir()
    assert find_code_dir(str(base), {"TRAINOPS_CODE_DIR": str(explicit)}) == str(explicit)
    assert find_code_dir(str(tmp_path / "nothing"), {}) is None
