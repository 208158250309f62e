"""Issue 24, break 6: internal errors of the local backend become clear ones, host tools come from trainops' own
environment, and a rank's terminal control sequences are escaped on display while its log file keeps the bytes."""

from __future__ import annotations

import json
import shutil

import pytest
from local_breaks import ESCAPES, cli, write_job

NAME = "stand-in"


def _run(tmp_path, environment=None, extra=None, *options):
    home = tmp_path / "home"
    spec = write_job(tmp_path, environment, extra=extra)
    return home, cli("run", str(spec), "--job-name", NAME, *options, env={"TRAINOPS_HOME": str(home)})


def test_a_spec_path_never_chooses_the_host_tools(tmp_path):
    """`PATH=/nonexistent` in the job's environment: trainops still finds unshare, sh and Python on its own; the
    job runs (its container sees the PATH it asked for)."""
    _, result = _run(tmp_path, {"PATH": "/nonexistent"})
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "trained" in result.stdout


MPI_SCRIPT = """import os
print("RANK", os.environ.get("OMPI_COMM_WORLD_RANK"), os.environ.get("TRAINOPS_LAUNCH_MODE"), os.environ["PATH"],
      flush=True)
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (make mpi)")
@pytest.mark.parametrize("path", ["fake", "/nonexistent"])
def test_a_spec_path_never_chooses_the_mpirun_a_local_host_runs(tmp_path, path):
    """A spec whose PATH holds a fake `mpirun` (or names nothing at all): the local host still runs the image's
    Open MPI that trainops found in its own environment, every rank runs under it, the fake never runs, and the
    ranks see the PATH the job asked for."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    marker = tmp_path / "fake-mpirun-ran"
    (fake / "mpirun").write_text(f"#!/bin/sh\ntouch {marker}\nexit 0\n")
    (fake / "mpirun").chmod(0o755)
    spec_path = str(fake) if path == "fake" else path
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(MPI_SCRIPT)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: mpi-path\nentry_point: train.py\nsource_dir: src\noutput_path: out\n"
                    "instance_type: ml.c5.xlarge\ninstance_count: 1\n"
                    "distribution: {type: mpi, processes_per_host: 2}\n"
                    f"environment: {json.dumps({'PATH': spec_path, 'OMP_NUM_THREADS': '1'})}\n")
    result = cli("run", str(spec), "--job-name", "mpi-path", env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert not marker.exists()
    ranks = sorted(line.split("RANK ", 1)[1] for line in result.stdout.splitlines() if "RANK " in line)
    assert ranks == [f"0 mpirun {spec_path}", f"1 mpirun {spec_path}"], result.stdout
    assert f"mpirun on host algo-1: {shutil.which('mpirun')} " in result.stdout or \
        "mpirun on host algo-1: /" in result.stdout, result.stdout  # an absolute path, not the name


def test_a_very_long_checkpoint_uri_is_no_file_name_too_long(tmp_path):
    uri = "s3://bucket/" + "/".join(["k" * 200, "c" * 200, "p" * 200])
    home, result = _run(tmp_path, None, [f"checkpoint_s3_uri: {uri}"])
    assert "internal error" not in result.stderr and "too long" not in result.stderr, result.stderr
    assert result.returncode == 0, (result.stdout, result.stderr)
    directories = [path.name for path in (home / "checkpoints").iterdir() if path.is_dir()]
    assert len(directories) == 1 and len(directories[0].encode()) <= 255, directories
    again = cli("run", str(tmp_path / "job.yaml"), "--job-name", "again", env={"TRAINOPS_HOME": str(home)})
    assert again.returncode == 0, again.stderr
    assert [path.name for path in (home / "checkpoints").iterdir() if path.is_dir()] == directories  # same key


def test_a_file_where_the_job_directory_should_be_is_a_clear_error(tmp_path):
    home = tmp_path / "home"
    (home / "jobs").mkdir(parents=True)
    (home / "jobs" / NAME).write_text("not a directory")
    result = cli("run", str(write_job(tmp_path)), "--job-name", NAME, env={"TRAINOPS_HOME": str(home)})
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert str(home / "jobs" / NAME) in result.stderr and "is a file" in result.stderr, result.stderr
    for command in ("status", "logs", "stop"):
        other = cli(command, NAME, "--backend", "local", env={"TRAINOPS_HOME": str(home)})
        assert other.returncode == 2 and "internal error" not in other.stderr, (command, other.stderr)


def test_a_file_where_the_checkpoint_directory_should_be_is_a_clear_error(tmp_path):
    home = tmp_path / "home"
    (home / "checkpoints").mkdir(parents=True)
    (home / "checkpoints" / NAME).write_text("not a directory")
    result = cli("run", str(write_job(tmp_path)), "--job-name", NAME, env={"TRAINOPS_HOME": str(home)})
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert str(home / "checkpoints" / NAME) in result.stderr and "is a file" in result.stderr, result.stderr
    status = json.loads(cli("status", NAME, "--backend", "local", "--json", env={"TRAINOPS_HOME": str(home)}).stdout)
    assert status["status"] == "Failed" and "is a file" in status["failure_reason"]


CONTROLS = ("\x1b", "\x07", "\x9b")


def test_terminal_control_sequences_of_rank_output_are_escaped_on_display_and_kept_in_the_log(tmp_path):
    home, result = _run(tmp_path, {"ESCAPES": "1"})
    assert result.returncode == 0, result.stderr
    shown = cli("logs", NAME, "--backend", "local", env={"TRAINOPS_HOME": str(home)})
    assert shown.returncode == 0, shown.stderr
    for output in (result.stdout, shown.stdout):
        assert not any(control in output for control in CONTROLS), ascii(output)
        assert "\\x1b]52;c;ZXZpbA==" in output  # escaped, so a reader sees what was attempted
        forged = [line for line in output.splitlines() if "job completed (forged)" in line]
        assert forged and not any(line.startswith("[trainops]") for line in forged), forged
    log = (home / "jobs" / NAME / "logs" / "algo-1.log").read_bytes()
    assert b"\x1b]52;c;ZXZpbA==\x07" in log and b"\xc2\x9b31m" in log  # the file keeps what the rank wrote
    assert ESCAPES.split(b"\n")[0][:20] in log
