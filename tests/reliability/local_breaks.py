"""Helpers of the regression tests of issue 24's breaks in the local backend (state root, records trusted for
killing, registry across file systems, same-name runs, the launcher hang, internal errors): a tiny job spec and the
`trainops` command run as a subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TRAINOPS = [sys.executable, "-m", "trainops.cli"]

ESCAPES = (b"\x1b]0;owned-title\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[H \xc2\x9b31m red \x1b[1A"
           b"\n\x1b[2K[trainops] job completed (forged)\n")
# The stand-in's training: says whether it found a checkpoint someone planted, optionally prints ESCAPES and
# sleeps, then finishes.
SCRIPT = """import os, sys, time
ESCAPES = """ + repr(ESCAPES) + """
checkpoints = os.environ.get("TRAINOPS_CHECKPOINT_DIR", "/opt/ml/checkpoints")
if os.path.isdir(checkpoints) and "planted.pt" in os.listdir(checkpoints):
    print("RESUMED FROM A PLANTED CHECKPOINT", flush=True)
if os.environ.get("ESCAPES"):  # what a hostile rank prints: window title, OSC 52 clipboard, clear screen, a C1 CSI,
    # a cursor move, and a line dressed as trainops' own
    sys.stdout.buffer.write(ESCAPES)
    sys.stdout.flush()
time.sleep(float(os.environ.get("SLEEP", "0")))
print("trained", flush=True)
"""


def write_job(directory: Path, environment: dict[str, str] | None = None, *, name: str = "stand-in",
              extra: list[str] | None = None) -> Path:
    """A one-host job spec running `SCRIPT`; returns the spec file."""
    source = directory / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(SCRIPT)
    spec = directory / "job.yaml"
    lines = [f"name: {name}", "entry_point: train.py", "source_dir: src", "instance_type: ml.m5.large",
             "instance_count: 1", "output_path: out", f"environment: {json.dumps(environment or {})}",
             *(extra or [])]
    spec.write_text("\n".join(lines) + "\n")
    return spec


def cli(*arguments: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = (), timeout: float = 180,
        cwd: Path | None = None) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    environment.update(env or {})
    return subprocess.run([*TRAINOPS, *arguments], capture_output=True, text=True, timeout=timeout,
                          env=environment, cwd=cwd)
