"""`trainops validate` and `trainops render` take a pipeline file (issue 47 item 2), run as a user runs them (the
venv's `trainops`): every step checked with one report of every problem at its path, and the train step's request
rendered on the pipeline's backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TRAINOPS = str(Path(sys.executable).parent / "trainops")
SMDDP = ROOT / "examples" / "specs" / "smddp-p4d.yaml"


def trainops(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    return subprocess.run([TRAINOPS, *args], capture_output=True, text=True, cwd=str(cwd), env=env, timeout=120)


def test_validate_takes_the_pipeline_make_run_runs():
    checked = trainops("validate", "examples/digits/pipeline.yaml")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == (
        "examples/digits/pipeline.yaml: valid (pipeline digits-retrain on the local backend: prepare "
        "(prepare_data.py), stage, train (torch_distributed on 2 x ml.g5.xlarge), evaluate (gate accuracy >= 0.95), "
        "register (digits-classifier))")
    assert "forecast: at most $" in checked.stderr  # the train step's forecast, as for a spec
    assert trainops("validate", "-q", "examples/digits/pipeline.yaml").stdout == ""


def test_every_step_is_checked_with_one_report(tmp_path):
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.g5.xlarge\n"
                                         "instance_count: 0\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: broken\nworkdir: work\nsteps:\n  prepare: {script: missing.py}\n"
                        "  train: {spec: train.yaml}\n"
                        "  evaluate: {entry_point: evaluate.py, gate: 'accuracy >>= 0.9'}\n")
    refused = trainops("validate", str(pipeline))
    assert refused.returncode == 2 and refused.stdout == ""
    problems = [line for line in refused.stderr.splitlines() if line.startswith("  - ")]
    paths = sorted(line[4:].split(":")[0] for line in problems)
    assert paths == ["steps.evaluate.entry_point", "steps.evaluate.gate.operator", "steps.prepare.script",
                     "steps.train.spec.instance_count"], refused.stderr
    assert "hyperparameters" not in refused.stderr  # no list of every spec key: the pipeline is read as one
    rendered = trainops("render", str(pipeline))
    assert rendered.returncode == 2 and rendered.stdout == "" and "steps.train.spec.instance_count" in rendered.stderr


def test_render_prints_every_steps_plan_and_the_train_request(tmp_path):
    (tmp_path / "evaluate.py").write_text("print('evaluating')\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(f"name: gpt-retrain\nworkdir: work\nsteps:\n  train:\n    spec: {SMDDP}\n"
                        "    job_name: gpt-7\n  evaluate: {entry_point: evaluate.py, gate: 'accuracy >= 0.9'}\n"
                        "  register: {group: gpt}\n")
    for backend in ([], ["--backend", "sagemaker"]):
        rendered = trainops("render", str(pipeline), *backend, cwd=tmp_path)
        assert rendered.returncode == 0, rendered.stderr
        document = json.loads(rendered.stdout)
        assert document["pipeline"]["pipeline_name"] == "gpt-retrain"
        assert document["pipeline"]["backend"] == (backend[1] if backend else "local")
        assert document["pipeline"]["evaluate_gate"] == "accuracy >= 0.9"
        assert document["pipeline"]["register_group"] == "gpt"
        request = document["train_request"]
        assert request["TrainingJobName"] == "gpt-7" and request["ResourceConfig"]["InstanceCount"] == 2
        assert "the train step's request:" in rendered.stderr and "forecast: at most $" in rendered.stderr


def test_render_of_the_pipeline_make_run_runs_shows_what_the_local_run_executes():
    """`trainops render examples/digits/pipeline.yaml` as a newcomer types it on a fresh clone (nothing staged yet):
    the spec has no role, region or output_path, which a local run does not need; the render is the request the
    local run executes (exit 0), its placeholders named on stderr with what SageMaker's request would need."""
    rendered = trainops("render", "examples/digits/pipeline.yaml", "--job-name", "digits-render-1")
    assert rendered.returncode == 0, rendered.stderr
    request = json.loads(rendered.stdout)["train_request"]
    workdir = ROOT / "runs" / "digits"
    assert request["TrainingJobName"] == "digits-render-1"
    assert request["RoleArn"] == "arn:aws:iam::000000000000:role/trainops-local"
    assert request["OutputDataConfig"]["S3OutputPath"] == f"file://{workdir}/output"
    channels = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
                for channel in request["InputDataConfig"]}
    assert channels["train"] == str(workdir / "fsx" / "digits" / "train")  # the step's channel, where the run reads
    assert channels["trainops_code"] == str(ROOT / "examples" / "digits")
    assert not (workdir / "jobs" / "digits-render-1").exists()  # a dry run: nothing laid out
    note = [line for line in rendered.stderr.splitlines() if line.startswith("[trainops] render:")]
    assert note and "SageMaker would also need role, region, output_path" in note[0], rendered.stderr
    assert "arn:aws:iam::000000000000:role/trainops-local" in note[0] and "--backend sagemaker" in note[0]
    # Asked for SageMaker, the same file still lists what SageMaker needs, each at its place in the pipeline file.
    refused = trainops("render", "examples/digits/pipeline.yaml", "--backend", "sagemaker")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "  - steps.train.spec.role: is required for the sagemaker backend" in refused.stderr


def test_render_keeps_sagemakers_problems_for_a_spec_meant_for_sagemaker(tmp_path):
    """A spec with a role (or an s3:// output) is written for SageMaker: what it lacks is refused, not hidden by
    the local run's placeholders."""
    (tmp_path / "train.py").write_text("print('training')\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("entry_point: train.py\nframework_version: '2.3.0'\ninstance_type: ml.g5.xlarge\n"
                    "role: arn:aws:iam::111122223333:role/Training\n")
    refused = trainops("render", str(spec), "--job-name", "a", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "  - region: is required" in refused.stderr and "  - output_path: is required" in refused.stderr


def test_an_instance_type_the_api_does_not_list_is_refused_by_validate_as_render_refuses_it(tmp_path):
    """Issue 47 item 5: `instance_type: ml.g5.xxlarge` read "valid" (a pipeline's train spec too) and then run
    refused it when it rendered the request; validate now asks the backend's own checks, with "did you mean"."""
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.g5.xxlarge\n"
                                         "instance_count: 2\ndistribution: {torch_distributed: {enabled: true}}\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: typo\nworkdir: work\nsteps:\n  train: {spec: train.yaml}\n")
    hint = "'ml.g5.xxlarge' is not a SageMaker training instance type: did you mean ml.g5.xlarge"
    for args in (["train.yaml"], ["train.yaml", "--backend", "sagemaker"], ["pipeline.yaml"]):
        refused = trainops("validate", *args, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stdout == "", (args, refused.stdout, refused.stderr)
        assert hint in refused.stderr, (args, refused.stderr)
        assert ("steps.train.spec.instance_type:" if args == ["pipeline.yaml"] else "- instance_type:") \
            in refused.stderr
        rendered = trainops("render", *args, cwd=tmp_path)
        assert rendered.returncode == 2 and hint in rendered.stderr, (args, rendered.stderr)
    # Slurm maps instance types its own way (a partition's nodes): its rules take the name, as its run does.
    slurm = trainops("validate", "train.yaml", "--backend", "slurm", cwd=tmp_path)
    assert slurm.returncode == 0 and "valid (torch_distributed on 2 x ml.g5.xxlarge)" in slurm.stdout, slurm.stderr
    unknown = trainops("validate", "train.yaml", "--backend", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "'nope' is not a backend" in unknown.stderr, unknown.stderr
    both = trainops("validate", "pipeline.yaml", "--backend", "slurm", cwd=tmp_path)
    assert both.returncode == 2 and "--backend: a pipeline file names its own backend" in both.stderr, both.stderr
