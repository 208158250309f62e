"""``requirements`` (SDK v3's ``SourceCode.requirements``): the file of packages the runtime installs with pip on
this host before the training script starts, as v3's training script does (``install_requirements.py``).

A failed install ends the job before the script: the failure file says which file, the pip exit code and pip's last
lines, beginning with the sentence every backend classifies as a setup failure (``before the training script
started: ``, `trainops.backends.failures.BEFORE_SCRIPT`), so a typo in a package name is not reported as the
script's error. Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from trainops.runtime.hyperparameters import decode_value

#: The hyperparameter that names the file, relative to the code directory (the trainops launcher sets it).
REQUIREMENTS_KEY = "trainops_requirements"
#: How the failure's first line begins (the same text as trainops.backends.failures.BEFORE_SCRIPT).
BEFORE_SCRIPT = "before the training script started: "
#: pip's last lines kept in the failure file.
TAIL_LINES = 15


def requirements_file(hyperparameters: Mapping[str, Any], code_dir: str) -> str | None:
    """The absolute path of the job's requirements file, or None when the job has none."""
    name = decode_value(hyperparameters.get(REQUIREMENTS_KEY))
    if not name:
        return None
    return os.path.join(code_dir, str(name))


def install(path: str, host: str, python: str | None = None,
            environ: Mapping[str, str] | None = None) -> str | None:
    """``pip install -r path`` with this host's Python; None on success, else the failure's text."""
    name = os.path.basename(path)
    if not os.path.isfile(path):
        return (f"{BEFORE_SCRIPT}the requirements file {name} is not in the code directory on host {host}: add it "
                "to source_dir or correct requirements")
    print(f"trainops: installing the packages of {name} on host {host}", file=sys.stderr, flush=True)
    command = [python or sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-r", path]
    done = subprocess.run(command, env=dict(os.environ if environ is None else environ), check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stderr.write(done.stdout)
    if done.returncode == 0:
        return None
    tail = [line for line in done.stdout.splitlines() if line.strip()][-TAIL_LINES:]
    return (f"{BEFORE_SCRIPT}installing the requirements of {name} failed on host {host} (pip exited "
            f"{done.returncode}): fix the file or the package index it needs\n" + "\n".join(tail))
