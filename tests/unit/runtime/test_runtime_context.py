"""Script helpers: the context a training script gets from ``trainops.runtime.init()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trainops.runtime.context import choose_backend, job_context, ranks_from_environment


@pytest.mark.parametrize("kind, smddp, xla, neuron, cuda, expected", [
    ("smddp", True, False, False, True, "smddp"),
    ("pytorchddp", True, False, False, True, "smddp"),
    ("smddp", False, False, False, True, "nccl"),          # asked for, not installed: fall back
    ("torch_distributed", True, False, False, True, "nccl"),  # installed, not asked for
    ("torch_distributed", False, True, True, False, "xla"),
    ("torch_distributed", False, False, True, False, "gloo"),  # Trainium without torch_xla
    ("torch_distributed", False, False, False, False, "gloo"),
    ("none", False, False, False, True, "nccl"),
])
def test_backend_choice(kind, smddp, xla, neuron, cuda, expected):
    assert choose_backend(kind, smddp, xla, neuron, cuda) == expected


def test_ranks_from_torchrun_then_open_mpi_then_one_process():
    assert ranks_from_environment({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}) \
        == (3, 1, 4, 2)
    assert ranks_from_environment({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                                   "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == (5, 1, 8, 4)
    assert ranks_from_environment({}) == (0, 0, 1, 1)


def test_context_from_the_launchers_variables():
    distribution = {"type": "torch_distributed", "processes_per_host": None, "instance_groups": None,
                    "neuron_parallel_compile": False}
    environ = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "SM_MODEL_DIR": "/m", "SM_OUTPUT_DATA_DIR": "/o",
               "TRAINOPS_CHECKPOINT_DIR": "/c", "SM_CHANNELS": '["train","val-set"]', "SM_CHANNEL_TRAIN": "/d/train",
               "SM_CHANNEL_VAL_SET": "/d/val", "SM_HPS": '{"epochs":3}', "SM_HOSTS": '["algo-1","algo-2"]',
               "SM_CURRENT_HOST": "algo-2", "TRAINOPS_DISTRIBUTION": json.dumps(distribution)}
    context = job_context(environ)
    assert (context.rank, context.local_rank, context.world_size) == (1, 1, 2)
    assert (context.dp_rank, context.dp_size) == (1, 2)
    assert (context.model_dir, context.output_data_dir, context.checkpoint_dir) == ("/m", "/o", "/c")
    assert context.channels == {"train": "/d/train", "val-set": "/d/val"}
    assert context.hyperparameters == {"epochs": 3}
    assert context.distribution == distribution
    assert (context.current_host, context.hosts) == ("algo-2", ["algo-1", "algo-2"])
    assert not context.is_main and context.distributed


def test_context_from_the_contract_directory_alone(contract_dir):
    base = contract_dir(hosts=["algo-1", "algo-2"], current="algo-2", channels=("train", "trainops_code"),
                        hyperparameters={"epochs": 5, "sagemaker_mpi_enabled": True})
    context = job_context({"SAGEMAKER_BASE_DIR": base})
    assert context.model_dir == os.path.join(base, "model")
    assert context.checkpoint_dir == os.path.join(base, "checkpoints")
    assert context.channels == {"train": os.path.join(base, "input", "data", "train")}
    assert context.hyperparameters == {"epochs": 5}
    assert context.distribution["type"] == "mpi"
    assert context.current_host == "algo-2" and context.hosts == ["algo-1", "algo-2"]
    assert (context.rank, context.world_size) == (0, 1)


def run_init(tmp_path, environ: dict[str, str]) -> subprocess.CompletedProcess:
    code = ("import json, trainops.runtime as runtime, torch.distributed as dist\n"
            "context = runtime.init()\n"
            "print(json.dumps({'device': str(context.device), 'backend': context.backend,\n"
            "                  'initialized': dist.is_initialized(), 'rank': context.rank}))\n"
            "runtime.barrier(); runtime.cleanup()\n")
    clean = {key: value for key, value in os.environ.items()
             if not key.startswith(("SM_", "TRAINOPS_", "OMPI_")) and key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    clean.update({"SAGEMAKER_BASE_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": "", **environ})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean, timeout=120)


def test_a_single_process_needs_no_process_group(tmp_path):
    result = run_init(tmp_path, {})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"device": "cpu", "backend": None, "initialized": False, "rank": 0}


def test_smddp_asked_for_but_absent_falls_back_with_one_line(tmp_path):
    result = run_init(tmp_path, {"TRAINOPS_DISTRIBUTION": '{"type": "smddp"}'})
    assert result.returncode == 0, result.stderr
    assert "SMDDP library is not installed here: using the gloo backend instead of smddp" in result.stderr
