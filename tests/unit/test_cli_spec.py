"""`trainops validate`, `render` and `schema`: exit codes, what goes to stdout and stderr, hostile input files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from trainops.cli import build_parser, main
from trainops.spec.job import JobSpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "specs").glob("*.yaml"))

VALID = {"name": "demo", "role": "arn:aws:iam::111122223333:role/Training", "region": "us-east-1",
         "framework_version": "2.3.0", "entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
         "instance_count": 2, "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}},
         "output_path": "s3://bucket/out", "environment": {"HF_TOKEN": "hf_secret_value", "NCCL_DEBUG": "INFO"}}


def run(capsys, *argv):
    """(exit code, stdout, stderr) of `trainops argv...` run in this process."""
    try:
        code = main(list(argv))
    except SystemExit as exit:  # argparse: --help, usage errors
        code = exit.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def write(tmp_path, data, name="spec.yaml"):
    """The spec file, with the entry point VALID names beside it (validate, render and run check the code exists)."""
    (tmp_path / "train.py").write_text("print('training')\n")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.fixture(autouse=True)
def _no_ambient_region(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


# --- validate ---------------------------------------------------------------------------------------------------------

def test_validate_a_valid_spec(tmp_path, capsys):
    code, out, err = run(capsys, "validate", write(tmp_path, VALID))
    assert code == 0
    assert "valid (smddp on 2 x ml.p4d.24xlarge)" in out
    # PyTorch 2.3.0 (April 2024) is more than two years old: one warning line, exit 0 (issue 14)
    warnings = [line for line in err.splitlines() if not line.startswith(("forecast:", "  "))]
    assert len(warnings) == 1 and "warning:" in warnings[0] and "2.3.0" in warnings[0]
    # Then the forecast of one attempt (issue 25): 2 x ml.p4d.24xlarge for max_run 86400 s at the catalog price.
    assert "forecast: at most $" in err and "2 x ml.p4d.24xlarge" in err and "max_run 86400 s" in err


def test_validate_names_the_instance_groups(tmp_path, capsys):
    groups = [{"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1},
              {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    spec = {**{key: value for key, value in VALID.items() if key not in ("instance_type", "instance_count")},
            "instance_groups": groups,
            "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}, "instance_groups": ["gpus"]}}
    code, out, _ = run(capsys, "validate", write(tmp_path, spec))
    assert code == 0
    assert "valid (smddp on instance groups 1 x ml.c5.xlarge, 2 x ml.p4d.24xlarge)" in out


def test_validate_quiet(tmp_path, capsys):
    assert run(capsys, "validate", "-q", write(tmp_path, VALID)) == (0, "", "")


def test_validate_reports_every_problem_on_stderr(tmp_path, capsys):
    bad = {**VALID, "role": "admin", "instance_count": 0, "hyperparameters": {"hf_token": "x"},
           "distribution": {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "a; b"}}},
           "instanc_type": "ml.p5.48xlarge"}
    path = write(tmp_path, bad)
    code, out, err = run(capsys, "validate", path)
    assert code == 2 and out == ""
    assert err.startswith(f"trainops: invalid {path}: 5 problems\n")
    for line in ["  - role: 'admin' is not an IAM role ARN",
                 "  - instance_count: Input should be greater than or equal to 1",
                 "  - hyperparameters.hf_token: looks like a secret",
                 "  - distribution.smdistributed.dataparallel.custom_mpi_options: contains shell metacharacters",
                 "  - instanc_type: unknown key: did you mean 'instance_type'?"]:
        assert line in err


def test_validate_accepts_json(tmp_path, capsys):
    code, _, _ = run(capsys, "validate", write(tmp_path, json.dumps(VALID), "spec.json"))
    assert code == 0


@pytest.mark.parametrize("content, words", [
    ("a: [1\n", "not valid YAML or JSON at line 2"),
    ("", "is empty"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
    ("- &a [x, x]\n" + "- [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" * 10, "YAML aliases"),
    ("[" * 100000 + "]" * 100000, "nested"),
    ("a:\n" + "".join("  " * depth + "b:\n" for depth in range(1, 200)), "nested more than"),
    ("just a string\n", "a job spec is a mapping"),
    ("- entry_point: train.py\n", "got list"),
])
def test_bad_files_exit_2_with_a_message(tmp_path, capsys, content, words):
    path = tmp_path / "spec.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for command in ("validate", "render"):
        code, out, err = run(capsys, command, str(path))
        assert code == 2 and out == ""
        assert err.startswith(f"trainops: invalid {path}")
        assert words in err


def test_a_directory_or_a_missing_file(tmp_path, capsys):
    code, _, err = run(capsys, "validate", str(tmp_path))
    assert code == 2 and "is not a file" in err
    code, _, err = run(capsys, "validate", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in err


# --- validate: the files the spec names, as run checks them (issue 36) ----------------------------------------------

#: (field, change to a local spec whose code is in src/, words of the problem)
MISSING_CODE = [("entry_point", {"entry_point": "missing.py"}, "missing.py is not a file in"),
                ("source_dir", {"source_dir": "no_such_dir"}, "no_such_dir is not a directory"),
                ("dependencies.0", {"dependencies": ["libs/missing"]}, "is not a directory: each dependency is")]


def local_spec(tmp_path, **changes):
    """A spec the local backend runs, with its code in ``tmp_path/src``."""
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    return write(tmp_path, {"entry_point": "train.py", "source_dir": "src", "instance_type": "local", **changes})


@pytest.mark.parametrize(("field", "change", "words"), MISSING_CODE, ids=[case[0] for case in MISSING_CODE])
def test_validate_refuses_a_missing_file_with_the_problem_run_refuses_it_with(tmp_path, capsys, field, change, words):
    path = local_spec(tmp_path, **change)
    code, out, err = run(capsys, "validate", path)
    assert code == 2 and out == ""
    assert err.startswith(f"trainops: invalid {path}: 1 problem\n")
    (line,) = [line for line in err.splitlines() if line.startswith("  - ")]
    assert line.startswith(f"  - {field}: ") and words in line
    # The same check: `trainops run` refuses the job with this very line, and creates nothing.
    code, _, err = run(capsys, "run", path, "--workdir", str(tmp_path / "state"), "--no-wait")
    assert code == 2 and line in err.splitlines()
    assert not (tmp_path / "state").exists()


def test_validate_reports_every_missing_file_at_once(tmp_path, capsys):
    path = local_spec(tmp_path, entry_point="missing.py", dependencies=["libs/a", "libs/b"])
    code, _, err = run(capsys, "validate", "-q", path)
    assert code == 2 and err.startswith(f"trainops: invalid {path}: 3 problems\n")
    assert [line.split(":")[0] for line in err.splitlines()[1:]] == ["  - entry_point", "  - dependencies.0",
                                                                      "  - dependencies.1"]


def test_validate_finds_the_code_beside_the_spec_file_not_the_working_directory(tmp_path, capsys, monkeypatch):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    (project / "libs" / "common").mkdir(parents=True)
    good = local_spec(project, dependencies=["libs/common"])
    bad = elsewhere / "spec.yaml"
    bad.write_text(Path(good).read_text())
    monkeypatch.chdir(elsewhere)
    assert run(capsys, "validate", "-q", good) == (0, "", "")
    monkeypatch.chdir(project)  # the code is here, but not beside the spec: refused
    code, _, err = run(capsys, "validate", "-q", str(bad))
    assert code == 2
    assert f"  - source_dir: {elsewhere / 'src'} is not a directory" in err
    assert f"  - dependencies.0: '{elsewhere / 'libs' / 'common'}' is not a directory" in err


def test_validate_without_source_dir_looks_for_the_entry_point_beside_the_spec(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text("entry_point: train.py\ninstance_type: local\n")
    code, _, err = run(capsys, "validate", "-q", str(path))
    assert code == 2 and f"  - entry_point: train.py is not a file in {tmp_path}" in err
    (tmp_path / "train.py").write_text("")
    assert run(capsys, "validate", "-q", str(path)) == (0, "", "")


def test_validate_looks_for_nothing_local_with_an_uploaded_source_tarball(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**VALID, "source_dir": "s3://bucket/code/sourcedir.tar.gz"}))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 0 and "valid" in out
    assert not (tmp_path / "train.py").exists()


JOB_SPEC_EXAMPLES = sorted(path for path in (ROOT / "examples").rglob("*.yaml")
                           if "steps" not in yaml.safe_load(path.read_text()))  # pipeline files have steps


@pytest.mark.parametrize("path", JOB_SPEC_EXAMPLES, ids=lambda path: str(path.relative_to(ROOT / "examples")))
def test_every_shipped_job_spec_validates_with_its_code(path, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # found beside the spec, wherever validate runs
    assert run(capsys, "validate", "-q", str(path)) == (0, "", "")


def test_the_shipped_job_specs_are_all_found():
    assert len(JOB_SPEC_EXAMPLES) >= 15 and set(EXAMPLES) <= set(JOB_SPEC_EXAMPLES)


# --- render -----------------------------------------------------------------------------------------------------------

def test_render_prints_the_request_as_json(tmp_path, capsys):
    code, out, err = run(capsys, "render", write(tmp_path, VALID), "--job-name", "demo-1")
    # stdout is the request alone; stderr holds only the forecast (issue 25)
    assert code == 0 and all(line.startswith(("forecast:", "  ")) for line in err.splitlines())
    assert err.startswith("forecast: at most $")
    request = json.loads(out)
    assert request["TrainingJobName"] == "demo-1"
    assert request["AlgorithmSpecification"]["ContainerEntrypoint"][:3] == ["python3", "-m", "trainops.runtime"]
    assert "trainops_distribution" in request["HyperParameters"]


def test_render_masks_secrets_in_environment(tmp_path, capsys):
    _, out, _ = run(capsys, "render", write(tmp_path, VALID), "--job-name", "demo-1")
    environment = json.loads(out)["Environment"]
    assert environment["HF_TOKEN"] == "****" and environment["NCCL_DEBUG"] == "INFO"
    assert "hf_secret_value" not in out


def test_render_toolkit_launcher(tmp_path, capsys):
    code, out, _ = run(capsys, "render", write(tmp_path, VALID), "--launcher", "toolkit", "--job-name", "demo-1")
    assert code == 0
    request = json.loads(out)
    assert "ContainerEntrypoint" not in request["AlgorithmSpecification"]
    assert request["HyperParameters"]["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert request["HyperParameters"]["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'
    assert request["HyperParameters"]["sagemaker_job_name"] == '"demo-1"'


def test_render_default_job_name_starts_with_the_spec_name(tmp_path, capsys):
    code, out, _ = run(capsys, "render", write(tmp_path, VALID))
    name = json.loads(out)["TrainingJobName"]
    assert code == 0 and name.startswith("demo-") and len(name) <= 63


def test_render_invalid_spec_exits_2(tmp_path, capsys):
    code, out, err = run(capsys, "render", write(tmp_path, {**VALID, "instance_count": 0}), "--job-name", "a")
    assert code == 2 and out == ""
    assert "instance_count" in err


def test_render_without_a_region_anywhere(tmp_path, capsys):
    spec = {key: value for key, value in VALID.items() if key != "region"}
    code, out, err = run(capsys, "render", write(tmp_path, spec), "--job-name", "a")
    assert code == 2 and out == ""
    assert "region: is required for the sagemaker backend" in err
    assert "AWS_REGION" in err


def test_render_region_from_flag_or_environment(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, {key: value for key, value in VALID.items() if key != "region"})
    _, out, _ = run(capsys, "render", path, "--job-name", "a", "--region", "eu-west-1")
    assert json.loads(out)["HyperParameters"]["sagemaker_region"] == '"eu-west-1"'
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    _, out, _ = run(capsys, "render", path, "--job-name", "a")
    assert json.loads(out)["HyperParameters"]["sagemaker_region"] == '"us-west-2"'
    code, _, err = run(capsys, "render", path, "--job-name", "a", "--region", "not a region")
    assert code == 2 and "not an AWS region" in err


def test_render_lists_what_the_sagemaker_backend_needs(tmp_path, capsys):
    local = {"entry_point": "train.py", "instance_type": "local"}
    code, _, err = run(capsys, "render", write(tmp_path, local), "--job-name", "a")
    assert code == 2
    for field in ("role", "region", "output_path", "instance_type", "framework_version"):
        assert f"  - {field}: " in err


def test_render_bad_job_name(tmp_path, capsys):
    code, _, err = run(capsys, "render", write(tmp_path, VALID), "--job-name", "bad_name")
    assert code == 2 and "job_name" in err


def test_render_bad_launcher_is_a_usage_error(tmp_path, capsys):
    code, _, err = run(capsys, "render", write(tmp_path, VALID), "--launcher", "slurm")
    assert code == 2 and "invalid choice" in err



@pytest.mark.parametrize(("field", "change", "words"), MISSING_CODE, ids=[case[0] for case in MISSING_CODE])
def test_render_with_the_default_backend_refuses_missing_code_as_validate_and_run_do(tmp_path, capsys, field, change,
                                                                                     words):
    """`trainops render FILE` (the local backend) refuses the code a run of it refuses, with validate's line."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    path = write(tmp_path, {**VALID, "source_dir": "src", **change})
    code, out, err = run(capsys, "render", path, "--job-name", "a")
    assert code == 2 and out == ""
    assert err.startswith("trainops: invalid job spec for the local backend: 1 problem\n")
    (line,) = [line for line in err.splitlines() if line.startswith("  - ")]
    assert line.startswith(f"  - {field}: ") and words in line
    assert line in run(capsys, "validate", "-q", path)[2].splitlines()


def test_render_reports_missing_code_with_its_own_problems_at_once(tmp_path, capsys):
    spec = {key: value for key, value in VALID.items() if key not in ("role", "region")}
    code, out, err = run(capsys, "render", write(tmp_path, {**spec, "entry_point": "trian.py"}), "--job-name", "a")
    assert code == 2 and out == ""
    assert [line.split(":")[0] for line in err.splitlines()[1:]] == ["  - role", "  - region", "  - entry_point"]
    assert f"  - entry_point: trian.py is not a file in {tmp_path}" in err

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_specs_validate_and_render(path, capsys):
    assert run(capsys, "validate", "-q", str(path))[0] == 0
    for launcher in ("trainops", "toolkit"):
        code, out, _ = run(capsys, "render", str(path), "--launcher", launcher, "--job-name", "example")
        assert code == 0
        assert json.loads(out)["TrainingJobName"] == "example"


def test_there_are_example_specs():
    assert len(EXAMPLES) >= 5


# --- schema -----------------------------------------------------------------------------------------------------------

def test_schema_is_a_json_schema_with_every_field(capsys):
    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {field.alias or name for name, field in JobSpec.model_fields.items()}
    assert schema["oneOf"] == [{"required": ["entry_point"]}, {"required": ["command"]}]  # or SDK v3's command
    assert all(schema["properties"][name].get("description") for name in schema["properties"])


def test_schema_accepts_the_examples_and_refuses_typos(capsys):
    jsonschema = pytest.importorskip("jsonschema")
    _, out, _ = run(capsys, "schema")
    validator = jsonschema.Draft202012Validator(json.loads(out))
    jsonschema.Draft202012Validator.check_schema(validator.schema)
    for path in EXAMPLES:
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path.name
    assert list(validator.iter_errors({**VALID, "instanc_count": 2}))
    assert list(validator.iter_errors({**VALID, "distribution": {"type": "smddp", "launchr": "mpirun"}}))
    assert list(validator.iter_errors({key: value for key, value in VALID.items() if key != "entry_point"}))
    assert list(validator.iter_errors({**VALID, "command": "python train.py"}))  # both: v3 would ignore the script


def test_schema_markdown(capsys):
    code, out, _ = run(capsys, "schema", "--markdown")
    assert code == 0
    assert out.startswith("<!-- Generated")
    for name, field in JobSpec.model_fields.items():
        assert f"| `{field.alias or name}` |" in out


# --- help and the console script --------------------------------------------------------------------------------------

def _commands():
    parser = build_parser()
    (subparsers,) = [action for action in parser._actions if action.__class__.__name__ == "_SubParsersAction"]
    return sorted(subparsers.choices)


@pytest.mark.parametrize("command", _commands())
def test_help_on_every_command(command, capsys):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: trainops {command}")


def test_top_level_help_lists_the_spec_commands(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("validate", "render", "schema"):
        assert command in out
    assert "Exit codes: 0 success, 2 invalid input, 1 failure while running." in " ".join(out.split())


def test_no_command_is_a_usage_error(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "usage:" in err


def test_console_script_exit_codes(tmp_path):
    script = Path(sys.executable).with_name("trainops")
    if not script.exists():
        pytest.skip("the trainops console script is not installed next to this interpreter")
    good = subprocess.run([str(script), "validate", str(EXAMPLES[0])], capture_output=True, text=True, timeout=60)
    bad = subprocess.run([str(script), "validate", write(tmp_path, {"entry_point": 1})], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "TRAINOPS_DEBUG": ""})
    assert good.returncode == 0 and bad.returncode == 2
    assert "Traceback" not in bad.stderr and "entry_point" in bad.stderr


@pytest.mark.parametrize(("missing", "extra", "code"), [("boto3", "aws", 2), ("botocore.session", "aws", 2),
                                                         ("not_an_extra", None, 1)])
def test_a_missing_optional_package_names_the_extra_that_installs_it(capsys, monkeypatch, missing, extra, code):
    import argparse

    import trainops.cli

    def command(_args):
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    parser = argparse.ArgumentParser()
    parser.set_defaults(handler=command)
    monkeypatch.setattr(trainops.cli, "build_parser", lambda: parser)
    status, out, err = run(capsys)
    assert status == code and out == ""
    if extra:
        assert f"this command needs {missing!r}" in err and f"pip install 'trainops[{extra}]'" in err
    else:
        assert "internal error: ModuleNotFoundError" in err
