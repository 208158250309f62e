"""Local evaluation: real scripts in subprocesses, the contract environment, metrics.json checks, failures, timeouts
and hostile model archives."""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from pathlib import Path

import pytest

from trainops.backends.local import evaluate as local_evaluate
from trainops.backends.local.evaluate import extract_model, read_metrics, run_evaluation
from trainops.errors import JobFailed, SpecError

# An evaluation script that follows the contract: reads the model and test data from SM_CHANNEL_*, writes metrics,
# a report and a record of what it saw (environment and arguments) into TRAINOPS_EVALUATION_DIR.
CONTRACT_SCRIPT = textwrap.dedent("""
    import json, os, sys
    model = open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "weights.txt")).read().strip()
    samples = sorted(os.listdir(os.environ["SM_CHANNEL_TEST"]))
    out = os.environ["TRAINOPS_EVALUATION_DIR"]
    print("evaluating", model, "on", len(samples), "samples")
    print("a warning", file=sys.stderr)
    seen = {name: os.environ.get(name) for name in
            ("SM_CHANNEL_MODEL", "SM_CHANNEL_TEST", "SM_CHANNELS", "SM_OUTPUT_DATA_DIR", "TRAINOPS_EVALUATION_DIR",
             "EXTRA_SETTING")}
    json.dump({"env": seen, "argv": sys.argv[1:], "cwd": os.getcwd()}, open(os.path.join(out, "seen.json"), "w"))
    open(os.path.join(out, "report.md"), "w").write("# report\\n")
    json.dump({"accuracy": 0.97, "loss": 0.12, "samples": len(samples)}, open(os.path.join(out, "metrics.json"), "w"))
""")


def make_archive(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def workspace(tmp_path):
    """A source dir, a model.tar.gz, a test channel with two files and an output dir."""
    source = tmp_path / "code"
    source.mkdir()
    (source / "evaluate.py").write_text(CONTRACT_SCRIPT)
    model = make_archive(tmp_path / "model.tar.gz", {"weights.txt": b"cnn-v1\n"})
    test = tmp_path / "test"
    test.mkdir()
    (test / "a.csv").write_text("1\n")
    (test / "b.csv").write_text("2\n")
    return {"source": source, "model": model, "test": test, "out": tmp_path / "evaluation"}


def collect():
    lines: list[tuple[str, bool]] = []
    return lines, lambda line, from_stderr: lines.append((line, from_stderr))


def write_script(workspace, body: str) -> str:
    (workspace["source"] / "script.py").write_text(textwrap.dedent(body))
    return "script.py"


def test_contract_environment_arguments_metrics_and_streaming(workspace):
    lines, sink = collect()
    result = run_evaluation(
        entry_point="evaluate.py", source_dir=workspace["source"], model_artifact=f"file://{workspace['model']}",
        channels={"test": str(workspace["test"])}, output_dir=workspace["out"],
        hyperparameters={"batch_size": 64, "mode": "fast", "sagemaker_program": "hidden"},
        environment={"EXTRA_SETTING": "on"}, sink=sink,
    )
    assert result.metrics == {"accuracy": 0.97, "loss": 0.12, "samples": 2}
    assert result.files == ["report.md", "seen.json"]
    assert Path(result.metrics_path) == workspace["out"].resolve() / "metrics.json"
    seen = json.loads((workspace["out"] / "seen.json").read_text())
    env = seen["env"]
    assert env["SM_CHANNEL_TEST"] == str(workspace["test"].resolve())
    assert json.loads(env["SM_CHANNELS"]) == ["model", "test"]
    assert env["SM_OUTPUT_DATA_DIR"] == env["TRAINOPS_EVALUATION_DIR"] == str(workspace["out"].resolve())
    assert env["EXTRA_SETTING"] == "on"
    # Framework keys never reach the script; the rest arrive as --key value, sorted.
    assert seen["argv"] == ["--batch_size", "64", "--mode", "fast"]
    assert seen["cwd"] == str(workspace["source"].resolve())
    # The model was extracted into a scratch directory that is gone afterwards.
    assert not Path(env["SM_CHANNEL_MODEL"]).exists()
    assert ("[evaluate] evaluating cnn-v1 on 2 samples", False) in lines
    assert ("[evaluate] a warning", True) in lines


def test_model_directory_is_used_as_it_is(workspace, tmp_path):
    model_dir = tmp_path / "model-dir"
    model_dir.mkdir()
    (model_dir / "weights.txt").write_text("from-dir\n")
    _, sink = collect()
    run_evaluation(entry_point="evaluate.py", source_dir=workspace["source"], model_artifact=model_dir,
                   channels={"test": workspace["test"]}, output_dir=workspace["out"], sink=sink)
    seen = json.loads((workspace["out"] / "seen.json").read_text())
    assert seen["env"]["SM_CHANNEL_MODEL"] == str(model_dir.resolve())


def test_stale_metrics_from_an_earlier_run_do_not_count(workspace):
    workspace["out"].mkdir()
    (workspace["out"] / "metrics.json").write_text('{"accuracy": 1.0}')
    entry = write_script(workspace, "print('forgot to write metrics')\n")
    _, sink = collect()
    with pytest.raises(JobFailed) as caught:
        run_evaluation(entry_point=entry, source_dir=workspace["source"], model_artifact=workspace["model"],
                       channels={"test": workspace["test"]}, output_dir=workspace["out"], sink=sink)
    assert "wrote no metrics.json" in str(caught.value)
    assert "TRAINOPS_EVALUATION_DIR" in str(caught.value)


def test_script_failure_quotes_the_last_stderr_lines(workspace):
    entry = write_script(workspace, """
        import sys
        print("loading the model", file=sys.stderr)
        raise RuntimeError("the test set is empty")
    """)
    _, sink = collect()
    with pytest.raises(JobFailed) as caught:
        run_evaluation(entry_point=entry, source_dir=workspace["source"], model_artifact=workspace["model"],
                       channels={"test": workspace["test"]}, output_dir=workspace["out"], sink=sink)
    message = str(caught.value)
    assert caught.value.exit_code == 1
    assert "evaluation script script.py exited with code 1" in message
    assert "--- last lines of stderr ---" in message
    assert "RuntimeError: the test set is empty" in message


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json", "is not valid JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        ("{}", "is an empty object"),
        ('{"accuracy": "high", "loss": 0.1}', "accuracy='high'"),
        ('{"accuracy": true}', "accuracy=True"),
        ('{"loss": NaN}', "loss=nan"),
        ('{"nested": {"a": 1}}', "nested={'a': 1}"),
    ],
)
def test_bad_metrics_files_say_what_to_fix(tmp_path, content, words):
    path = tmp_path / "metrics.json"
    path.write_text(content)
    with pytest.raises(JobFailed) as caught:
        read_metrics(path)
    assert words in str(caught.value)
    assert "metric name -> number" in str(caught.value)


def process_state(pid: int) -> str | None:
    """The state letter of a process (Z for a zombie), or None when it no longer exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0].decode()
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_timeout_stops_the_whole_process_group(workspace, monkeypatch):
    # The script starts a child that ignores SIGTERM, then both sleep: only a group-wide SIGKILL ends the child.
    monkeypatch.setattr(local_evaluate, "STOP_GRACE_SECONDS", 0.5)
    entry = write_script(workspace, """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
        open(os.path.join(os.environ["TRAINOPS_EVALUATION_DIR"], "child.pid"), "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(600)
    """)
    lines, sink = collect()
    with pytest.raises(JobFailed) as caught:
        run_evaluation(entry_point=entry, source_dir=workspace["source"], model_artifact=workspace["model"],
                       channels={"test": workspace["test"]}, output_dir=workspace["out"], timeout=3, sink=sink)
    assert "ran past its timeout of 3 s and was stopped" in str(caught.value)
    child = int((workspace["out"] / "child.pid").read_text())
    assert process_state(child) in (None, "Z")


def test_children_left_behind_by_a_finished_script_are_stopped(workspace):
    entry = write_script(workspace, """
        import json, os, subprocess, sys
        out = os.environ["TRAINOPS_EVALUATION_DIR"]
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open(os.path.join(out, "child.pid"), "w").write(str(child.pid))
        json.dump({"accuracy": 0.5}, open(os.path.join(out, "metrics.json"), "w"))
    """)
    _, sink = collect()
    result = run_evaluation(entry_point=entry, source_dir=workspace["source"], model_artifact=workspace["model"],
                            channels={"test": workspace["test"]}, output_dir=workspace["out"], sink=sink)
    assert result.metrics == {"accuracy": 0.5}
    assert process_state(int((workspace["out"] / "child.pid").read_text())) in (None, "Z")


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/absolute-escape.txt", "a/../../escape.txt"])
def test_archive_members_that_escape_are_refused(tmp_path, name):
    archive = make_archive(tmp_path / "hostile.tar.gz", {"ok.txt": b"fine", name: b"bad"})
    destination = tmp_path / "extract" / "model"
    with pytest.raises(SpecError) as caught:
        extract_model(archive, destination)
    assert caught.value.problems[0].path == "model_artifact"
    assert "refusing" in str(caught.value)
    assert not (destination / "ok.txt").exists()  # checked before anything is written
    assert not (tmp_path / "extract" / "escape.txt").exists()


def test_archive_links_out_are_refused(tmp_path):
    archive = tmp_path / "link.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        info = tarfile.TarInfo("passwd")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        bundle.addfile(info)
    with pytest.raises(SpecError) as caught:
        extract_model(archive, tmp_path / "model")
    assert "outside the model directory" in str(caught.value)


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_archive_links_inside_are_refused_too(tmp_path, kind):
    """Any link member is refused, even one pointing inside: a realpath check of a link can be fooled
    (CVE-2025-4517, tests/reliability/test_reliability_files.py), so links are not extracted at all."""
    archive = tmp_path / "link.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        info = tarfile.TarInfo("weights.bin")
        info.size = 3
        bundle.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("alias.bin")
        link.type = kind
        link.linkname = "weights.bin"
        bundle.addfile(link)
    destination = tmp_path / "model"
    with pytest.raises(SpecError) as caught:
        extract_model(archive, destination)
    assert "link" in str(caught.value) and "alias.bin" in str(caught.value)
    assert not destination.exists()  # created by the extraction, removed with what it held


def test_archive_larger_than_the_limit_is_refused_before_writing(tmp_path, monkeypatch):
    archive = make_archive(tmp_path / "big.tar.gz", {"a.bin": bytes(600_000), "b.bin": bytes(600_000)})
    monkeypatch.setenv("TRAINOPS_MAX_MODEL_BYTES", "1000000")
    destination = tmp_path / "model"
    with pytest.raises(SpecError) as caught:
        extract_model(archive, destination)
    assert "more than the limit" in str(caught.value) and "TRAINOPS_MAX_MODEL_BYTES" in str(caught.value)
    assert not destination.exists()
    monkeypatch.setenv("TRAINOPS_MAX_MODEL_BYTES", "2000000")
    assert sorted(path.name for path in extract_model(archive, destination).iterdir()) == ["a.bin", "b.bin"]


def test_archive_larger_than_the_free_space_is_a_clear_error(tmp_path, monkeypatch):
    import os as real_os

    from trainops.backends.local import model_archive

    archive = make_archive(tmp_path / "model.tar.gz", {"weights.bin": bytes(8192)})
    real_statvfs = real_os.statvfs

    class Tiny:
        f_bavail, f_frsize = 1, 4096

    monkeypatch.setattr(model_archive.os, "statvfs", lambda path: Tiny())
    with pytest.raises(JobFailed) as caught:
        extract_model(archive, tmp_path / "model")
    assert "4.0 KiB free" in str(caught.value) and "8.0 KiB" in str(caught.value)
    monkeypatch.setattr(model_archive.os, "statvfs", real_statvfs)


def test_a_full_disk_while_extracting_is_a_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    from trainops.backends.local import model_archive

    archive = make_archive(tmp_path / "model.tar.gz", {"a.txt": b"a", "sub/b.txt": b"b"})
    existing = tmp_path / "model"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    real_write = model_archive.os.write
    calls = []

    def full(descriptor, data):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(model_archive.os, "write", full)
    with pytest.raises(JobFailed) as caught:
        extract_model(archive, existing)
    assert "no space left" in str(caught.value)
    assert sorted(path.name for path in existing.iterdir()) == ["keep.txt"]  # what was there stays, the rest is gone


def test_modes_lose_setuid_and_files_are_replaced_not_written_through(tmp_path):
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        for data in (b"old", b"new"):  # the same name twice: the later one wins, as with tar
            info = tarfile.TarInfo("run.sh")
            info.size, info.mode = len(data), 0o4755
            bundle.addfile(info, io.BytesIO(data))
    result = extract_model(archive, tmp_path / "model")
    assert (result / "run.sh").read_bytes() == b"new"
    assert (result / "run.sh").stat().st_mode & 0o7777 == 0o755


def test_not_an_archive(tmp_path):
    path = tmp_path / "model.tar.gz"
    path.write_bytes(b"not a tarball")
    with pytest.raises(SpecError) as caught:
        extract_model(path, tmp_path / "model")
    assert "not a readable tar archive" in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"entry_point": "missing.py"}, "entry_point"),
        ({"entry_point": "../outside.py"}, "entry_point"),
        ({"model_artifact": "does-not-exist.tar.gz"}, "model_artifact"),
        ({"model_artifact": "s3://bucket/model.tar.gz"}, "model_artifact"),
        ({"channels": {"test": "/does/not/exist"}}, "channels.test"),
        ({"channels": {"model": "."}}, "channels.model"),
        ({"channels": {"bad name": "."}}, "channels.bad name"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_input_is_a_spec_error_naming_the_field(workspace, change, field):
    arguments = {"entry_point": "evaluate.py", "source_dir": workspace["source"], "model_artifact": workspace["model"],
                 "channels": {"test": workspace["test"]}, "output_dir": workspace["out"]}
    arguments.update(change)
    with pytest.raises(SpecError) as caught:
        run_evaluation(**arguments, sink=lambda line, from_stderr: None)
    assert caught.value.problems[0].path == field
    assert caught.value.exit_code == 2
