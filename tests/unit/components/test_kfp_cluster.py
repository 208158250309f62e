"""`trainops kfp compile` for a cluster: the work directory's claim, Secrets for masked values, the image pull
policy and pull secrets land in every task's Kubernetes executor config, read back through kfp's own parsers; what
would not run on a cluster as compiled is refused (exit 2, the flag named); `trainops kfp build` as a user sees it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from google.protobuf import json_format

from trainops.cli import main

ROOT = Path(__file__).resolve().parents[3]

SPEC = ("name: tiny\nentry_point: train.py\nsource_dir: code\ninstance_type: ml.m5.large\n"
        "environment: {HF_TOKEN: hf_NotForTheYaml123, OPENAI_KEY: sk-NotForTheYaml456, PLAIN: visible}\n")
STEPS = ("steps:\n  train: {spec: train.yaml}\n  evaluate: {entry_point: e.py, gate: 'accuracy > 0.5'}\n"
         "  register: {group: tiny}\n")


@pytest.fixture
def pipeline(tmp_path, monkeypatch) -> Path:
    """A local-backend pipeline whose spec masks HF_TOKEN and OPENAI_KEY, in the build context (the cwd)."""
    here = tmp_path / "pipelines" / "tiny"
    (here / "code").mkdir(parents=True)
    (here / "code" / "train.py").write_text("print('ok')\n")
    (here / "e.py").write_text("print('ok')\n")
    (here / "train.yaml").write_text(SPEC)
    (here / "pipeline.yaml").write_text("name: tiny-retrain\n" + STEPS)
    monkeypatch.chdir(tmp_path)
    return here / "pipeline.yaml"


def load(path: Path):
    """The compiled file through kfp's parsers: the pipeline component, and each executor's Kubernetes config."""
    from kfp import components
    from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

    component = components.load_component_from_file(str(path))
    platform = component.platform_spec.platforms["kubernetes"]
    executors = {}
    for name, config in platform.deployment_spec.executors.items():
        executors[name] = json_format.ParseDict(json_format.MessageToDict(config), k8s.KubernetesExecutorConfig())
    return component, executors


def containers(component) -> dict:
    """Each executor's container, from the pipeline spec (its deployment spec is a protobuf Struct)."""
    deployment = json_format.MessageToDict(component.pipeline_spec.deployment_spec)
    return {name: executor["container"] for name, executor in deployment["executors"].items()}


CLUSTER = ["--work-pvc", "trainops-work", "--secret-env", "HF_TOKEN=hf-token:token",
           "--secret-env", "OPENAI_KEY=openai", "--image-pull-policy", "Always",
           "--image-pull-secret", "regcred", "--image", "registry.example.com/trainops:0.1.0"]


def test_the_cluster_settings_land_in_every_tasks_executor_config(pipeline, tmp_path, capsys):
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", str(pipeline.relative_to(tmp_path)), "-o", str(output), *CLUSTER]) == 0
    assert "claim trainops-work at /var/lib/trainops" in capsys.readouterr().out
    component, executors = load(output)
    spec = component.pipeline_spec
    assert set(executors) == set(containers(component)) == {
        "exec-train-model", "exec-evaluate-model", "exec-register-model", "exec-gate-failed"}
    for name, config in executors.items():
        [mount] = config.pvc_mount
        assert (mount.constant, mount.mount_path) == ("trainops-work", "/var/lib/trainops"), name
        assert config.image_pull_policy == "Always", name
        assert [secret.secret_name for secret in config.image_pull_secret] == ["regcred"], name
        assert containers(component)[name]["image"] == "registry.example.com/trainops:0.1.0", name
    # the masked values come from their Secrets in the train pod only: the one task that reads the job spec
    train = executors.pop("exec-train-model")
    assert sorted((secret.secret_name, entry.secret_key, entry.env_var) for secret in train.secret_as_env
                  for entry in secret.key_to_env) == [("hf-token", "token", "HF_TOKEN"),
                                                      ("openai", "OPENAI_KEY", "OPENAI_KEY")]
    assert not any(config.secret_as_env for config in executors.values())
    # the steps share the claim: the workdir parameter defaults to its mount path
    assert spec.root.input_definitions.parameters["workdir"].default_value.string_value == "/var/lib/trainops"
    text = output.read_text()
    assert "hf_NotForTheYaml123" not in text and "sk-NotForTheYaml456" not in text


def test_a_custom_mount_path_and_the_clusters_default_pull_policy(pipeline, tmp_path):
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", str(pipeline), "-o", str(output), "--work-pvc", "shared", "--work-mount",
                 "/mnt/work", "--secret-env", "HF_TOKEN=s:k", "--secret-env", "OPENAI_KEY=s:o"]) == 0
    component, executors = load(output)
    assert {(config.pvc_mount[0].constant, config.pvc_mount[0].mount_path) for config in executors.values()} == {
        ("shared", "/mnt/work")}
    assert not any(config.image_pull_policy or config.image_pull_secret for config in executors.values())
    [train] = [config for name, config in executors.items() if name == "exec-train-model"]
    [secret] = train.secret_as_env  # two keys of one Secret: one entry
    assert {(entry.secret_key, entry.env_var) for entry in secret.key_to_env} == {("k", "HF_TOKEN"),
                                                                                ("o", "OPENAI_KEY")}
    workdir = component.pipeline_spec.root.input_definitions.parameters["workdir"]
    assert workdir.default_value.string_value == "/mnt/work"


@pytest.mark.parametrize(("flags", "named", "says"), [
    ([], "--work-pvc", "the local backend runs its jobs in the train pod"),
    (["--work-pvc", "w", "--secret-env", "HF_TOKEN=hf"], "--secret-env",
     "OPENAI_KEY is masked in the job spec (the YAML never holds it): give the Secret"),
    (["--work-pvc", "w", "--secret-env", "HF_TOKEN=hf", "--secret-env", "OPENAI_KEY=o", "--secret-env",
      "HF_TOKN=hf"], "--secret-env", "HF_TOKN is not a masked environment value of the job spec (those are: "
                                     "HF_TOKEN, OPENAI_KEY)"),
    (["--work-pvc", "w", "--secret-env", "HF_TOKEN"], "--secret-env", "is not NAME=SECRET:KEY"),
    (["--work-pvc", "w", "--secret-env", "HF_TOKEN=a", "--secret-env", "HF_TOKEN=b", "--secret-env", "OPENAI_KEY=o"],
     "--secret-env", "HF_TOKEN is given twice"),
    (["--work-pvc", "w", "--work-mount", "relative/path"], "--work-mount", "is not an absolute path"),
    (["--work-mount", "/mnt/x"], "--work-mount", "mounts nothing without --work-pvc"),
    (["--work-pvc", "w", "--service-account", "trainer"], "--service-account",
     "set it when the run is created, kfp.Client().create_run_from_pipeline_package(..., service_account=NAME)"),
])
def test_what_would_not_run_on_a_cluster_is_refused_naming_the_flag(pipeline, tmp_path, capsys, flags, named, says):
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", str(pipeline), "-o", str(output), *flags]) == 2
    error = capsys.readouterr().err
    assert f"{named}: " in error and says in error, error
    assert not output.exists()


def test_without_kfp_kubernetes_the_compile_names_the_extra_that_installs_it(pipeline, tmp_path, capsys,
                                                                              monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "kfp.kubernetes", None)  # as if kfp were installed without kfp-kubernetes
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", str(pipeline), "-o", str(output), *CLUSTER]) == 2
    error = capsys.readouterr().err
    assert "needs 'kfp.kubernetes', which is not installed" in error and "pip install 'trainops[kfp]'" in error, error
    assert not output.exists()


def test_an_unknown_pull_policy_is_refused_by_the_parser(pipeline, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["kfp", "compile", str(pipeline), "-o", str(tmp_path / "o.yaml"), "--work-pvc", "w",
              "--image-pull-policy", "Sometimes"])
    assert exited.value.code == 2 and "--image-pull-policy" in capsys.readouterr().err


def test_steps_that_share_workdir_paths_need_the_claim_whatever_the_backend(tmp_path, monkeypatch, capsys):
    """A SageMaker pipeline runs its jobs elsewhere, but a prepare step writing ${workdir}/raw for stage to read still
    hands files from pod to pod; without ${workdir} it needs no claim and gets no Kubernetes config."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("print('ok')\n")
    (tmp_path / "prep.py").write_text("print('ok')\n")
    (tmp_path / "train.yaml").write_text(
        "name: tiny\nentry_point: train.py\nsource_dir: code\ninstance_type: ml.m5.large\n"
        "role: arn:aws:iam::123456789012:role/trainer\noutput_path: s3://bucket/out\n"
        "framework: pytorch\nframework_version: 2.3.0\npy_version: py311\n"
        "inputs: {train: 's3://bucket/data/'}\n")
    shared = ("name: sm\nbackend: sagemaker\nregion: us-east-1\nsteps:\n  prepare: {script: prep.py, args: ['${workdir}/raw']}\n"
              "  stage: {source: '${workdir}/raw', destination: 's3://bucket/data/'}\n  train: {spec: train.yaml}\n")
    (tmp_path / "shared.yaml").write_text(shared)
    assert main(["kfp", "compile", "shared.yaml", "-o", str(tmp_path / "shared-out.yaml")]) == 2
    error = capsys.readouterr().err
    assert "--work-pvc: steps.prepare.args[0], steps.stage.source name ${workdir}" in error, error
    (tmp_path / "alone.yaml").write_text("name: sm\nbackend: sagemaker\nregion: us-east-1\nsteps:\n  train: {spec: train.yaml}\n")
    assert main(["kfp", "compile", "alone.yaml", "-o", str(tmp_path / "alone-out.yaml")]) == 0
    component, executors = load(tmp_path / "alone-out.yaml")
    assert executors == {} and "platforms" not in (tmp_path / "alone-out.yaml").read_text()


# --- lightweight components: the image must hold the pipeline's files and the packages its dependencies ----------

@pytest.mark.parametrize(("flags", "named", "says"), [
    (["--package", "trainops[kfp,torch]==0.1.0"], "--image", "python:3.11-slim holds none of the pipeline's files"),
    (["--image", "docker.io/library/python:3.12", "--package", "trainops[kfp,torch]==0.1.0"], "--image",
     "docker.io/library/python:3.12 holds none of the pipeline's files"),
    (["--image", "registry.example.com/trainops:0.1.0", "--package", "numpy"], "--package",
     "installs no trainops, whose functions the components run"),
    (["--image", "registry.example.com/trainops:0.1.0", "--package", "trainops[aws]==0.1.0"], "--package",
     "lacks the extras kfp, torch (the components need kfp, torch with the local backend)"),
])
def test_a_lightweight_compile_that_could_not_run_the_pipeline_is_refused(pipeline, tmp_path, capsys, flags, named,
                                                                          says):
    secrets = ["--secret-env", "HF_TOKEN=hf", "--secret-env", "OPENAI_KEY=o"]
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", str(pipeline), "-o", str(output), "--work-pvc", "w", *secrets, *flags]) == 2
    error = capsys.readouterr().err
    assert f"{named}: " in error and says in error, error
    assert not output.exists()


def test_a_lightweight_compile_onto_an_image_holding_the_pipeline_installs_trainops_with_its_extras(pipeline,
                                                                                                   tmp_path):
    output = tmp_path / "out.yaml"
    requirement = "trainops[kfp,torch,examples] @ https://artifacts.example.com/trainops-0.1.0-py3-none-any.whl"
    assert main(["kfp", "compile", str(pipeline), "-o", str(output), "--work-pvc", "w", "--secret-env",
                 "HF_TOKEN=hf", "--secret-env", "OPENAI_KEY=o", "--image", "registry.example.com/trainops:0.1.0",
                 "--package", requirement]) == 0
    component, executors = load(output)
    commands = [" ".join(container["command"]) for container in containers(component).values()]
    assert commands and all(requirement in command for command in commands)
    assert all(config.pvc_mount[0].constant == "w" for config in executors.values())


# --- trainops kfp build -----------------------------------------------------------------------------------------

def test_build_dry_run_prints_the_commands(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["kfp", "build", "examples/digits/pipeline.yaml", "--tag", "registry.example.com/trainops:0.1.0",
                 "--extras", "aws,kfp", "--push", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    engine = lines[0].split()[0]
    assert lines == [f"{engine} build -t registry.example.com/trainops:0.1.0 --build-arg PIPELINE_DIR=examples/digits "
                     f"--build-arg EXTRAS=aws,kfp {ROOT}", f"{engine} push registry.example.com/trainops:0.1.0"]
    assert engine in ("docker", "podman")


def test_build_refuses_a_context_without_the_dockerfile_or_a_pipeline_outside_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["kfp", "build", "examples/digits/pipeline.yaml", "--context", str(tmp_path), "--dry-run"]) == 2
    assert f"--context: {tmp_path} holds no Dockerfile" in capsys.readouterr().err
    (tmp_path / "pipeline.yaml").write_text("name: x\n")
    assert main(["kfp", "build", str(tmp_path / "pipeline.yaml"), "--dry-run"]) == 2
    assert f"{tmp_path} is outside the build context {ROOT}" in capsys.readouterr().err


def test_build_refuses_to_push_a_tag_that_names_no_registry(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["kfp", "build", "examples/digits/pipeline.yaml", "--push", "--dry-run"]) == 2
    assert "--tag: trainops:0.1.0 names no registry" in capsys.readouterr().err


def test_build_without_docker_or_podman_says_what_to_run_where(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", str(tmp_path))  # neither engine to be found
    assert main(["kfp", "build", "examples/digits/pipeline.yaml", "--tag", "reg.example.com/t:1", "--push"]) == 2
    error = capsys.readouterr().err
    assert "docker: neither docker nor podman is on PATH" in error
    assert f"docker build -t reg.example.com/t:1 --build-arg PIPELINE_DIR=examples/digits {ROOT} && docker push " \
           "reg.example.com/t:1" in error


@pytest.mark.skipif(shutil.which("docker") is None, reason="the docker command line is not installed")
def test_a_build_the_engine_fails_exits_1_with_the_engines_message(capfd, monkeypatch, tmp_path):
    """The real docker command line against a daemon that is not there (what a machine without one shows)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    assert main(["kfp", "build", "examples/digits/pipeline.yaml", "--tag", "reg.example.com/t:1", "--push"]) == 1
    captured = capfd.readouterr()
    assert "$ docker build -t reg.example.com/t:1" in captured.out
    assert "docker push" not in captured.out  # the push never follows a failed build
    assert "no-daemon.sock" in captured.err, captured.err
