"""Trainium path on CPU, with a stand-in ``torch_xla``: the Neuron launch plan (torchrun, one rank per NeuronCore)
and the ``xla`` branch of ``trainops.runtime.init()`` (``init_process_group("xla", init_method="xla://")``, the XLA
device), then DDP through ``transform()``; the GPT example's losses match one process.

The stand-in registers an ``xla`` process-group backend that is gloo and an ``xla://`` rendezvous that reads the
torchrun variables, and its ``xla_device()`` is the CPU: it checks trainops' side of the contract, not Neuron. Nothing
here ran on Trainium hardware (docs/parallelism.md says what that leaves untested).
"""

from __future__ import annotations

import json
from pathlib import Path

from trainops.steps.train import train

GPT = Path(__file__).resolve().parents[2] / "examples" / "gpt"

STAND_IN = {
    "torch_xla/__init__.py": '"""Stand-in torch_xla for trainops tests (not PyTorch/XLA)."""\n',
    "torch_xla/core/__init__.py": "",
    "torch_xla/core/xla_model.py": (
        "import os\n"
        "import torch\n"
        "\n"
        "def xla_device():\n"
        "    with open(os.environ['XLA_STAND_IN_LOG'], 'a') as log:\n"
        "        log.write(f\"device {os.environ.get('RANK')}\\n\")\n"
        "    return torch.device('cpu')\n"
    ),
    "torch_xla/distributed/__init__.py": "",
    "torch_xla/distributed/xla_backend.py": (
        "import os\n"
        "from datetime import timedelta\n"
        "import torch.distributed as dist\n"
        "from torch.distributed.rendezvous import register_rendezvous_handler\n"
        "from torch.distributed.distributed_c10d import ProcessGroupGloo\n"
        "\n"
        "def _create(store, rank, size, timeout):\n"
        "    with open(os.environ['XLA_STAND_IN_LOG'], 'a') as log:\n"
        "        log.write(f'backend {rank} {size}\\n')\n"
        "    return ProcessGroupGloo(store, rank, size, timeout)\n"
        "\n"
        "def _xla_rendezvous(url, timeout=timedelta(minutes=5), **kwargs):\n"
        "    rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])\n"
        "    store = dist.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), world, rank == 0,\n"
        "                          timeout=timeout)\n"
        "    yield (store, rank, world)\n"
        "\n"
        "dist.Backend.register_backend('xla', _create, devices=['cpu'])\n"
        "register_rendezvous_handler('xla', _xla_rendezvous)\n"
    ),
}


def write_stand_in(root: Path) -> None:
    for name, text in STAND_IN.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def run(spec: dict, workdir: Path, name: str) -> tuple[dict, dict, list[str]]:
    lines: list[str] = []
    result = train(spec, base_dir=str(GPT), backend="local", workdir=str(workdir), job_name=name, log=lines.append)
    metrics = json.loads((Path(result["job_dir"]) / "hosts" / "algo-1" / "model" / "training.json").read_text())
    return result, metrics, lines


def test_trainium_path_with_a_stand_in_torch_xla(tmp_path):
    stand_in = tmp_path / "stand_in"
    write_stand_in(stand_in)
    log = tmp_path / "xla.log"
    base = {"name": "gpt-trn", "framework": "pytorch", "framework_version": "2.5.1", "py_version": "py310",
            "entry_point": "train.py", "source_dir": str(GPT), "instance_type": "ml.trn1.2xlarge",
            "instance_count": 1, "hyperparameters": {"size": "tiny", "steps": 20, "global_batch": 8}}
    trainium = {**base, "distribution": {"torch_distributed": {"enabled": True}},
                # Two NeuronCores (SM_NUM_NEURONS overrides detection, as in AWS's toolkit) and the stand-in.
                "environment": {"SM_NUM_NEURONS": "2", "SM_NUM_GPUS": "0", "PYTHONPATH": str(stand_in),
                                "XLA_STAND_IN_LOG": str(log)}}
    result, metrics, lines = run(trainium, tmp_path / "runs", "trn-xla")
    assert result["status"] == "Completed"
    # The Neuron launch plan: torchrun with one rank per NeuronCore.
    assert any("torch_launcher --nnodes 1 --nproc_per_node 2" in line for line in lines)
    # init() took the xla branch: the backend is xla, each rank asked the stand-in for its device.
    assert metrics["backend"] == "xla" and metrics["world_size"] == 2
    assert any("backend xla" in line for line in lines)
    assert sorted(log.read_text().split("\n")[:-1]) == ["backend 0 2", "backend 1 2", "device 0", "device 1"]
    assert any("DistributedDataParallel over 2 ranks (xla)" in line for line in lines)

    single = {**base, "instance_type": "local", "name": "gpt-trn-reference"}
    _, reference, _ = run(single, tmp_path / "runs", "trn-reference")
    worst = max(abs(a - b) / abs(b) for a, b in zip(metrics["losses"], reference["losses"], strict=False))
    assert worst <= 1e-4
