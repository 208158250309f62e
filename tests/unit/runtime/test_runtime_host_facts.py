"""Host detection: accelerator counts from the driver files, overrides from SM_NUM_GPUS / SM_NUM_NEURONS."""

from __future__ import annotations

import os
import subprocess
import sys

from trainops.runtime import host_facts
from trainops.runtime.host_facts import count_neuron_cores, count_nvidia_gpus, detect_host_facts, visible_gpus


def test_gpus_from_the_driver_proc_entries(tmp_path):
    for index in range(4):
        (tmp_path / f"0000:0{index}:00.0").mkdir()
    assert count_nvidia_gpus(str(tmp_path), run_nvidia_smi=False) == 4
    assert count_nvidia_gpus(str(tmp_path / "absent"), run_nvidia_smi=False) == 0


def test_cuda_visible_devices_narrows():
    assert visible_gpus(8, None) == 8
    assert visible_gpus(8, "0,1") == 2
    assert visible_gpus(8, "") == 0
    assert visible_gpus(8, "-1") == 0
    assert visible_gpus(0, "0") == 0


def test_neuron_cores_from_sysfs(tmp_path):
    for index in range(16):
        device = tmp_path / f"neuron{index}"
        device.mkdir()
        (device / "core_count").write_text("2\n")
    assert count_neuron_cores(str(tmp_path), run_neuron_ls=False) == 32
    assert count_neuron_cores(str(tmp_path / "absent"), run_neuron_ls=False) == 0


def test_sagemaker_variables_override_detection(monkeypatch):
    monkeypatch.setattr(host_facts, "count_nvidia_gpus", lambda *a, **k: 1)
    monkeypatch.setattr(host_facts, "count_neuron_cores", lambda *a, **k: 0)
    facts = detect_host_facts({"SM_NUM_GPUS": "8", "SM_NUM_NEURONS": "32", "SM_NUM_CPUS": "96"})
    assert (facts.gpus, facts.neuron_cores, facts.cpus) == (8, 32, 96)
    detected = detect_host_facts({})
    assert (detected.gpus, detected.neuron_cores) == (1, 0)


def runtime_path_seen_from(directory) -> str:
    code = "from trainops.runtime.host_facts import runtime_search_path; print(runtime_search_path())"
    return subprocess.run([sys.executable, "-c", code], cwd=directory, capture_output=True, text=True,
                          check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout.strip()


def test_runtime_path_only_when_the_ranks_would_not_find_trainops(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(host_facts.__file__)))
    # Installed in the venv (editable): a rank started anywhere imports it without help.
    assert runtime_path_seen_from(str(tmp_path)) == "None"
    # Found only through the launcher's working directory: the ranks need it on their PYTHONPATH.
    assert runtime_path_seen_from(root) == root
