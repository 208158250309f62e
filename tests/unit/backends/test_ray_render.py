"""The ray backend without a cluster: its settings and options, the submission `trainops render --backend ray` shows
(entrypoint, runtime_env, metadata with trainops' token, the request with its hyperparameters, one bundle per host),
and what it refuses at validation, naming the engine. Ray itself is not imported for any of it."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from trainops.backends import backend_class, get_backend
from trainops.backends.ray.options import RayOptions, RaySettings
from trainops.backends.ray.submission import DRIVER, OWNER_KEY, TOKEN, TOKEN_KEY
from trainops.backends.ray.vocabulary import RAY
from trainops.errors import SpecError
from trainops.spec.loader import parse_job_spec


@pytest.fixture
def spec(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    return parse_job_spec({"name": "bert", "entry_point": "train.py", "source_dir": str(tmp_path),
                           "instance_type": "ml.g5.12xlarge", "instance_count": 2, "max_run": 3600,
                           "output_path": "s3://bucket/out", "environment": {"NCCL_DEBUG": "INFO"},
                           "distribution": {"type": "torch_distributed"}, "hyperparameters": {"epochs": 3}})


def backend(**options):
    return get_backend("ray", options={"address": "http://head:8265", **options})


def test_the_name_ray_is_a_built_in_backend():
    assert backend_class("ray").__name__ == "RayBackend"
    assert backend().cluster == RaySettings(address="http://head:8265")


def test_the_submission_names_the_job_and_carries_trainops_token(spec, tmp_path):
    rendered = backend(runtime_env={"pip": ["numpy"], "env_vars": {"A": "1", "NCCL_DEBUG": "WARN"}}
                       ).render_request(spec, "bert-1")
    assert rendered["submission_id"] == "bert-1"
    assert rendered["address"] == "http://head:8265"
    assert rendered["metadata"][TOKEN_KEY] == TOKEN and rendered["metadata"][OWNER_KEY]
    assert rendered["metadata"]["trainops_max_run"] == "3600"
    words = shlex.split(rendered["entrypoint"])
    assert words[:3] == ["python", "-m", DRIVER]
    arguments = json.loads(words[3])
    assert arguments["job_name"] == "bert-1" and arguments["max_run"] == 3600
    runtime_env = rendered["runtime_env"]
    assert runtime_env["pip"] == ["numpy"]
    request_shown = json.loads(runtime_env["env_vars"].pop("TRAINOPS_RAY_REQUEST"))  # the driver's request
    assert request_shown["TrainingJobName"] == "bert-1"
    assert runtime_env["env_vars"] == {"A": "1", "NCCL_DEBUG": "INFO",  # merged, the spec's environment winning
                                       "TRAINOPS_RAY_SHIPPED": "1"}
    assert runtime_env["working_dir"] == str(tmp_path.resolve())  # the code travels in the runtime_env
    assert runtime_env["py_modules"][0].endswith("/trainops")  # and so does the runtime: the nodes need no trainops
    request = rendered["request"]
    assert request["TrainingJobName"] == "bert-1"
    assert json.loads(request["HyperParameters"]["epochs"]) == 3
    assert request["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600



def test_rendering_imports_no_ray(tmp_path):
    # In a fresh interpreter: this test process may already hold Ray (another ray test of the same worker ran first).
    (tmp_path / "train.py").write_text("print('hi')\n")
    script = (
        "import sys\n"
        "from trainops.backends import get_backend\n"
        "from trainops.spec.loader import parse_job_spec\n"
        f"spec = parse_job_spec({{'name': 'bert', 'entry_point': 'train.py', 'source_dir': {str(tmp_path)!r}, "
        "'instance_type': 'ml.g5.12xlarge', 'instance_count': 2, 'output_path': 's3://bucket/out'})\n"
        "get_backend('ray', options={'address': 'http://head:8265'}).render_request(spec, 'bert-1')\n"
        "print(sorted(name for name in sys.modules if name == 'ray' or name.startswith('ray.')))\n")
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]", shown.stdout + shown.stderr


def test_one_bundle_per_host_with_the_instance_types_gpus(spec):
    plan = backend().render_request(spec, "bert-1")["placement"]
    assert plan["strategy"] == "STRICT_SPREAD"  # one host per Ray node, as one container per instance
    assert plan["hosts"] == ["algo-1", "algo-2"]
    assert plan["bundles"] == [{"CPU": 1.0, "GPU": 4.0}, {"CPU": 1.0, "GPU": 4.0}]  # ml.g5.12xlarge: 4 A10G
    assert plan["processes_per_host"] == 4
    cpu = backend(gpus_per_host=0, cpus_per_host=2, resources_per_host={"special": 1}, processes_per_host=2,
                  placement="PACK").render_request(spec, "bert-1")["placement"]
    assert cpu["bundles"] == [{"CPU": 2.0, "special": 1.0}] * 2
    assert cpu["strategy"] == "PACK" and cpu["processes_per_host"] == 2


def test_the_hosts_share_a_checkpoint_directory_of_the_key_the_attempts_keep(spec):
    def key(name, **options):
        entrypoint = backend(**options).render_request(spec, name)["entrypoint"]
        return json.loads(shlex.split(entrypoint)[-1])["checkpoint_key"]

    assert key("bert-1") == "bert-1"  # a new job starts afresh
    assert key("bert-1-2", checkpoint_key="bert-1") == "bert-1"  # the train step's retry resumes from its first try
    shared = spec.model_copy(update={"checkpoint_s3_uri": "s3://bucket/ckpt/bert"})
    assert json.loads(shlex.split(backend().render_request(shared, "bert-3")["entrypoint"])[-1])[
        "checkpoint_key"] == "bucket__ckpt__bert"  # as on SageMaker, every job of the URI shares it
    assert RAY.takes({"checkpoint_key": "bert-1"}) == {"checkpoint_key": "bert-1"}  # the front ends pass it


def test_channel_overrides_are_where_the_nodes_read_a_channel(spec, tmp_path):
    with_input = spec.model_copy(update={"inputs": parse_job_spec({
        **spec.model_dump(exclude_none=True, by_alias=True), "inputs": {"train": "s3://bucket/train"}}).inputs})
    request = backend(channel_overrides={"train": str(tmp_path / "data")}).render_request(with_input, "bert-1")[
        "request"]
    [train] = [channel for channel in request["InputDataConfig"] if channel["ChannelName"] == "train"]
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == str(tmp_path / "data")
    with pytest.raises(SpecError) as raised:
        backend(channel_overrides={"test": str(tmp_path)}).render_request(with_input, "bert-1")
    assert "channel_overrides.test" in [problem.path for problem in raised.value.problems]
    assert RAY.takes({"channel_overrides": {"train": "/d"}}) == {"channel_overrides": {"train": "/d"}}


def test_a_file_output_says_where_the_model_will_be(spec, tmp_path):
    local = spec.model_copy(update={"output_path": (tmp_path / "out").as_uri()})
    assert backend().render_request(local, "bert-1")["metadata"]["trainops_model"] == \
        (tmp_path / "out" / "bert-1" / "output" / "model.tar.gz").as_uri()
    assert backend().render_request(spec, "bert-1")["metadata"]["trainops_model"] == \
        "s3://bucket/out/bert-1/output/model.tar.gz"  # host 1 uploads it there


def test_with_shared_dir_nothing_travels_in_the_runtime_env(spec, tmp_path):
    spec = spec.model_copy(update={"output_path": None})
    rendered = backend(shared_dir=str(tmp_path / "shared")).render_request(spec, "bert-1")
    assert "working_dir" not in rendered["runtime_env"] and "py_modules" not in rendered["runtime_env"]
    assert rendered["request"]["OutputDataConfig"]["S3OutputPath"] == (tmp_path / "shared" / "output").as_uri()


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"distribution": {"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2}}}, "distribution",
     "SMP v1"),
    ({"distribution": {"type": "mpi"}}, "distribution", "mpirun over ssh"),
    ({"launcher": "toolkit"}, "launcher", "trainops launcher only"),
    ({"use_spot_instances": True, "max_wait": 7200}, "use_spot_instances", "managed spot"),
])
def test_what_ray_cannot_run_is_refused_naming_the_engine(spec, changes, field, words):
    data = {**spec.model_dump(exclude_none=True, by_alias=True), **changes}
    changed = parse_job_spec(data)
    with pytest.raises(SpecError) as raised:
        backend().check_spec(changed)
    assert field in [problem.path for problem in raised.value.problems]
    assert words in str(raised.value) and "ray engine" in str(raised.value)


def test_instance_groups_are_refused_naming_the_engine(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    grouped = parse_job_spec({"name": "bert", "entry_point": "train.py", "source_dir": str(tmp_path),
                              "instance_groups": [{"instance_group_name": "a", "instance_type": "ml.c5.xlarge",
                                                   "instance_count": 1}]})
    with pytest.raises(SpecError) as raised:
        backend().check_spec(grouped)
    assert "instance_groups" in [problem.path for problem in raised.value.problems]
    assert "ray engine" in str(raised.value)


@pytest.mark.parametrize(("options", "field"), [
    ({"runtime_env": {"working_dir": "/x"}}, "runtime_env.working_dir"),
    ({"runtime_env": {"env_vars": {"A": 1}}}, "runtime_env.env_vars"),
    ({"placement": "ANYWHERE"}, "placement"),
    ({"cpus_per_host": -1}, "cpus_per_host"),
    ({"resources_per_host": {"x": "many"}}, "resources_per_host"),
    ({"processes_per_host": 0}, "processes_per_host"),
    ({"checkpoint_key": "../elsewhere"}, "checkpoint_key"),
    ({"channel_overrides": {"train": "relative/dir"}}, "channel_overrides"),
])
def test_bad_options_name_the_field(options, field):
    with pytest.raises(SpecError) as raised:
        RayOptions.parse(options)
    assert field in [problem.path for problem in raised.value.problems]


def test_settings_refuse_a_client_address_and_say_where_the_address_comes_from(monkeypatch):
    with pytest.raises(SpecError) as raised:
        RaySettings(address="ray://head:10001")
    assert "Jobs API" in str(raised.value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(SpecError) as raised:
        RaySettings().resolved_address()
    assert raised.value.problems[0].path == "address" and "RAY_ADDRESS" in str(raised.value)
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265/")
    assert RaySettings().resolved_address() == "http://127.0.0.1:8265"


def test_a_secret_of_the_environment_is_masked_in_what_render_prints(spec):
    secret = spec.model_copy(update={"environment": {"WANDB_API_KEY": "hunter2-secret"}})
    shown = json.dumps(backend().render_request(secret, "bert-1"))
    assert "hunter2-secret" not in shown


def test_trainops_render_prints_the_submission(spec, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec.model_dump(mode="json", exclude_none=True, by_alias=True)))
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "render", str(path), "--backend", "ray",
                           "-o", "address=http://head:8265", "-o", "gpus_per_host=0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"submission_id"' in done.stdout and TOKEN in done.stdout and DRIVER in done.stdout
