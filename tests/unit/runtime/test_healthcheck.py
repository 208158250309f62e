"""The GPU health check: catalog lookups, verdicts and messages, the table and JSON, the opt-in launch step. The
measurements themselves need a GPU (skipped without one; bench/README.md has figures from an H200)."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from trainops.runtime import healthcheck
from trainops.runtime.config import healthcheck_requested
from trainops.runtime.failure import read_failure


@pytest.mark.parametrize("name, instance_type, model", [
    ("NVIDIA H200", "", "H200"),
    ("NVIDIA H100 80GB HBM3", "", "H100"),
    ("NVIDIA A100-SXM4-80GB", "", "A100-80GB"),
    ("NVIDIA A100-SXM4-40GB", "", "A100-40GB"),
    ("NVIDIA A10G", "", "A10G"),
    ("NVIDIA L40S", "", "L40S"),
    ("Some Future GPU", "ml.p4d.24xlarge", "A100-40GB"),   # unknown name: the instance type's accelerator
    ("Some Future GPU", "local", None),
])
def test_device_names_map_to_catalog_models(name, instance_type, model):
    assert healthcheck.catalog_model(name, instance_type) == model


def test_expected_figures_come_from_the_catalog():
    assert healthcheck.expected_figures("H200") == {"bf16_tflops": 989.4, "memory_bandwidth_gbps": 4800}
    assert healthcheck.expected_figures("T4")["bf16_tflops"] is None
    assert healthcheck.expected_figures(None) == {"bf16_tflops": None, "memory_bandwidth_gbps": None}


def test_a_figure_far_below_fails_with_host_device_and_figure():
    check = healthcheck._check("algo-3", "GPU 5 (NVIDIA H200)", "bf16 matmul", "TFLOP/s", 301.0, 989.4, 0.5)
    assert check["ok"] is False and check["ratio"] == pytest.approx(0.304, abs=1e-3)
    assert check["message"] == ("health check failed on host algo-3: GPU 5 (NVIDIA H200) bf16 matmul 301.0 TFLOP/s "
                                "is 0.30 of the 989.4 TFLOP/s expected (threshold 0.5)")
    good = healthcheck._check("algo-3", "GPU 0 (NVIDIA H200)", "memory bandwidth", "GB/s", 4100.0, 4800, 0.5)
    assert good["ok"] and "message" not in good
    unknown = healthcheck._check("algo-1", "GPU 0 (T4)", "bf16 matmul", "TFLOP/s", 10.0, None, 0.5)
    assert unknown["ok"] and unknown["ratio"] is None


def test_table_shows_each_figure_and_the_verdict():
    checks = [healthcheck._check("algo-1", "GPU 0 (NVIDIA H200)", "bf16 matmul", "TFLOP/s", 780.0, 989.4, 0.5),
              healthcheck._check("algo-1", "GPU 1 (NVIDIA H200)", "bf16 matmul", "TFLOP/s", 100.0, 989.4, 0.5)]
    report = {"host": "algo-1", "checks": checks, "passed": False, "failures": [checks[1]["message"]]}
    table = healthcheck.format_table(report)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["host", "device", "figure"]
    assert "780.0" in lines[2] and lines[2].rstrip().endswith("yes")
    assert "100.0" in lines[3] and lines[3].rstrip().endswith("NO")
    assert lines[-1].startswith("health check on algo-1: FAILED: health check failed on host algo-1: GPU 1")
    empty = {"host": "algo-2", "checks": [], "passed": True, "note": "no GPU on this host: nothing to check"}
    assert healthcheck.format_table(empty) == "health check on algo-2: no GPU on this host: nothing to check: passed"


@pytest.mark.parametrize("environ, hyperparameters, expected", [
    ({}, {}, False),
    ({"TRAINOPS_HEALTHCHECK": "1"}, {}, True),
    ({"TRAINOPS_HEALTHCHECK": "true"}, {}, True),
    ({"TRAINOPS_HEALTHCHECK": "0"}, {}, False),
    ({}, {"trainops_healthcheck": "true"}, True),      # json-encoded, as hyperparameters.json holds it
    ({}, {"trainops_healthcheck": "false"}, False),
])
def test_opt_in(environ, hyperparameters, expected):
    assert healthcheck_requested(environ, hyperparameters) is expected


@pytest.mark.parametrize("environ, hyperparameters, hosts, instance_type, expected", [
    ({}, {}, ["algo-1", "algo-2"], "ml.p4d.24xlarge", True),        # multi-node GPU on SageMaker: on by default
    ({}, {}, ["algo-1"], "ml.p4d.24xlarge", False),                 # one host: off
    ({}, {}, ["algo-1", "algo-2"], "ml.c5.xlarge", False),          # no GPU: off
    ({"TRAINOPS_LOCAL": "1"}, {}, ["algo-1", "algo-2"], "ml.p4d.24xlarge", False),  # simulated hosts share a machine
    ({"TRAINOPS_HEALTHCHECK": "0"}, {}, ["algo-1", "algo-2"], "ml.p4d.24xlarge", False),  # the spec said no
    ({"TRAINOPS_HEALTHCHECK": "1", "TRAINOPS_LOCAL": "1"}, {}, ["algo-1"], "ml.c5.xlarge", True),
    ({}, {"trainops_healthcheck": "false"}, ["algo-1", "algo-2"], "ml.p5.48xlarge", False),
])
def test_default_for_multi_node_gpu_jobs(environ, hyperparameters, hosts, instance_type, expected):
    assert healthcheck_requested(environ, hyperparameters, hosts, instance_type) is expected


def test_threshold_from_argument_or_environment():
    assert healthcheck.threshold_from({}) == 0.5
    assert healthcheck.threshold_from({"TRAINOPS_HEALTHCHECK_THRESHOLD": "0.8"}) == 0.8
    assert healthcheck.threshold_from({"TRAINOPS_HEALTHCHECK_THRESHOLD": "0.8"}, 0.3) == 0.3
    for bad in ("fast", "0", "1.5"):
        with pytest.raises(ValueError):
            healthcheck.threshold_from({"TRAINOPS_HEALTHCHECK_THRESHOLD": bad})


def test_the_launch_config_carries_the_opt_in(contract_dir):
    from trainops.runtime.config import launch_config
    from trainops.runtime.contract import read_contract

    base = contract_dir(hyperparameters={"sagemaker_program": "train.py", "trainops_healthcheck": "true"}, name="a")
    assert launch_config(read_contract(base, {}), {}).healthcheck is True
    base = contract_dir(hyperparameters={"sagemaker_program": "train.py"}, name="b")
    assert launch_config(read_contract(base, {}), {}).healthcheck is False
    assert launch_config(read_contract(base, {}), {"TRAINOPS_HEALTHCHECK": "1"}).healthcheck is True


def test_the_command_passes_without_a_gpu_and_writes_json(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the no-GPU report does not apply")
    result = subprocess.run([sys.executable, "-m", "trainops.runtime", "healthcheck", "--host", "algo-9",
                             "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "health check on algo-9: no GPU on this host: nothing to check: passed" in result.stdout
    report = json.loads((tmp_path / "healthcheck-algo-9.json").read_text())
    assert report["passed"] is True and report["gpus"] == 0 and report["checks"] == []


def test_a_failed_check_fails_the_launch_with_the_message(tmp_path, monkeypatch):
    output = tmp_path / "output"
    plan = types.SimpleNamespace(current_host="algo-2", env={"SM_OUTPUT_DATA_DIR": str(output / "data")},
                                 failure_path=str(output / "failure"))
    message = ("health check failed on host algo-2: GPU 3 (NVIDIA H200) memory bandwidth 900.0 GB/s is 0.19 of the "
               "4800 GB/s expected (threshold 0.5)")
    seen = {}

    def fake_run(command, env, check):
        seen["command"], seen["env"] = command, env
        (output / "data").mkdir(parents=True)
        (output / "data" / "healthcheck-algo-2.json").write_text(json.dumps({"failures": [message]}))
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(subprocess, "run", fake_run)
    (output).mkdir()
    (output / "failure").write_text("left over from an earlier run\n")
    assert healthcheck.preflight(plan, {"NCCL_NVLS_ENABLE": "0"}) == 1
    assert seen["command"][1:4] == ["-m", "trainops.runtime", "healthcheck"]
    assert seen["env"]["NCCL_NVLS_ENABLE"] == "0"  # the machine's settings reach the check
    failure = read_failure(plan.failure_path)
    assert failure["summary"] == message and failure["host"] == "algo-2"


def test_a_passed_check_lets_the_launch_go_on(tmp_path, monkeypatch):
    plan = types.SimpleNamespace(current_host="algo-1", env={"SM_OUTPUT_DATA_DIR": str(tmp_path)},
                                 failure_path=str(tmp_path / "failure"))
    monkeypatch.setattr(subprocess, "run", lambda command, env, check: subprocess.CompletedProcess(command, 0))
    assert healthcheck.preflight(plan, {}) == 0
    assert not (tmp_path / "failure").exists()


@pytest.fixture
def cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


def test_gpu_measurements_are_plausible(cuda):
    device = cuda.device("cuda", 0)
    assert 10 < healthcheck.matmul_tflops(device, size=4096, iterations=5, repeats=3) < 5000
    assert 50 < healthcheck.copy_gbps(device, nbytes=2**28, iterations=5, repeats=3) < 20000


def test_all_reduce_probe_on_several_gpus(cuda):
    if cuda.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    probe = healthcheck.allreduce_busbw(2, nbytes=64 * 2**20, iterations=5)
    assert probe["gpus"] == 2 and probe["busbw_gbps"] == pytest.approx(probe["algbw_gbps"])  # 2(n-1)/n = 1


def test_injected_failure_fails_the_named_host_only(tmp_path, capsys):
    arguments = healthcheck.build_parser(__import__("argparse").ArgumentParser()).parse_args(
        ["--host", "algo-2", "--output-dir", str(tmp_path), "--no-all-reduce"])
    environ = {healthcheck.INJECT_VARIABLE: "algo-2"}
    assert healthcheck.run_command(arguments, environ) == 1
    report = __import__("json").loads((tmp_path / "healthcheck-algo-2.json").read_text())
    assert report["failures"][0].startswith("health check failed on host algo-2: GPU 0 (injected fault)")
    arguments.host = "algo-1"
    assert healthcheck.run_command(arguments, environ) == 0


@pytest.mark.parametrize("kind", ["fifo", "sparse", "bad-json", "array"])
def test_a_hostile_report_is_named_in_the_failure_without_hanging(tmp_path, monkeypatch, kind):
    """The report lies in the job's output directory, which an earlier run's ranks could write: a FIFO, a huge file
    or bad JSON there is said in the failure, never a hang or a raw error."""
    from support.hostile_files import REFUSED, finishes, plant

    report = tmp_path / "data" / "healthcheck-algo-2.json"
    plan = types.SimpleNamespace(current_host="algo-2", env={"SM_OUTPUT_DATA_DIR": str(tmp_path / "data")},
                                 failure_path=str(tmp_path / "failure"))

    def fake_run(command, env, check):
        plant(report, kind)
        return subprocess.CompletedProcess(command, 3)

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert finishes(lambda: healthcheck.preflight(plan, {})) == 1
    summary = read_failure(plan.failure_path)["summary"]
    assert summary.startswith("health check on host algo-2 could not run (exit code 3); its report is unreadable: "
                              f"{report}: ") and REFUSED[kind] in summary, summary
