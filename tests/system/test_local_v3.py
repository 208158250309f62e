"""A spec in the SDK v3's names run by the local backend (`trainops run`): the script's arguments as v3's drivers
pass them, SourceCode.requirements installed by the runtime before the script (or the job failing before it), and
v3's default ignore_patterns kept out of the code the job runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

TRAINOPS = [sys.executable, "-m", "trainops.cli"]
SCRIPT = ("import json, os, sys\nprint('ARGS', json.dumps(sys.argv[1:]))\n"
          "print('CODE', json.dumps(sorted(os.listdir(os.path.dirname(os.path.abspath(__file__))))))\n")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=300, env=dict(os.environ))


def v3_job(tmp_path, requirements: str) -> str:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    (tmp_path / "src" / "requirements.txt").write_text(requirements)
    # v3's default SourceCode.ignore_patterns leave these out of the code the job runs
    (tmp_path / "src" / ".env").write_text("SECRET=1\n")
    (tmp_path / "src" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "src" / ".ipynb_checkpoints" / "train-checkpoint.py").write_text("")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "base_job_name: v3job\n"
        "source_code: {source_dir: src, entry_script: train.py, requirements: requirements.txt}\n"
        "compute: {instance_type: local, instance_count: 2}\n"
        "hyperparameters: {amp: true, layers: [attn, mlp], name: '[1,2]', lr: 0.1, b: 3}\n"
        "output_data_config: {s3_output_path: out}\n")
    return str(spec)


def test_v3_arguments_and_requirements_installed_on_every_host(tmp_path):
    # pyyaml is installed already: pip is satisfied without reaching an index
    spec = v3_job(tmp_path, "pyyaml\n")
    result = run_cli("run", spec, "--workdir", str(tmp_path / "work"), "--job-name", "v3-ok")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert output.count("installing the packages of requirements.txt on host") == 2  # algo-1 and algo-2
    arguments = [json.loads(line.split("ARGS ", 1)[1]) for line in output.splitlines() if "ARGS " in line]
    assert arguments and all(item == ["--amp", "true", "--layers", '["attn", "mlp"]', "--name", "[1,2]",
                                      "--lr", "0.1", "--b", "3"] for item in arguments)
    listings = [json.loads(line.split("CODE ", 1)[1]) for line in output.splitlines() if "CODE " in line]
    assert listings and all(".env" not in names and ".ipynb_checkpoints" not in names and "train.py" in names
                            and "requirements.txt" in names for names in listings)


def test_a_failed_install_ends_the_job_before_the_script(tmp_path):
    spec = v3_job(tmp_path, "this is not a requirement!!\n")
    result = run_cli("run", spec, "--workdir", str(tmp_path / "work"), "--job-name", "v3-bad")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "ARGS " not in output
    assert "before the training script started: installing the requirements of requirements.txt failed" in output
    status = run_cli("status", "v3-bad", "--workdir", str(tmp_path / "work"), "--json")
    assert '"setup"' in status.stdout, status.stdout + status.stderr


def test_a_v3_command_with_its_args_runs_on_every_host(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import json, os, sys\nprint('ARGS', json.dumps(sys.argv[1:]))\nprint('HPS', os.environ['SM_HPS'])\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(json.dumps({
        "base_job_name": "v3cmd", "output_data_config": {"s3_output_path": "out"},
        "source_code": {"source_dir": "src", "command": f"{sys.executable} train.py --epochs 2",
                        "args": ["--name", "a b; echo injected", 0.5]},
        "compute": {"instance_type": "local", "instance_count": 2}, "hyperparameters": {"lr": 0.1}}))
    result = run_cli("run", str(spec), "--workdir", str(tmp_path / "work"), "--job-name", "v3-cmd")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    arguments = [json.loads(line.split("ARGS ", 1)[1]) for line in output.splitlines() if line.startswith("ARGS ")
                 or " ARGS " in line]
    # once per host, each argument as one word (shell-quoted as v3 quotes them): nothing of it ran as a command
    assert len(arguments) == 2 and all(item == ["--epochs", "2", "--name", "a b; echo injected", "0.5"]
                                       for item in arguments)
    assert "injected\n" not in output.replace("echo injected", "")
    hps = [json.loads(line.split("HPS ", 1)[1]) for line in output.splitlines() if "HPS " in line]
    assert hps and all(item == {"lr": 0.1} for item in hps)  # hyperparameters reach a command in SM_HPS only
