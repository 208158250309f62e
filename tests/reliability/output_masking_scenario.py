"""Secrets in every output path (issue 15, item 12), shared by test_reliability_output_masking.py and
bench/reliability.py.

A pipeline whose job spec carries five secrets in `environment`, one for each kind of the rule of
`trainops.spec.secrets` (a secret-looking name, *_KEY, *_PAT, *_CREDS, a URL with credentials under *_URL), and one
plain URL that must stay readable. Its training script prints each value and its digest. Three paths that showed the
values in clear are run and searched: `trainops kfp compile` (the YAML and the command's output), `trainops kfp
run-local` (the console and every file under the work directory) and the Airflow DAG's `prepare` task (its XComs,
the task logs, the console of `dag.test()`). The digests prove the script still got the real values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
TRAINOPS = [sys.executable, "-m", "trainops.cli"]

SECRETS = {
    "HF_TOKEN": "hf_Masking-Secret-0001",
    "OPENAI_KEY": "sk-Masking-Secret-0002",
    "GH_PAT": "ghp_Masking-Secret-0003",
    "GCP_CREDS": "gcp-Masking-Secret-0004",
    "DATABASE_URL": "postgres://trainer:Masking-Secret-0005@db.example.com:5432/features",
}
#: What must never appear: each value, and for the URL its password alone.
NEEDLES = [value for value in SECRETS.values()] + ["Masking-Secret-0005"]
PLAIN = {"PLAIN_URL": "https://example.com/public/data"}
DIGESTS = {name: hashlib.sha256(value.encode()).hexdigest() for name, value in SECRETS.items()}

TRAIN_SCRIPT = textwrap.dedent('''
    """Prints every secret it was given and its digest (the digest proves the value arrived)."""
    import hashlib, os
    for name in %r:
        value = os.environ[name]
        print(f"{name} digest {hashlib.sha256(value.encode()).hexdigest()} value {value}", flush=True)
    print("PLAIN_URL " + os.environ["PLAIN_URL"], flush=True)
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("a model")
''' % (sorted(SECRETS),))  # noqa: UP031 - the script's own braces rule out str.format

EVALUATE_SCRIPT = textwrap.dedent('''
    import json, os
    out = os.environ.get("TRAINOPS_EVALUATION_DIR") or os.environ["SM_OUTPUT_DATA_DIR"]
    os.makedirs(out, exist_ok=True)
    json.dump({"accuracy": 1.0}, open(os.path.join(out, "metrics.json"), "w"))
''')


def write_pipeline(root: Path, *, full: bool = False) -> Path:
    """The pipeline file (train only; ``full``: stage, train, evaluate, register, as the Airflow DAG needs)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "train.py").write_text(TRAIN_SCRIPT)
    (root / "src" / "evaluate.py").write_text(EVALUATE_SCRIPT)
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "rows.csv").write_text("x,y\n1,2\n")
    spec = {"name": "masking", "entry_point": "train.py", "source_dir": "src", "instance_type": "local",
            "instance_count": 1, "inputs": {"train": "data"}, "environment": {**SECRETS, **PLAIN}}
    steps: dict = {"train": {"spec": spec}}
    if full:
        steps = {"stage": {"source": "data", "destination": "${workdir}/fsx"},
                 "train": {"spec": spec, "channels": {"train": "${workdir}/fsx"}},
                 "evaluate": {"entry_point": "evaluate.py", "source_dir": "src", "gate": "accuracy >= 0.5"},
                 "register": {"group": "masking", "approval": "Approved"}}
    path = root / "pipeline.yaml"
    path.write_text(json.dumps({"name": "masking-pipeline", "workdir": "work", "backend": "local", "steps": steps},
                               indent=2))
    return path


def found_in(text: str) -> int:
    return sum(text.count(needle) for needle in NEEDLES)


def files_holding_secrets(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(needle.encode() in data for needle in NEEDLES):
                found.append(str(path.relative_to(root)))
    return found


def digests_seen(text: str) -> int:
    return sum(f"{name} digest {digest}" in text for name, digest in DIGESTS.items())


def decoded_specs(text: str) -> list[str]:
    """Every ``base64:`` value of a compiled pipeline (trainops.components.paths.encode_parameter), decoded."""
    import base64
    import binascii
    import re

    found = []
    for match in re.finditer(r"base64:([A-Za-z0-9+/=]+)", text):
        try:
            found.append(base64.b64decode(match.group(1), validate=True).decode("utf-8", "replace"))
        except binascii.Error:
            continue
    return found


def kfp_compile(root: Path) -> dict:
    """`trainops kfp compile`: occurrences of the secrets in the YAML and the command's output."""
    pipeline = write_pipeline(root / "compile")
    started = time.perf_counter()
    # as for a cluster: the local backend's steps share a volume, each masked value comes from a Secret
    cluster = ["--work-pvc", "masking-work", *[f"--secret-env={name}=masking-secrets:{name.lower()}"
                                                for name in sorted(SECRETS)]]
    completed = subprocess.run([*TRAINOPS, "kfp", "compile", str(pipeline), "-o", "compiled.yaml", *cluster],
                               capture_output=True, text=True, timeout=300, cwd=str(pipeline.parent))
    seconds = time.perf_counter() - started
    compiled = (pipeline.parent / "compiled.yaml").read_text() if completed.returncode == 0 else ""
    # The job spec travels encoded (base64: + base64 JSON, so KFP substitutes nothing in it): decoded here, or a
    # secret inside it would hide from the search.
    compiled += "\n".join(decoded_specs(compiled))
    return {"path": "kfp compile", "returncode": completed.returncode, "in_output": found_in(compiled),
            "in_console": found_in(completed.stdout + completed.stderr), "masked": compiled.count("****"),
            "plain_kept": compiled.count(PLAIN["PLAIN_URL"]), "seconds": round(seconds, 1),
            "error": completed.stderr[-2000:] if completed.returncode else ""}


def kfp_run_local(root: Path) -> dict:
    """`trainops kfp run-local`: occurrences in the console and in every file of the work directory."""
    pipeline = write_pipeline(root / "run-local")
    started = time.perf_counter()
    completed = subprocess.run([*TRAINOPS, "kfp", "run-local", str(pipeline)], capture_output=True, text=True,
                               timeout=600, cwd=str(pipeline.parent))
    seconds = time.perf_counter() - started
    console = completed.stdout + completed.stderr
    files = files_holding_secrets(pipeline.parent / "work")
    return {"path": "kfp run-local", "returncode": completed.returncode, "in_console": found_in(console),
            "files_with_secret": files, "in_output": len(files), "digests_seen": digests_seen(console),
            "plain_kept": console.count(PLAIN["PLAIN_URL"]), "seconds": round(seconds, 1),
            "error": console[-3000:] if completed.returncode else ""}


def airflow_prepare(root: Path, home) -> dict:
    """The retraining DAG through `dag.test()` on ``home`` (tests/support/airflow_home.py) with the pipeline file;
    the worker's environment holds the secrets (as a deployment gives them), the pipeline file too. Occurrences in
    the prepare task's XComs, all XComs, the task logs and the console."""
    pipeline = write_pipeline(root / "airflow", full=True)
    work = root / "airflow-work"
    started = time.perf_counter()
    # As a deployment sets up its workers: the secrets in the environment, and (through Airflow Variables from the
    # environment) the directory pipeline files may come from and the work directory; a run's conf names neither.
    worker = dataclasses.replace(home, env={**home.env, **SECRETS,
                                            "AIRFLOW_VAR_TRAINOPS_PIPELINE_DIRS": str(pipeline.parent),
                                            "AIRFLOW_VAR_TRAINOPS_WORKDIR": str(work)})
    outcome, done = worker.dag_test(REPOSITORY / "dags" / "retrain_pipeline.py", "retrain_pipeline",
                                  {"pipeline_file": str(pipeline)})
    seconds = time.perf_counter() - started
    if outcome is None:
        return {"path": "airflow prepare", "returncode": 1, "error": (done.stdout + done.stderr)[-4000:],
                "seconds": round(seconds, 1)}
    xcom = outcome["xcom"]
    logs = "".join(path.read_text(errors="replace") for path in (home.path / "logs").rglob("*")
                   if path.is_file()) if (home.path / "logs").exists() else ""
    console = done.stdout + done.stderr
    return {"path": "airflow prepare", "returncode": 0 if outcome["state"] == "success" else 1,
            "tasks": outcome["tasks"], "in_prepare_xcom": found_in(json.dumps(xcom.get("prepare", {}))),
            "in_output": found_in(json.dumps(xcom)), "in_console": found_in(console + logs),
            "files_with_secret": files_holding_secrets(work), "digests_seen": digests_seen(console + logs),
            "masked_in_prepare_xcom": json.dumps(xcom.get("prepare", {})).count("****"),
            "seconds": round(seconds, 1), "error": "" if outcome["state"] == "success" else console[-4000:]}
