"""``python -m trainops.runtime``: help, dry run, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def runtime(*arguments: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINOPS_", "SM_"))}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "trainops.runtime", *arguments], capture_output=True, text=True,
                          env=environ, timeout=timeout)


def test_help():
    top = runtime("--help")
    assert top.returncode == 0 and "launch" in top.stdout
    launch = runtime("launch", "--help")
    assert launch.returncode == 0 and "--dry-run" in launch.stdout and "--base-dir" in launch.stdout


def test_dry_run_prints_one_json_object_with_only_the_additions(contract_dir):
    base = contract_dir(hosts=["algo-1", "algo-2"], current="algo-2", instance_type="ml.p4d.24xlarge",
                        hyperparameters={"epochs": 3, "trainops_distribution": {"type": "torch_distributed"}})
    result = runtime("launch", "--dry-run", env={"SAGEMAKER_BASE_DIR": base, "SM_NUM_GPUS": "8",
                                                 "NCCL_NVLS_ENABLE": "0"})
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert set(plan) == {"argv", "env"}
    assert plan["argv"][plan["argv"].index("--nproc_per_node") + 1] == "8"
    assert plan["argv"][plan["argv"].index("--node_rank") + 1] == "1"
    assert plan["env"]["SM_CURRENT_HOST"] == "algo-2"
    assert "NCCL_NVLS_ENABLE" not in plan["env"]  # inherited by the ranks, not something the plan adds
    assert not os.path.exists(os.path.join(base, "output", "success"))  # a dry run runs nothing


def test_base_dir_flag(contract_dir):
    base = contract_dir()
    result = runtime("launch", "--dry-run", "--base-dir", base)
    assert result.returncode == 0 and json.loads(result.stdout)["env"]["SM_MODEL_DIR"] == f"{base}/model"


def test_missing_contract_exits_2_and_says_what_to_do(tmp_path):
    result = runtime("launch", "--dry-run", env={"SAGEMAKER_BASE_DIR": str(tmp_path)})
    assert result.returncode == 2
    assert f"missing {tmp_path}/input/config/resourceconfig.json" in result.stderr
    assert "Traceback" not in result.stderr


def test_shell_metacharacters_in_mpi_options_exit_2(contract_dir):
    base = contract_dir(hyperparameters={"trainops_distribution": {"type": "mpi", "custom_mpi_options": "-v; id"}})
    dry = runtime("launch", "--dry-run", env={"SAGEMAKER_BASE_DIR": base})
    assert dry.returncode == 2 and "shell metacharacters" in dry.stderr
    assert not os.path.exists(os.path.join(base, "output", "failure"))  # a dry run writes nothing
    result = runtime("launch", env={"SAGEMAKER_BASE_DIR": base})
    assert result.returncode == 2 and "shell metacharacters" in result.stderr
    # The reason also reaches the failure file, where SageMaker's FailureReason and the local backend read it.
    failure = open(os.path.join(base, "output", "failure")).read().splitlines()
    assert failure[0].startswith("invalid job input on host algo-1: distribution.custom_mpi_options (mpi): contains "
                                 "shell metacharacters")
    assert "exit_code: 2" in failure and "reason: error" in failure


def test_a_plain_job_runs_and_reports_success(contract_dir):
    base = contract_dir(hyperparameters={"greeting": "hello"},
                        script="import sys; print('args', sys.argv[1:])\n")
    result = runtime("launch", env={"SAGEMAKER_BASE_DIR": base})
    assert result.returncode == 0, result.stderr
    assert "args ['--greeting', 'hello']" in result.stdout
    assert os.path.exists(os.path.join(base, "output", "success"))


def test_a_failing_plain_job_exits_1_with_a_failure_file(contract_dir):
    base = contract_dir(script="raise RuntimeError('no data')\n")
    result = runtime("launch", env={"SAGEMAKER_BASE_DIR": base})
    assert result.returncode == 1
    failure = open(os.path.join(base, "output", "failure")).read()
    assert failure.startswith("rank 0 on host algo-1 exited with code 1: RuntimeError: no data\n")
    assert "reason: error" in failure
