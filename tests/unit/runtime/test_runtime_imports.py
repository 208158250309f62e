"""The runtime must load in a container without pydantic, and without paying for torch until a script asks."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_runtime_pulls_in_neither_pydantic_nor_torch():
    code = ("import json, sys\n"
            "import trainops.runtime, trainops.runtime.cli, trainops.runtime.execute, trainops.runtime.rank\n"
            "import trainops.runtime.plan, trainops.runtime.mpi_plan, trainops.runtime.mpi_coordination\n"
            "import trainops.runtime.output_relay, trainops.runtime.catalog\n"
            "heavy = ('torch', 'pydantic', 'boto3', 'kfp', 'airflow', 'numpy', 'yaml')\n"
            "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in heavy)))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == []


def test_the_runtime_works_where_pydantic_cannot_be_imported(tmp_path):
    # A stand-in `pydantic` that fails on import: the runtime's dry run must not notice.
    (tmp_path / "pydantic.py").write_text("raise ImportError('no pydantic in this container')\n")
    code = "import trainops.runtime.cli as cli, sys; sys.exit(cli.main(['launch', '--help']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
