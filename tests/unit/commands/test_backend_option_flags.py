"""`-o/--option KEY=VALUE` on every command that reaches a backend (issue 38, item 1): the backend's one mapping of
settings, its older flags as shorthands for it; a setting the backend does not take, or text that is not its type,
is exit 2 naming the setting and the backend. status / logs / stop look on the backend they are given."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from trainops.cli import main


def cli(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(arguments))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def spec(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(
        "import os\nprint('rank on', os.environ['SM_CURRENT_HOST'], 'read',\n"
        "      open(os.path.join(os.environ['SM_CHANNEL_TRAIN'], 'data.txt')).read())\n"
        "open(os.path.join(os.environ['SM_MODEL_DIR'], 'm'), 'w')\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "data.txt").write_text("staged-data")
    path = tmp_path / "spec.yaml"
    path.write_text(f"entry_point: train.py\nsource_dir: {tmp_path / 'code'}\ninstance_type: ml.m5.large\n"
                    "inputs: {train: 's3://example-bucket/train/'}\n")
    return path


def test_run_status_logs_and_stop_take_the_backends_settings_as_options(spec, tmp_path):
    work = tmp_path / "elsewhere"
    code, out, err = cli("run", str(spec), "--job-name", "opt-1", "-o", f"workdir={work}",
                         "-o", "processes_per_host=2", "-o", f"channel_overrides=train={tmp_path / 'data'}")
    assert code == 0, out + err
    code, out, err = cli("status", "opt-1", "--json", "-o", f"workdir={work}")
    assert code == 0, err
    record = json.loads(out)
    assert record["status"] == "Completed" and record["processes_per_host"] == 2
    assert record["job_dir"] == str(work / "jobs" / "opt-1")
    code, out, _ = cli("logs", "opt-1", "-o", f"workdir={work}")
    assert code == 0 and "rank on algo-1 read staged-data" in out
    code, out, _ = cli("stop", "opt-1", "--workdir", str(work))  # the shorthand feeds the same mapping
    assert code == 0 and "opt-1" in out
    # With no place given, the job index finds it where it was started
    for backend in ([], ["--backend", "local"]):
        code, out, _ = cli("status", "opt-1", *backend)
        assert code == 0 and f"job_dir: {work / 'jobs' / 'opt-1'}" in out
    # The default state root holds no such job: the message says where it looked and how to look elsewhere.
    code, _, err = cli("status", "opt-1", "--workdir", str(tmp_path / "home"))
    assert code == 2 and f"no job 'opt-1' on the local backend (looked in {tmp_path / 'home' / 'jobs'})" in err


@pytest.mark.parametrize(("options", "texts"), [
    (["-o", "preflight=false"], ["preflight: is not a setting of the local backend"]),
    (["-o", "processes_per_host=two"], ["processes_per_host: 'two' is not a whole number (a setting of the local "
                                        "backend)"]),
    (["-o", "processes_per_host"], ["-o: 'processes_per_host': expected KEY=VALUE"]),
    (["--processes-per-host", "2", "-o", "processes_per_host=3"], ["processes_per_host: is given twice"]),
    (["--backend", "nosuch"], ["'nosuch' is not a backend; use one of local, sagemaker"]),
])
def test_a_setting_the_backend_refuses_is_exit_2_naming_it_before_anything_runs(spec, tmp_path, options, texts):
    code, out, err = cli("run", str(spec), "--job-name", "refused-1", *options)
    assert code == 2 and "internal error" not in err, out + err
    for text in texts:
        assert text in err
    assert not (tmp_path / "home" / "jobs" / "refused-1").exists()


def test_render_and_models_take_the_backends_settings_too(spec, tmp_path):
    code, _, err = cli("render", str(spec), "-o", "preflight=false")
    assert code == 2 and "preflight: is not a setting of the local backend" in err
    code, out, err = cli("models", "list", "-o", f"registry_dir={tmp_path / 'registry'}")
    assert code == 0 and f"no models registered in {tmp_path / 'registry'}" in out, err


def test_backends_lists_each_backend_with_its_settings_and_the_named_ones(tmp_path, monkeypatch):
    path = tmp_path / "backends.yaml"
    path.write_text("gpu-eu:\n  backend: sagemaker\n  options: {region: eu-west-1}\n")
    monkeypatch.setenv("TRAINOPS_BACKENDS", str(path))
    code, out, _ = cli("backends", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["local"]["default"] is True and rows["local"]["settings"]["processes_per_host"] == "int"
    assert rows["sagemaker"]["settings"]["preflight"] == "bool"
    assert rows["gpu-eu"]["backend"] == "sagemaker" and rows["gpu-eu"]["options"] == {"region": "eu-west-1"}
