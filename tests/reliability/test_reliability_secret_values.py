"""Issue 48, class 5: secrets stay masked wherever they land, by value and not only by name.

A secret's value repeated under a name that does not look secret (``MODEL_AUTH: "Bearer <HF_TOKEN's value>"``,
``MIRROR: <the value>``), in a tag, or as a hyperparameter value reached the compiled KFP YAML (inside the base64
``spec_json``), `trainops render`, the status record and the registry entry in clear: masking went by the
variable's name alone. Now every variable holding a secret's value is a secret itself (masked whole, given to the
train pod from a Secret like the others), every other text of a spec written out has the value masked, a
hyperparameter holding one is refused (hyperparameters are visible to anyone who can describe the job: the same
rule as a secret-looking hyperparameter name), and so is a value of the pipeline file holding one (the YAML carries
it as it is).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

TRAINOPS = [sys.executable, "-m", "trainops.cli"]
SECRET = "hf_Value-Masking-Secret-48"
ENVIRONMENT = {"HF_TOKEN": SECRET, "MODEL_AUTH": f"Bearer {SECRET}", "MIRROR": SECRET, "PLAIN": "kept-as-is"}


def decoded(text: str) -> str:
    """``text`` with every ``base64:`` value of a compiled pipeline appended decoded."""
    values = [base64.b64decode(found.group(1)).decode("utf-8", "replace")
              for found in re.finditer(r"base64:([A-Za-z0-9+/=]+)", text)]
    return text + "\n".join(values)


def write_pipeline(root: Path, spec_extra: dict | None = None, steps_extra: dict | None = None) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "train.py").write_text("print('trained')\n")
    (root / "src" / "evaluate.py").write_text("print('evaluated')\n")
    spec = {"name": "by-value", "entry_point": "train.py", "source_dir": "src", "instance_type": "local",
            "instance_count": 1, "environment": ENVIRONMENT, "tags": [{"Key": "owner", "Value": f"team {SECRET}"}],
            **(spec_extra or {})}
    steps = {"train": {"spec": spec}, **(steps_extra or {})}
    path = root / "pipeline.yaml"
    path.write_text(json.dumps({"name": "by-value", "workdir": "work", "backend": "local", "steps": steps}))
    return path


def compile_pipeline(pipeline: Path, secret_env: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, "kfp", "compile", str(pipeline), "-o", "compiled.yaml", "--work-pvc", "work",
                           *[f"--secret-env={name}=secrets:{name.lower()}" for name in secret_env]],
                          capture_output=True, text=True, timeout=300, cwd=str(pipeline.parent))


def test_the_rule_makes_a_variable_holding_a_secrets_value_a_secret_and_masks_the_value_everywhere():
    from trainops.spec.secrets import MASK, masked_spec_document, restore_masked, secret_environment_names

    assert secret_environment_names(ENVIRONMENT) == ["HF_TOKEN", "MIRROR", "MODEL_AUTH"]
    document = {"environment": ENVIRONMENT, "tags": [{"Key": "owner", "Value": f"team {SECRET}"}],
                "source_dir": "src", SECRET: "a key too"}
    masked = masked_spec_document(document)
    assert SECRET not in json.dumps(masked)
    assert masked["environment"] == {"HF_TOKEN": MASK, "MODEL_AUTH": MASK, "MIRROR": MASK, "PLAIN": "kept-as-is"}
    assert masked["tags"] == [{"Key": "owner", "Value": f"team {MASK}"}] and masked["source_dir"] == "src"
    # the process that runs the job gives every masked variable back, the innocent names too
    assert restore_masked(masked, ENVIRONMENT)["environment"] == ENVIRONMENT


def test_render_masks_a_secrets_value_under_any_name(tmp_path):
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"entry_point": "train.py", "instance_type": "ml.m5.xlarge", "role":
                                "arn:aws:iam::123456789012:role/SageMakerRole", "image_uri":
                                "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1", "output_path": "s3://bucket-1/out",
                                "source_dir": "s3://bucket-1/code/sourcedir.tar.gz", "environment": ENVIRONMENT,
                                "tags": [{"Key": "owner", "Value": f"team {SECRET}"}]}))
    done = subprocess.run([*TRAINOPS, "render", str(spec), "--job-name", "by-value-1", "--region", "us-east-1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    request = json.loads(done.stdout)
    assert request["Environment"]["PLAIN"] == "kept-as-is"
    assert request["Environment"]["TRAINOPS_MASK_VARIABLES"].split(",") == ["HF_TOKEN", "MIRROR", "MODEL_AUTH"]


def test_kfp_compile_writes_no_secret_value_under_an_innocent_name_or_in_a_tag(tmp_path):
    pipeline = write_pipeline(tmp_path)
    done = compile_pipeline(pipeline, ["HF_TOKEN", "MIRROR", "MODEL_AUTH"])
    assert done.returncode == 0, done.stderr
    text = decoded((tmp_path / "compiled.yaml").read_text())
    assert SECRET not in text and SECRET not in done.stdout + done.stderr
    assert "kept-as-is" in text and "team ****" in text  # the plain value is kept; the tag's secret masked


def test_the_compiled_yaml_holds_no_secret_value_whatever_the_cluster_settings(tmp_path, monkeypatch):
    """The same through the Python API, without the cluster's settings (no --secret-env to check)."""
    from trainops.components.pipeline import compile_pipeline as compile_here

    pipeline = write_pipeline(tmp_path)
    monkeypatch.chdir(tmp_path)
    compile_here(pipeline, tmp_path / "api.yaml", pipeline_dir=".")
    text = decoded((tmp_path / "api.yaml").read_text())
    assert "base64:" in text and SECRET not in text


def test_kfp_compile_asks_a_secret_for_the_innocent_name_too(tmp_path):
    done = compile_pipeline(write_pipeline(tmp_path), ["HF_TOKEN"])
    assert done.returncode == 2, done.stderr
    assert "MIRROR is masked in the job spec" in done.stderr and "MODEL_AUTH is masked" in done.stderr, done.stderr
    assert not (tmp_path / "compiled.yaml").exists()


def refused(pipeline: Path, monkeypatch) -> dict[str, str]:
    """The problems `compile_pipeline` refuses ``pipeline`` with, by field (none: it compiled)."""
    from trainops.components.pipeline import compile_pipeline as compile_here
    from trainops.errors import SpecError

    monkeypatch.chdir(pipeline.parent)
    try:
        compile_here(pipeline, pipeline.parent / "api.yaml", pipeline_dir=".")
    except SpecError as error:
        assert SECRET not in str(error)
        return {problem.path: problem.message for problem in error.problems}
    return {}


def test_a_hyperparameter_holding_a_secrets_value_is_refused_naming_it(tmp_path, monkeypatch):
    pipeline = write_pipeline(tmp_path, spec_extra={"hyperparameters": {"lr": 0.1, "auth": f"token={SECRET}"}})
    said = refused(pipeline, monkeypatch)
    assert said.get("hyperparameters.auth", "").startswith("holds the value of the secret environment variable "
                                                          "HF_TOKEN"), said
    assert not (tmp_path / "api.yaml").exists()


def test_a_pipeline_value_holding_a_secrets_value_is_refused_at_compile_time(tmp_path, monkeypatch):
    pipeline = write_pipeline(tmp_path, steps_extra={"evaluate": {"entry_point": "evaluate.py", "source_dir": "src",
                                                                  "hyperparameters": {"auth": SECRET}}})
    said = refused(pipeline, monkeypatch)
    assert said.get("steps.evaluate.hyperparameters.auth", "").startswith(
        "holds the value of the job spec's secret environment variable HF_TOKEN"), said
    assert not (tmp_path / "api.yaml").exists()


def test_a_local_run_records_and_logs_no_secret_value_and_the_script_gets_it(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import os\nprint('mirror', os.environ['MIRROR'], 'auth', os.environ['MODEL_AUTH'], flush=True)\n"
        f"print('same', os.environ['MIRROR'] == {SECRET!r}, flush=True)\n")
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "by-value", "entry_point": "train.py", "source_dir": "src",
                                "instance_type": "local", "instance_count": 1, "environment": ENVIRONMENT,
                                "tags": [{"Key": "owner", "Value": f"team {SECRET}"}]}))
    home = tmp_path / "home"
    done = subprocess.run([*TRAINOPS, "run", str(spec), "--job-name", "by-value"], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "TRAINOPS_HOME": str(home)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "same True" in done.stdout  # the script got the real value
    assert SECRET not in done.stdout + done.stderr
    holding = [str(path) for path in home.rglob("*") if path.is_file() and SECRET.encode() in path.read_bytes()]
    assert holding == []  # status record, request, logs, failure files
