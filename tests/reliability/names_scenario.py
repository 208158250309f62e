"""Hostile job names (issue 15, item 11), shared by test_reliability_names.py and bench/reliability.py.

`trainops run --job-name NAME` (and `status`, `logs`, `stop NAME`) with names that would become paths outside
`$TRAINOPS_HOME`: `../x`, `../../x`, an absolute path, `.`, `..`, a `;` and a newline. Each command runs in one child
process (the CLI's own `main`, `TRAINOPS_HOME` set, no `--workdir`), and every file under the scratch directory is
listed before and after: nothing may appear outside `$TRAINOPS_HOME`, and no job directory inside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

# Placeholders: ABSOLUTE becomes a path in the scratch directory, outside $TRAINOPS_HOME.
HOSTILE_NAMES = ["../x", "../../escaped", "ABSOLUTE", ".", "..", "a;b", "a\nb", "name with space"]

SCRIPT = textwrap.dedent('''
    """Writes its model: a job that runs at all leaves files behind."""
    import os
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("a model")
''')

CHILD = r'''
import contextlib, io, json, sys, time
from trainops.cli import main
results = []
for arguments in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(arguments)
        except SystemExit as exit:  # argparse's own refusals
            code = exit.code
    results.append({"arguments": arguments, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                    "seconds": time.perf_counter() - started})
sys.__stdout__.write(json.dumps(results))
'''


def write_job(root: Path) -> Path:
    """A one-host job spec without output_path (its model goes under $TRAINOPS_HOME/output)."""
    source = root / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(SCRIPT)
    spec = root / "job.yaml"
    spec.write_text("name: tiny\nentry_point: train.py\nsource_dir: src\ninstance_type: local\ninstance_count: 1\n")
    return spec


def snapshot(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


def hostile_names(root: Path) -> list[str]:
    return [str(root / "absolute-target") if name == "ABSOLUTE" else name for name in HOSTILE_NAMES]


def run_hostile_names(root: Path) -> dict:
    """Run `run`, `status`, `logs` and `stop` with every hostile name; one row per (command, name) with the exit
    code, the message, and the paths created outside $TRAINOPS_HOME and under its jobs directory."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    spec = write_job(root)
    calls = []
    for name in hostile_names(root):
        calls.append(["run", str(spec), "--job-name", name])
        calls += [[command, name, "--backend", "local"] for command in ("status", "logs", "stop")]
    before = snapshot(root)
    environment = {**os.environ, "TRAINOPS_HOME": str(home), "PYTHONPATH": str(REPOSITORY)}
    completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps(calls)], capture_output=True, text=True,
                               timeout=600, env=environment, cwd=str(root))
    if completed.returncode != 0:
        raise RuntimeError(f"the child process failed: {completed.stderr[-3000:]}")
    results = json.loads(completed.stdout)
    after = snapshot(root)
    created = sorted(after - before)
    outside = [path for path in created if not path.startswith("home")]
    in_jobs = [path for path in created if path.startswith(os.path.join("home", "jobs") + os.sep)]
    rows = []
    for result in results:
        arguments = result["arguments"]
        command, name = arguments[0], arguments[3] if arguments[0] == "run" else arguments[1]
        rows.append({"command": command, "name": name, "code": result["code"], "message": result["err"].strip(),
                     "seconds": round(result["seconds"], 3)})
    return {"rows": rows, "outside": outside, "in_jobs": in_jobs, "created": created}


def measure(root: Path) -> dict:
    """The bench's figures: calls, refused with exit 2 naming job_name, paths written outside, time."""
    started = time.perf_counter()
    outcome = run_hostile_names(root)
    rows = outcome["rows"]
    refused = [row for row in rows if row["code"] == 2 and "job_name" in row["message"]
               and "Traceback" not in row["message"]]
    return {"names": len(HOSTILE_NAMES), "calls": len(rows), "refused": len(refused),
            "outside": len(outcome["outside"]), "job_dirs": len(outcome["in_jobs"]),
            "slowest": max(row["seconds"] for row in rows), "seconds": round(time.perf_counter() - started, 1)}
