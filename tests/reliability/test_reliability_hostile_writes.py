"""Issue 39, class 1: writing into a directory trainops does not own (an output path, a registry).

Another user of this machine (a real account, made with useradd: `support.other_user`) who can write where root's
job writes its archives plants links under every name trainops uses there, or makes a directory trainops expects
into a link, or makes the registry directory first and plants a champion in it. Every write goes through
`trainops.backends.hostfs.safe_fs` (relative to an open directory, no link followed, unguessable temporaries created
exclusively, renamed within the directory), and a registry of another user is refused like a state root.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest
from local_breaks import cli
from support import other_user

from trainops.backends.hostfs import safe_fs

NAME = "victim-job"
SECRET = "root's private bytes\n"

needs_another_user = pytest.mark.skipif(not other_user.available(),
                                        reason="needs root with useradd and setpriv, to act as another user")


@pytest.fixture
def shared(tmp_path):
    """A directory the other user can write (mode 0777, as a team's scratch directory), removed afterwards."""
    directory = other_user.shared_directory("trainops-shared-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def private(tmp_path):
    """Root's own files: a 0700 directory holding a 0600 secret."""
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    secret = directory / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return directory


def _spec(tmp_path: Path, output: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "train.py").write_text("import os\n"
                                     "base = os.environ.get('SAGEMAKER_BASE_DIR', '/opt/ml')\n"
                                     "open(os.path.join(base, 'model', 'weights.bin'), 'w').write('trained')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: hostile-writes\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.m5.large\n"
                    f"instance_count: 1\noutput_path: {output}\n")
    return spec


def _run(tmp_path: Path, output: Path):
    return cli("run", str(_spec(tmp_path, output)), "--job-name", NAME, env={"TRAINOPS_HOME": str(tmp_path / "home")})


def _untouched(private: Path) -> None:
    assert sorted(path.name for path in private.iterdir()) == ["secret"]
    assert (private / "secret").read_text() == SECRET


# --- the output path --------------------------------------------------------------------------------------------------
@needs_another_user
def test_a_job_directory_another_user_made_in_the_output_path_is_refused_before_the_job_runs(tmp_path, shared,
                                                                                              private):
    other_user.as_rival("mkdir", "-m", "0777", str(shared / NAME))
    other_user.as_rival("ln", "-s", str(private), str(shared / NAME / "output"))
    result = _run(tmp_path, shared)
    assert result.returncode == 1, (result.stdout, result.stderr)
    record = json.loads((tmp_path / "home" / "jobs" / NAME / "status.json").read_text())
    assert record["secondary_status"] == "Starting" and "nothing was run" in record["failure_reason"], record
    assert f"owned by uid {other_user.rival()[0]}" in record["failure_reason"], record
    _untouched(private)


@needs_another_user
def test_an_output_directory_made_a_link_by_another_user_is_refused_not_followed(tmp_path, shared, private):
    (shared / NAME).mkdir(mode=0o777)  # root's own job directory in a team directory, writable by the team
    (shared / NAME).chmod(0o777)
    other_user.as_rival("ln", "-s", str(private), str(shared / NAME / "output"))
    result = _run(tmp_path, shared)
    assert result.returncode == 1, (result.stdout, result.stderr)
    record = json.loads((tmp_path / "home" / "jobs" / NAME / "status.json").read_text())
    assert "symbolic link" in record["failure_reason"] and "nothing was run" in record["failure_reason"], record
    _untouched(private)


# Run as the other user: links to root's secret under every name the output location gets (the archives' final
# names) and under the temporary names earlier trainops used (`.write-test.<pid>`, `.model.tar.gz.<pid>.partial`)
# for the next 3,000 pids of this machine.
PLANT = """import os, sys
directory, target = sys.argv[1], sys.argv[2]
with open("/proc/sys/kernel/ns_last_pid") as handle:
    last = int(handle.read())
names = ["model.tar.gz", "output.tar.gz"]
for pid in range(last + 1, last + 3001):
    names += [f".write-test.{pid}", f".model.tar.gz.{pid}.partial", f".output.tar.gz.{pid}.partial"]
for name in names:
    os.symlink(target, os.path.join(directory, name))
print(len(names))
"""


@needs_another_user
def test_links_planted_under_every_name_the_archives_use_are_replaced_never_written_through(tmp_path, shared,
                                                                                              private):
    output = shared / NAME / "output"
    output.mkdir(parents=True)
    for directory in (shared / NAME, output):
        directory.chmod(0o777)  # root's, but the team can write in it
    planted = other_user.as_rival("/usr/bin/python3", "-c", PLANT, str(output), str(private / "secret"))
    assert int(planted.stdout) > 9000
    result = _run(tmp_path, shared)
    assert result.returncode == 0, (result.stdout, result.stderr)
    _untouched(private)
    for name in ("model.tar.gz", "output.tar.gz"):
        details = os.lstat(output / name)
        assert stat.S_ISREG(details.st_mode) and details.st_uid == 0, name  # the link replaced, not followed
    with tarfile.open(output / "model.tar.gz") as archive:
        assert archive.extractfile("weights.bin").read() == b"trained"


def test_the_writer_replaces_a_link_at_the_final_name_and_never_reuses_a_temporary_name(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    directory = tmp_path / "out"
    directory.mkdir()
    (directory / "final").symlink_to(target)
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = {safe_fs.new_temporary(handle, "final")[0] for _ in range(3)}
        safe_fs.write_file_at(handle, "final", b"new")
    finally:
        os.close(handle)
    assert len(names) == 3 and all(name.startswith(".final.") for name in names)
    assert target.read_text() == "keep" and not (directory / "final").is_symlink()
    assert (directory / "final").read_bytes() == b"new"


# --- the registry -----------------------------------------------------------------------------------------------------
def _planted_registry(root: Path) -> None:
    """As the other user: a registry with an Approved 'champion' of theirs."""
    entry = {"group": "digits", "version": 1, "approval_status": "Approved", "model_artifact": "model.tar.gz",
             "source_artifact": "/elsewhere", "metrics": {"accuracy": 1.0}, "created": "2026-01-01T00:00:00+00:00"}
    script = ("import json, os, sys\nroot = sys.argv[1]\nos.makedirs(os.path.join(root, 'digits', 'v1'))\n"
              "open(os.path.join(root, 'digits', 'v1', 'model.tar.gz'), 'w').write('theirs')\n"
              f"json.dump({entry!r}, open(os.path.join(root, 'digits', 'v1', 'entry.json'), 'w'))\n")
    other_user.as_rival("/usr/bin/python3", "-c", script, str(root))


@needs_another_user
@pytest.mark.parametrize("which", ["--registry", "TRAINOPS_HOME"])
def test_a_registry_another_user_made_first_is_refused_for_reading_and_registering(tmp_path, shared, which,
                                                                                   monkeypatch):
    from trainops.backends.local.registry import LocalRegistry
    from trainops.errors import SpecError

    home = shared / "home"
    other_user.as_rival("mkdir", "-m", "0755", str(home))
    registry = home / "registry"
    _planted_registry(registry)
    options = ["--registry", str(registry)] if which == "--registry" else []
    monkeypatch.setenv("TRAINOPS_HOME", str(home) if which == "TRAINOPS_HOME" else str(tmp_path / "home"))
    listed = cli("models", "list", *options)
    field = "registry_dir" if which == "--registry" else "TRAINOPS_HOME"
    assert listed.returncode == 2 and f"{field}:" in listed.stderr and "uid" in listed.stderr, listed
    assert "digits" not in listed.stdout  # their champion is not served
    artifact = tmp_path / "model.tar.gz"
    with tarfile.open(artifact, "w:gz"):
        pass
    with pytest.raises(SpecError) as refused:
        LocalRegistry(registry if which == "--registry" else None).register(
            group="digits", model_artifact=str(artifact), metrics={"accuracy": 0.5})
    assert refused.value.problems[0].path == field
    with pytest.raises(SpecError):
        LocalRegistry(registry if which == "--registry" else None).champion("digits")
    assert sorted(path.name for path in (registry / "digits").iterdir()) == ["v1"]  # nothing registered there


# --- a pipeline's work directory ----------------------------------------------------------------------------------------
def _pipeline(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "prepare.py").write_text(f"open({str(tmp_path / 'prepared')!r}, 'w').write('ran')\n")
    path = tmp_path / "pipeline.yaml"
    path.write_text("name: shared-work\nsteps:\n  prepare: {script: prepare.py}\n  train:\n"
                    "    spec: {entry_point: train.py, source_dir: ., instance_type: local}\n")
    return path


def _run_pipeline(tmp_path: Path, workdir: Path):
    return cli("run", str(_pipeline(tmp_path)), "--workdir", str(workdir),
               env={"TRAINOPS_HOME": str(tmp_path / "home")})


@needs_another_user
def test_a_pipeline_record_directory_another_user_made_is_refused_before_any_step(tmp_path, shared, private):
    other_user.as_rival("mkdir", "-m", "0777", str(shared / "pipelines"))
    other_user.as_rival("ln", "-s", str(private), str(shared / "pipelines" / "shared-work"))
    result = _run_pipeline(tmp_path, shared)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "  - workdir: " in result.stderr, result.stderr
    assert not (tmp_path / "prepared").exists()  # no step ran
    _untouched(private)


def test_a_link_planted_at_the_pipeline_record_is_replaced_never_written_through(tmp_path, private):
    record = tmp_path / "work" / "pipelines" / "shared-work"
    record.mkdir(parents=True)
    (record / "last-run.json").symlink_to(private / "secret")
    result = _run_pipeline(tmp_path, tmp_path / "work")
    assert result.returncode == 0, (result.stdout, result.stderr)
    _untouched(private)
    assert not (record / "last-run.json").is_symlink()
    assert json.loads((record / "last-run.json").read_text())["status"] == "Succeeded"
    assert [path.name for path in record.iterdir() if path.name.startswith(".")] == []  # no temporary left
