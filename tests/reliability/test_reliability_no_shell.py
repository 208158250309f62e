"""No shell (issue 10, item 3): the package never runs one (a static scan of trainops/, and a check that the scan
finds each kind of shell use), and custom MPI options with shell metacharacters never reach a launcher: refused by
`trainops run` and by the runtime itself when they come in through the SageMaker toolkit's hyperparameters.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from no_shell_scan import scan_source, scan_tree

from trainops.cli import main

REPOSITORY = Path(__file__).resolve().parents[2]


# --- no shell --------------------------------------------------------------------------------------------------------

def test_trainops_never_runs_a_shell():
    findings, files = scan_tree(REPOSITORY / "trainops")
    assert files > 50
    assert findings == [], "\n".join(map(str, findings))


@pytest.mark.parametrize("source", [
    "import subprocess\nsubprocess.run('ls -l', shell=True)",
    "import subprocess\nsubprocess.run(['ls'], shell=flag)",
    "import os\nos.system('ls')",
    "import os\nos.popen('ls')",
    "import subprocess\nsubprocess.getoutput('ls')",
    "import subprocess\nsubprocess.Popen(f'mpirun {options}')",
    "import subprocess\nsubprocess.check_call('mpirun ' + options)",
    "import subprocess\nsubprocess.call(' '.join(argv))",
    "import subprocess\ndef f(options):\n    command = 'mpirun %s' % options\n    subprocess.Popen(command)",
    "import subprocess\ndef f(command: str):\n    subprocess.run(command)",
    "import subprocess\nsubprocess.run(['bash', '-c', 'ls'])",
    "import os\nos.execvp('sh', ['sh', '-c', 'ls'])",
    "import asyncio\nasyncio.create_subprocess_shell('ls')",
])
def test_the_scan_finds_each_kind_of_shell_use(source):
    assert scan_source(source), source


@pytest.mark.parametrize("source", [
    "import subprocess\nsubprocess.run(['ls', '-l'], shell=False)",
    "import subprocess\ndef f(argv: list[str]):\n    subprocess.Popen(argv)",
    "import subprocess\nsubprocess.run([sys.executable, '-m', 'x'])",
    "import asyncio\nasyncio.run(main())",
])
def test_the_scan_accepts_argument_lists(source):
    assert scan_source(source) == []


# --- custom MPI options ---------------------------------------------------------------------------------------------

def test_run_refuses_shell_metacharacters_in_mpi_options_before_anything_starts(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "train.py").write_text("print('never')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"entry_point": "train.py", "instance_type": "local", "instance_count": 2,
                                    "distribution": {"mpi": {"enabled": True,
                                                             "custom_mpi_options": f"-x A=1; touch {marker}"}}}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(spec), "--workdir", str(tmp_path / "work")])
    assert code == 2 and "distribution.mpi.custom_mpi_options: contains shell metacharacters" in err.getvalue()
    assert not marker.exists() and not (tmp_path / "work" / "jobs").exists()


@pytest.mark.parametrize("key", ["sagemaker_mpi_custom_mpi_options",
                                 "sagemaker_distributed_dataparallel_custom_mpi_options"])
def test_the_runtime_refuses_them_from_toolkit_hyperparameters(tmp_path, key):
    """A job created outside trainops (the SDK's toolkit encoding) reaches the runtime without the spec's check."""
    marker = tmp_path / "pwned"
    base = tmp_path / "algo-1"
    (base / "input" / "config").mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "train.py").write_text("print('never')\n")
    (base / "input" / "config" / "resourceconfig.json").write_text(json.dumps(
        {"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": "ml.p4d.24xlarge",
         "network_interface_name": "eth0"}))
    enabled = "sagemaker_mpi_enabled" if "mpi_custom" in key else "sagemaker_distributed_dataparallel_enabled"
    hyperparameters = {"sagemaker_program": "train.py", enabled: True, key: f"-x A=$(touch {marker})"}
    (base / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({name: json.dumps(value) for name, value in hyperparameters.items()}))
    (base / "input" / "config" / "inputdataconfig.json").write_text("{}")
    environment = {name: value for name, value in os.environ.items() if not name.startswith(("TRAINOPS_", "SM_"))}
    completed = subprocess.run([sys.executable, "-m", "trainops.runtime", "launch", "--base-dir", str(base)],
                               capture_output=True, text=True, timeout=60, env=environment)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "shell metacharacters" in completed.stderr and "Traceback" not in completed.stderr
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("invalid job input on host algo-1") and "custom_mpi_options" in failure
    assert not marker.exists()
