"""retrain_pipeline: the pipeline file compiled to KFP IR YAML (golden, stable), and its shape for other files.

The golden file (tests/golden/kfp/digits-retrain.yaml) freezes the compiled digits pipeline; regenerate it with
`TRAINOPS_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/components/test_pipeline.py` and read the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from trainops.cli import main
from trainops.components.paths import decode_parameter
from trainops.components.pipeline import compile_pipeline, default_pipeline_dir, read_pipeline_source
from trainops.errors import SpecError

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "kfp" / "digits-retrain.yaml"

SPEC = "name: tiny\nentry_point: train.py\nsource_dir: code\ninstance_type: ml.m5.large\n"


def compiled(path: Path) -> dict:
    """The pipeline spec of a compiled file (its first YAML document; a second holds the Kubernetes settings)."""
    return next(yaml.safe_load_all(path.read_text()))


def root_tasks(document: dict) -> dict:
    return document["root"]["dag"]["tasks"]


def all_tasks(document: dict) -> dict:
    """Every task, the ones inside condition sub-DAGs included, by name."""
    tasks = dict(root_tasks(document))
    for component in document["components"].values():
        tasks.update((component.get("dag") or {}).get("tasks") or {})
    return tasks


def write_pipeline(tmp_path: Path, steps: str, extra: str = "") -> Path:
    """A pipeline file with its spec and every script it may name (the compile-time check needs them)."""
    (tmp_path / "code").mkdir(parents=True, exist_ok=True)
    for script in ("code/train.py", "evaluate.py", "e.py"):
        (tmp_path / script).write_text("print('ok')\n")
    (tmp_path / "train.yaml").write_text(SPEC)
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"name: tiny-retrain\n{extra}steps:\n{steps}")
    return path


# --- the golden digits pipeline ---------------------------------------------------------------------------------------

def test_the_digits_pipeline_compiles_to_the_golden_yaml_every_time(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the compiled pipeline_dir is the file's directory relative to here: examples/digits
    outputs = [tmp_path / "first.yaml", tmp_path / "second.yaml"]
    for output in outputs:  # as on a cluster: the local backend's steps share a volume
        assert main(["kfp", "compile", "examples/digits/pipeline.yaml", "-o", str(output),
                     "--work-pvc", "trainops-work"]) == 0
    text = outputs[0].read_text()
    assert outputs[1].read_text() == text
    if os.environ.get("TRAINOPS_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"{GOLDEN} is missing: run with TRAINOPS_UPDATE_GOLDEN=1 and review it"
    assert GOLDEN.read_text() == text, \
        f"{GOLDEN} differs: review the change, then regenerate with TRAINOPS_UPDATE_GOLDEN=1"


def test_the_golden_pipeline_has_the_steps_the_gate_branches_and_portable_defaults():
    document = compiled(GOLDEN)
    tasks = all_tasks(document)
    assert set(tasks) >= {"prepare-data", "stage-data", "train-model", "evaluate-model", "register-model",
                          "gate-failed"}
    assert tasks["stage-data"]["dependentTasks"] == ["prepare-data"]
    assert tasks["train-model"]["dependentTasks"] == ["stage-data"]
    assert tasks["evaluate-model"]["inputs"]["artifacts"]["model"]["taskOutputArtifact"] == {
        "outputArtifactKey": "model", "producerTask": "train-model"}
    conditions = {task["taskInfo"]["name"]: task["triggerPolicy"]["condition"]
                  for task in root_tasks(document).values() if "triggerPolicy" in task}
    assert conditions == {
        "gate-passed": "inputs.parameter_values['pipelinechannel--evaluate-model-Output'] == true",
        "gate-failed": "inputs.parameter_values['pipelinechannel--evaluate-model-Output'] == false"}
    assert all(task.get("cachingOptions") == {} for task in tasks.values() if "cachingOptions" in task)
    parameters = {name: spec.get("defaultValue") for name, spec in
                  document["root"]["inputDefinitions"]["parameters"].items()}
    # the local backend's steps share the claim (--work-pvc trainops-work) mounted at the image's TRAINOPS_HOME
    assert parameters["pipeline_dir"] == "examples/digits" and parameters["workdir"] == "/var/lib/trainops"
    [platform] = list(yaml.safe_load_all(GOLDEN.read_text()))[1:]
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == set(document["deploymentSpec"]["executors"])
    assert all([(mount["constant"], mount["mountPath"]) for mount in executor["pvcMount"]] ==
               [("trainops-work", "/var/lib/trainops")] for executor in executors.values())
    assert parameters["backend"] == "local" and parameters["gate"] == "accuracy >= 0.95"
    assert json.loads(decode_parameter(parameters["spec_json"]))["source_dir"] == "."  # as written, resolved there
    assert "/work/" not in GOLDEN.read_text() and str(ROOT) not in GOLDEN.read_text()


# --- other pipeline files ---------------------------------------------------------------------------------------------

def test_without_a_failing_gate_branch_when_a_missed_gate_only_skips_register(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the image's build context: pipelines/tiny lies below it
    path = write_pipeline(tmp_path / "pipelines" / "tiny", "  train: {spec: train.yaml}\n"
                                    "  evaluate: {entry_point: evaluate.py, gate: 'loss <= 0.3', "
                                    "on_gate_failure: skip_register}\n  register: {group: tiny}\n")
    document = compiled(Path(compile_pipeline(path, tmp_path / "out.yaml", pipeline_dir="pipelines/tiny")))
    tasks = all_tasks(document)
    assert "gate-failed" not in tasks and "register-model" in tasks
    assert "prepare-data" not in tasks and "dependentTasks" not in tasks["train-model"]


def test_register_without_evaluate_follows_training_directly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_pipeline(tmp_path, "  train: {spec: train.yaml}\n  register: {group: tiny}\n")
    document = compiled(Path(compile_pipeline(path, tmp_path / "out.yaml")))
    tasks = root_tasks(document)
    assert set(tasks) == {"train-model", "register-model"}
    assert "metrics" not in tasks["register-model"]["inputs"].get("artifacts", {})


def test_gates_that_are_not_strings_travel_as_json_and_inline_specs_keep_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    inline = ("  train:\n    spec: {name: tiny, entry_point: train.py, source_dir: '${pipeline_dir}/code', "
              "instance_type: ml.m5.large}\n"
              "  evaluate: {entry_point: e.py, gate: [{metric: accuracy, operator: '>=', threshold: 0.9}, "
              "'loss < 1']}\n")
    source = read_pipeline_source(write_pipeline(tmp_path, inline))
    assert source.spec_document["source_dir"] == "${pipeline_dir}/code" and source.spec_dir == "."
    document = compiled(Path(compile_pipeline(tmp_path / "pipeline.yaml", tmp_path / "out.yaml")))
    gate = document["root"]["inputDefinitions"]["parameters"]["gate"]["defaultValue"]
    assert json.loads(gate) == [{"metric": "accuracy", "operator": ">=", "threshold": 0.9}, "loss < 1"]


def test_a_spec_in_another_directory_keeps_its_own_relative_base(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "job.yaml").write_text(SPEC)
    path = tmp_path / "pipeline.yaml"
    path.write_text("name: p\nworkdir: state\nsteps:\n  train: {spec: specs/job.yaml}\n")
    source = read_pipeline_source(path)
    assert source.spec_dir == "specs" and source.pipeline.workdir == "state"
    assert source.resolved.workdir == str(tmp_path / "state")


def test_invalid_pipeline_files_and_specs_are_bad_input_naming_the_field(tmp_path):
    bad_step = write_pipeline(tmp_path, "  train: {spec: train.yaml, procesess_per_host: 2}\n")
    with pytest.raises(SpecError, match="procesess_per_host"):
        read_pipeline_source(bad_step)
    (tmp_path / "train.yaml").write_text(SPEC + "instance_count: 0\n")
    path = tmp_path / "pipeline.yaml"
    path.write_text("name: tiny-retrain\nsteps:\n  train: {spec: train.yaml}\n")
    with pytest.raises(SpecError, match="instance_count"):
        read_pipeline_source(path)
    assert main(["kfp", "compile", str(path), "-o", str(tmp_path / "never.yaml")]) == 2
    assert not (tmp_path / "never.yaml").exists()


def test_the_compiled_pipeline_dir_is_relative_below_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert default_pipeline_dir("a/b/pipeline.yaml") == "a/b"
    assert default_pipeline_dir("pipeline.yaml") == "."
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert default_pipeline_dir(tmp_path / "elsewhere.yaml") == str(tmp_path)


def test_configure_task_sees_every_task(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_pipeline(tmp_path, "  train: {spec: train.yaml}\n  evaluate: {entry_point: e.py, gate: 'a > 1'}\n"
                                    "  register: {group: tiny}\n")
    seen = []

    def configure(task):
        seen.append(task.name)
        task.set_retry(2)

    document = compiled(Path(compile_pipeline(path, tmp_path / "out.yaml", configure_task=configure)))
    assert sorted(seen) == ["evaluate-model", "gate-failed", "register-model", "train-model"]
    tasks = all_tasks(document)
    assert all(tasks[name]["retryPolicy"]["maxRetryCount"] == 2 for name in seen)


# --- what the image holds, checked at compile time --------------------------------------------------------------------

def test_compiling_from_outside_the_build_context_is_refused_before_anything_is_written(tmp_path, monkeypatch,
                                                                                          capsys):
    path = write_pipeline(tmp_path / "pipelines" / "tiny", "  train: {spec: train.yaml}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the default pipeline_dir would be an absolute path of this machine
    assert main(["kfp", "compile", str(path), "-o", str(tmp_path / "out.yaml")]) == 2
    assert "pipeline_dir: " in capsys.readouterr().err and not (tmp_path / "out.yaml").exists()
    monkeypatch.chdir(tmp_path)
    for wrong in ("pipelines", "pipelines/other", "../tiny", "/opt/trainops/pipelines/other", "/srv/pipelines/tiny"):
        with pytest.raises(SpecError, match="pipeline_dir"):
            compile_pipeline(path, tmp_path / "out.yaml", pipeline_dir=wrong)
    for right in ("pipelines/tiny", "/opt/trainops/pipelines/tiny", None):
        assert compile_pipeline(path, tmp_path / f"out-{bool(right)}.yaml", pipeline_dir=right)


def test_files_the_components_read_must_exist_inside_the_pipeline_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    here = tmp_path / "pipelines" / "tiny"
    path = write_pipeline(here, "  prepare: {script: ../export.py}\n  train: {spec: train.yaml}\n"
                                "  evaluate: {entry_point: missing.py, gate: 'a > 1'}\n")
    (tmp_path / "pipelines" / "export.py").write_text("print('exported')\n")
    (here / "train.yaml").write_text(SPEC.replace("source_dir: code", "source_dir: ../../shared"))
    with pytest.raises(SpecError) as raised:
        compile_pipeline(path, tmp_path / "out.yaml")
    fields = {problem.path: problem.message for problem in raised.value.problems}
    assert "outside the pipeline directory" in fields["steps.prepare.script"]
    assert "does not exist" in fields["steps.train.spec.source_dir"]
    assert "does not exist" in fields["steps.evaluate.entry_point"]
    assert not (tmp_path / "out.yaml").exists()


# --- KFP placeholders never reach a component's value (issue 26 item 4) -----------------------------------------------
def test_the_spec_travels_encoded_so_a_placeholder_in_it_is_not_substituted(tmp_path):
    from trainops.components.paths import parse_json

    path = write_pipeline(tmp_path, "  train: {spec: placeholder.yaml}\n")
    (tmp_path / "placeholder.yaml").write_text(
        SPEC + "environment:\n  WHERE: \"{{$.inputs.parameters['workdir']}}\"\n  BRACES: \"{{$}}\"\n")
    source = read_pipeline_source(path)
    assert source.spec_json.startswith("base64:") and "{{$" not in source.spec_json
    document = parse_json(source.spec_json, "spec_json", dict)
    assert document["environment"] == {"WHERE": "{{$.inputs.parameters['workdir']}}", "BRACES": "{{$}}"}
    # a plain value holding a placeholder is refused at run time, naming the field
    with pytest.raises(SpecError, match="spec_json: holds a KFP placeholder"):
        parse_json('{"environment": {"WHERE": "{{$.inputs.parameters[\'x\']}}"}}', "spec_json", dict)


def test_a_pipeline_value_holding_a_placeholder_is_refused_at_compile_time(tmp_path, monkeypatch):
    path = write_pipeline(tmp_path, "  train:\n    spec: train.yaml\n    channels: {train: \"{{$.outputs}}\"}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=r"steps\.train\.channels\.train: holds a KFP placeholder"):
        compile_pipeline(path, tmp_path / "out.yaml")
    assert not (tmp_path / "out.yaml").exists()


def test_tasks_get_pod_retries_and_resource_requests_from_the_pipeline_file():
    document = compiled(GOLDEN)
    executors = document["deploymentSpec"]["executors"]
    train = executors["exec-train-model"]["container"]["resources"]
    # the digits job: 2 emulated hosts on the local backend, one rank each
    assert (train["resourceCpuRequest"], train["resourceMemoryRequest"]) == ("2", "4Gi")
    for name, executor in executors.items():
        assert "resourceCpuRequest" in executor["container"]["resources"], name
    for name, task in root_tasks(document).items():
        if not name.startswith("condition-"):  # the gate's branches are groups of tasks, not pods
            assert task["retryPolicy"]["maxRetryCount"] == 2, name
    # A missed gate fails its task on purpose: no pod retry delays the run's end.
    gate_failed = document["components"]["comp-condition-1"]["dag"]["tasks"]["gate-failed"]
    assert gate_failed.get("retryPolicy", {}).get("maxRetryCount", 0) == 0
    registered = document["components"]["comp-condition-2"]["dag"]["tasks"]["register-model"]
    assert registered["retryPolicy"]["maxRetryCount"] == 2


# --- every KFP placeholder form, in values and keys (issue 48 item 7) -------------------------------------------------
def test_a_dsl_channel_or_a_placeholder_key_is_refused_at_compile_time_naming_the_field(tmp_path, monkeypatch):
    """KFP's DSL reads ``{{channel:task=;name=X;type=String;}}`` in any string the compiler is given (a constant
    default too) and compiles it into a reference to parameter X; a mapping key holding ``{{$`` reaches the
    component where KFP substitutes it. Both were compiled into run-time values: now refused, each named."""
    channel = "{{channel:task=;name=workdir;type=String;}}"
    steps = (f"  train:\n    spec: train.yaml\n    channels: {{train: \"{channel}\"}}\n"
             "  evaluate:\n    entry_point: e.py\n    hyperparameters: {\"{{$.inputs.parameters['workdir']}}\": 1}\n")
    path = write_pipeline(tmp_path, steps)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as raised:
        compile_pipeline(path, tmp_path / "out.yaml")
    said = {problem.path: problem.message for problem in raised.value.problems}
    assert "holds a KFP placeholder ({{channel:...)" in said["steps.train.channels.train"], said
    key = "steps.evaluate.hyperparameters.{{$.inputs.parameters['workdir']}}"
    assert "is a key holding a KFP placeholder ({{$...)" in said[key], said
    assert not (tmp_path / "out.yaml").exists()


def test_a_dsl_channel_in_the_job_spec_stays_literal(tmp_path, monkeypatch):
    """The job spec travels encoded: a channel form in one of its values (or keys) reaches the job as written."""
    from trainops.components.paths import parse_json

    channel = "{{channel:task=;name=workdir;type=String;}}"
    path = write_pipeline(tmp_path, "  train: {spec: literal.yaml}\n")
    (tmp_path / "literal.yaml").write_text(SPEC + f"environment:\n  WHERE: \"{channel}\"\n")
    monkeypatch.chdir(tmp_path)
    compile_pipeline(path, tmp_path / "out.yaml", pipeline_dir=".")
    text = (tmp_path / "out.yaml").read_text()
    assert "{{channel:" not in text
    spec_json = compiled(tmp_path / "out.yaml")["root"]["inputDefinitions"]["parameters"]["spec_json"]["defaultValue"]
    assert parse_json(spec_json, "spec_json", dict)["environment"] == {"WHERE": channel}
    with pytest.raises(SpecError, match=r"spec_json: holds a KFP placeholder \(\{\{channel:"):
        parse_json(json.dumps({"environment": {"WHERE": channel}}), "spec_json", dict)
