"""Fixtures for the runtime's unit tests: launch configs and contract directories made by hand."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from trainops.runtime.config import LaunchConfig
from trainops.runtime.hyperparameters import normalize_distribution


def build_config(instance_type: str = "ml.p4d.24xlarge", hosts: int | list[str] = 1, current: int = 0,
                 distribution: dict[str, Any] | None = None, base_dir: str = "/opt/ml",
                 **overrides: Any) -> LaunchConfig:
    """A LaunchConfig for a job on `hosts` hosts (algo-1..N), this host being `current` in sorted order."""
    names = hosts if isinstance(hosts, list) else [f"algo-{index + 1}" for index in range(hosts)]
    ordered = tuple(sorted(names))
    values: dict[str, Any] = dict(
        base_dir=base_dir,
        hosts=ordered,
        current_host=ordered[current],
        instance_type=instance_type,
        network_interface="eth0",
        current_group=None,
        distribution=normalize_distribution(distribution or {"type": "none"}),
        entry_point=f"{base_dir}/code/train.py",
        code_dir=f"{base_dir}/code",
        user_hyperparameters={"epochs": 3, "lr": 0.1},
        script_arguments=["--epochs", "3", "--lr", "0.1"],
        channels={"train": f"{base_dir}/input/data/train"},
        model_dir=f"{base_dir}/model",
        output_dir=f"{base_dir}/output",
        output_data_dir=f"{base_dir}/output/data",
        input_dir=f"{base_dir}/input",
        input_config_dir=f"{base_dir}/input/config",
        checkpoint_dir=f"{base_dir}/checkpoints",
        record_dir=f"{base_dir}/output/ranks",
        failure_path=f"{base_dir}/output/failure",
        success_path=f"{base_dir}/output/success",
        python="/usr/bin/python3",
    )
    values.update(overrides)
    return LaunchConfig(**values)


@pytest.fixture
def make_config():
    """The `build_config` factory."""
    return build_config


def write_contract(base: str, hosts: list[str], current: str, hyperparameters: dict[str, Any],
                   instance_type: str = "ml.c5.xlarge", channels: tuple[str, ...] = ("train",),
                   script: str = "print('hello')\n", program: str = "train.py") -> str:
    """Lay out one host's contract directory under `base` (hyperparameters are json-encoded, as SageMaker's)."""
    config_dir = os.path.join(base, "input", "config")
    os.makedirs(config_dir, exist_ok=True)
    with open(os.path.join(config_dir, "resourceconfig.json"), "w", encoding="utf-8") as handle:
        json.dump({"current_host": current, "hosts": hosts, "current_instance_type": instance_type,
                   "network_interface_name": "eth0"}, handle)
    encoded = {key: json.dumps(value) for key, value in {"sagemaker_program": program, **hyperparameters}.items()}
    with open(os.path.join(config_dir, "hyperparameters.json"), "w", encoding="utf-8") as handle:
        json.dump(encoded, handle)
    with open(os.path.join(config_dir, "inputdataconfig.json"), "w", encoding="utf-8") as handle:
        json.dump({name: {"TrainingInputMode": "File"} for name in channels}, handle)
    for name in channels:
        os.makedirs(os.path.join(base, "input", "data", name), exist_ok=True)
    os.makedirs(os.path.join(base, "code"), exist_ok=True)
    with open(os.path.join(base, "code", program), "w", encoding="utf-8") as handle:
        handle.write(script)
    return base


@pytest.fixture
def contract_dir(tmp_path):
    """A factory laying out a contract directory under tmp_path (see `write_contract`)."""

    def make(hosts: list[str] | None = None, current: str | None = None, hyperparameters: dict | None = None,
             name: str = "ml", **options: Any) -> str:
        hosts = hosts or ["algo-1"]
        return write_contract(str(tmp_path / name), hosts, current or hosts[0], hyperparameters or {}, **options)

    return make
