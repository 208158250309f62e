"""Clean errors (issue 15, item 13), shared by test_reliability_clean_errors.py and bench/reliability.py.

Each case is a command line a user could type that used to end in `internal error: <exception>` (exit 1): an unknown
job name with no AWS region, a work directory that is a file or lies in /proc, `kfp compile -o /`, a corrupt status
record, a registry that is a file. Every case must exit 2 with a message saying what is wrong (the text checked),
without a traceback. All cases run in one child process (the CLI's own `main`), with no AWS region configured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
PIPELINE = REPOSITORY / "examples" / "digits" / "pipeline.yaml"

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
        except SystemExit as exit:
            code = exit.code
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue(),
                    "seconds": time.perf_counter() - started})
sys.__stdout__.write(json.dumps(results))
'''


def prepare(root: Path) -> dict[str, Path]:
    """The files the cases point at: a plain file, a job spec, a home with two corrupt status records."""
    home = root / "home"
    for name, record in (("list-record", [1, 2]),
                         ("text-pid", {"job_name": "text-pid", "status": "InProgress", "controller_pid": "abc"})):
        (home / "jobs" / name).mkdir(parents=True)
        (home / "jobs" / name / "status.json").write_text(json.dumps(record))
    plain = root / "a-file"
    plain.write_text("not a directory\n")
    source = root / "src"
    source.mkdir()
    (source / "train.py").write_text("print('never run')\n")
    spec = root / "job.yaml"
    spec.write_text("name: tiny\nentry_point: train.py\nsource_dir: src\ninstance_type: local\ninstance_count: 1\n")
    return {"home": home, "file": plain, "spec": spec}


def cases(places: dict[str, Path]) -> list[tuple[str, list[str], list[str]]]:
    """(label, arguments, texts the message must hold)."""
    plain, spec = str(places["file"]), str(places["spec"])
    region = ["no job 'nosuch' on the local backend", "--backend NAME"]
    found = [(f"{command} of an unknown job, no AWS region", [command, "nosuch"], region)
             for command in ("status", "logs", "stop")]
    found += [(f"{command} on a backend that needs a region, none set", [command, "nosuch", "--backend", "sagemaker"],
               ["region", "needs a region"]) for command in ("status", "logs", "stop")]
    found += [
        ("run --workdir on a file", ["run", spec, "--workdir", plain], ["workdir", "is a file, not a directory"]),
        ("run --workdir under a file", ["run", spec, "--workdir", f"{plain}/sub"], ["workdir", "is a file"]),
        ("run --workdir in /proc", ["run", spec, "--workdir", "/proc/self"], ["workdir", "kernel file system"]),
        ("status --workdir in /proc", ["status", "x", "--workdir", "/proc/self"], ["workdir", "kernel file system"]),
        ("a pipeline with --workdir on a file", ["run", str(PIPELINE), "--workdir", plain],
         ["workdir", "is a file, not a directory"]),
        ("kfp compile -o /", ["kfp", "compile", str(PIPELINE), "-o", "/"], ["--output", ".yaml"]),
        ("kfp compile -o under a file", ["kfp", "compile", str(PIPELINE), "-o", f"{plain}/x.yaml"],
         ["--output", "is a file, not a directory"]),
        ("models list --registry on a file", ["models", "list", "--registry", plain], ["--registry", "not a registry"]),
    ]
    for name, text in (("list-record", "expected a JSON object"), ("text-pid", "controller_pid")):
        found += [(f"{command} of a status record that is {name.replace('-', ' ')}", [command, name], [text])
                  for command in ("status", "logs", "stop")]
        found.append((f"run re-attaching to a {name.replace('-', ' ')}", ["run", spec, "--job-name", name], [text]))
    return found


def run_cases(root: Path) -> list[dict]:
    """Run every case; one row each: label, exit code, message, whether it is right and why not."""
    places = prepare(root)
    chosen = cases(places)
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE")}
    environment.update(TRAINOPS_HOME=str(places["home"]), AWS_CONFIG_FILE=os.devnull,
                       AWS_SHARED_CREDENTIALS_FILE=os.devnull, PYTHONPATH=str(REPOSITORY))
    completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps([arguments for _, arguments, _ in chosen])],
                               capture_output=True, text=True, timeout=600, env=environment, cwd=str(REPOSITORY))
    if completed.returncode != 0:
        raise RuntimeError(f"the child process failed: {completed.stderr[-3000:]}")
    rows = []
    for (label, arguments, texts), result in zip(chosen, json.loads(completed.stdout), strict=True):
        message = result["err"].strip()
        wrong = [] if result["code"] == 2 else [f"exit {result['code']}"]
        wrong += ["traceback"] if "Traceback" in message or "internal error" in message else []
        wrong += [f"{text!r} missing" for text in texts if text not in message]
        rows.append({"case": label, "arguments": arguments, "code": result["code"], "message": message,
                     "wrong": wrong, "seconds": round(result["seconds"], 3)})
    return rows


def measure(root: Path) -> dict:
    started = time.perf_counter()
    rows = run_cases(root)
    return {"cases": len(rows), "right": sum(not row["wrong"] for row in rows),
            "wrong": [f"{row['case']}: {', '.join(row['wrong'])}" for row in rows if row["wrong"]],
            "slowest": max(row["seconds"] for row in rows), "seconds": round(time.perf_counter() - started, 1)}
