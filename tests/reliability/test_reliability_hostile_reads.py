"""Issue 39, class 2: what a job or another user can write is read bounded, as a regular file only, without blocking.

A rank runs as the user who started the job, so it can replace any file of its job directory: a sparse failure file
of 512 MiB, a FIFO where the controller's lock or the status record is, a metrics value no float can hold, a model
archive whose headers lie. Each is read (or refused) without hanging, without taking the file whole into memory and
without a raw Python error; an archive is refused naming the member, never with members dropped silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hostile_archives
import pytest
from local_breaks import TRAINOPS, cli

from trainops.backends import model_extract
from trainops.backends.local.evaluate import read_metrics
from trainops.backends.local.model_archive import extract_model
from trainops.backends.model_rules import check_metrics
from trainops.errors import JobFailed, SpecError
from trainops.runtime import untrusted

NAME = "hostile"
#: A command that hangs is a failure of the test, not of the suite: each gets this long.
HANG_SECONDS = 90


# --- model archives ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["sparse", "negative-size", "huge-mtime", "negative-mtime", "nan-mtime",
                                  "corrupt-second-header", "truncated-gzip"])
def test_an_archive_whose_headers_lie_is_refused_naming_the_member(tmp_path, case):
    archive, member = hostile_archives.archives(tmp_path)[case]
    destination = tmp_path / "model"
    with pytest.raises(SpecError) as raised:
        extract_model(archive, destination)
    problem = raised.value.problems[0]
    assert problem.path == "model_artifact" and repr(member) in problem.message, problem.message
    assert not destination.exists()  # nothing half-extracted is left


def test_stock_tarfile_drops_what_follows_a_corrupt_header_and_extraction_does_not():
    """The premise of the trailer check: Python's reader ends without a word at a corrupt second header."""
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        archive, _ = hostile_archives.archives(Path(scratch))["corrupt-second-header"]
        with tarfile.open(archive) as bundle:
            assert [member.name for member in bundle] == ["weights.bin"]  # second.bin and third.bin: gone


def test_an_archive_bomb_is_refused_from_its_headers_before_its_data_is_decompressed(tmp_path, monkeypatch):
    monkeypatch.setattr(model_extract, "RATIO_FLOOR_BYTES", 1 << 20)
    for cut_short in (False, True):
        archive = hostile_archives.bomb(tmp_path / f"bomb-{cut_short}.tar.gz", 64, cut_short=cut_short)
        destination = tmp_path / "model"
        with pytest.raises(SpecError) as raised:
            extract_model(archive, destination)
        # Cut short 4 KB in, its data would read as truncated: a bomb it is, from its header alone
        assert "archive bomb" in str(raised.value) and "'zeros.bin'" in str(raised.value), raised.value
        assert not destination.exists()


def test_a_model_of_zeros_under_the_ratio_floor_still_extracts(tmp_path):
    archive = hostile_archives.bomb(tmp_path / "zeros.tar.gz", 4)  # ratio about 1,000, but 4 MiB: a real model
    assert (extract_model(archive, tmp_path / "model") / "zeros.bin").stat().st_size == 4 << 20


# --- metrics ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ['{"accuracy": 0.9, "loss": 1e999}', '{"accuracy": 0.9, "loss": NaN}',
                                  '{"accuracy": 0.9, "loss": 1' + "0" * 400 + "}",
                                  '{"accuracy": 0.9, "loss": -Infinity}'])
def test_a_metric_a_float_cannot_hold_is_refused_naming_the_metric(tmp_path, text):
    path = tmp_path / "metrics.json"
    path.write_text(text)
    with pytest.raises(JobFailed) as raised:
        read_metrics(path)
    assert "loss=" in str(raised.value) and "accuracy=" not in str(raised.value)
    assert len(str(raised.value)) < 1000
    with pytest.raises(SpecError) as refused:
        check_metrics({"accuracy": 0.5, "loss": 10 ** 400})
    assert refused.value.problems[0].path == "metrics.loss"


def test_metrics_that_are_a_fifo_or_nested_too_deep_are_clear_errors(tmp_path):
    fifo = tmp_path / "metrics.json"
    os.mkfifo(fifo)
    with pytest.raises(JobFailed, match="FIFO"):
        read_metrics(fifo)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(JobFailed, match="not valid JSON"):
        read_metrics(deep)


# --- the reader itself ------------------------------------------------------------------------------------------------
def test_the_bounded_reader_takes_no_more_than_asked_and_never_blocks(tmp_path):
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as handle:
        handle.truncate(512 << 20)
    assert len(untrusted.read_bounded(sparse, 4096)) == 4096
    assert len(untrusted.read_tail_bytes(sparse, 100)) == 100
    with pytest.raises(untrusted.UnsafeFile) as too_large:
        untrusted.read_bounded(sparse, 4096, whole=True)
    assert too_large.value.errno == 27  # EFBIG
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would never return
    with pytest.raises(untrusted.UnsafeFile, match="FIFO"):
        untrusted.read_bounded(fifo, 10)
    link = tmp_path / "link"
    link.symlink_to(sparse)
    with pytest.raises(untrusted.UnsafeFile, match="symbolic link"):
        untrusted.read_bounded(link, 10)
    with pytest.raises(untrusted.UnsafeFile, match="character device"):
        untrusted.read_bounded("/dev/zero", 10)


# --- through real jobs ------------------------------------------------------------------------------------------------
def _job(directory: Path, script: str) -> Path:
    source = directory / "src"
    source.mkdir(parents=True, exist_ok=True)
    (source / "train.py").write_text(textwrap.dedent(script))
    spec = directory / "job.yaml"
    spec.write_text("name: hostile\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.m5.large\n"
                    "instance_count: 1\noutput_path: out\n")
    return spec


BASE = 'base = os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")\n'

SPARSE_FAILURE = """import os, sys
""" + BASE + """with open(os.path.join(base, "output", "failure"), "wb") as handle:  # first: the runtime's write loses
    handle.write(b"disk says no\\n")
    handle.truncate(512 << 20)
sys.exit(3)
"""

# Runs `trainops run` and reports, as JSON, its exit code and the largest resident size of any process below it
# (getrusage of the children: the controller, the host's launcher, the runtime, the rank).
MEASURE = """import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=TIMEOUT)
print(json.dumps({"code": done.returncode, "out": done.stdout[-3000:], "err": done.stderr[-3000:],
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
""".replace("TIMEOUT", str(HANG_SECONDS))


@pytest.mark.system
def test_a_sparse_failure_file_of_512_mib_is_read_bounded(tmp_path):
    spec = _job(tmp_path, SPARSE_FAILURE)
    home = tmp_path / "home"
    measured = subprocess.run([sys.executable, "-c", MEASURE, *TRAINOPS, "run", str(spec), "--job-name", NAME],
                              capture_output=True, text=True, timeout=HANG_SECONDS + 30,
                              env={**os.environ, "TRAINOPS_HOME": str(home)})
    result = json.loads(measured.stdout)
    assert result["code"] == 1, result
    assert "internal error" not in result["err"] and "Traceback" not in result["err"], result
    record = json.loads((home / "jobs" / NAME / "status.json").read_text())
    assert record["status"] == "Failed" and record["failure_reason"].startswith("disk says no"), record
    assert len(record["failure_reason"]) <= 1024
    # Taking the file whole costs 512 MiB at least (and its decoded text as much again): ~1 GB in the red team's run.
    assert result["peak_mb"] < 300, result["peak_mb"]


FIFO_FAILURE = """import os, sys
""" + BASE + """os.mkfifo(os.path.join(base, "output", "failure"))  # no writer, no reader: opens of it would block
sys.exit(4)
"""


@pytest.mark.system
def test_a_fifo_left_as_the_failure_file_does_not_hang_the_job(tmp_path):
    home = tmp_path / "home"
    result = cli("run", str(_job(tmp_path, FIFO_FAILURE)), "--job-name", NAME, env={"TRAINOPS_HOME": str(home)},
                 timeout=HANG_SECONDS)
    assert result.returncode == 1, (result.stdout, result.stderr)
    record = json.loads((home / "jobs" / NAME / "status.json").read_text())
    assert record["status"] == "Failed" and "exited with code 4" in record["failure_reason"], record


QUICK = """print("trained", flush=True)
"""


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory):
    """A completed job's home (run once for the FIFO cases, each of which works on a copy)."""
    directory = tmp_path_factory.mktemp("finished")
    home = directory / "home"
    result = cli("run", str(_job(directory, QUICK)), "--job-name", NAME, env={"TRAINOPS_HOME": str(home)})
    assert result.returncode == 0, (result.stdout, result.stderr)
    return directory


def _copy_of(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    import shutil

    shutil.copytree(finished, tmp_path / "copy", symlinks=True)
    return tmp_path / "copy" / "home", tmp_path / "copy" / "job.yaml"


def _fifo_in_place(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


@pytest.mark.system
def test_a_fifo_as_the_controller_lock_hangs_neither_status_logs_nor_run(finished_job, tmp_path):
    home, spec = _copy_of(finished_job, tmp_path)
    job = home / "jobs" / NAME
    record = json.loads((job / "status.json").read_text())
    (job / "status.json").write_text(json.dumps({**record, "status": "InProgress"}))  # as if it were running
    _fifo_in_place(job / ".controller.lock")
    env = {"TRAINOPS_HOME": str(home)}
    status = cli("status", NAME, env=env, timeout=HANG_SECONDS)
    assert status.returncode == 0 and "Failed" in status.stdout, (status.stdout, status.stderr)
    logs = cli("logs", NAME, env=env, timeout=HANG_SECONDS)
    assert logs.returncode == 0 and "trained" in logs.stdout, (logs.stdout, logs.stderr)
    again = cli("run", str(spec), "--job-name", NAME, env=env, timeout=HANG_SECONDS)
    # The job reads Failed (nothing holds its lock), so the run retries it under the next free name.
    assert again.returncode == 0 and "trained" in again.stdout, (again.stdout, again.stderr)
    assert json.loads((home / "jobs" / f"{NAME}-2" / "status.json").read_text())["status"] == "Completed"


@pytest.mark.system
def test_a_fifo_or_a_huge_sparse_file_as_the_status_record_is_a_clear_error(finished_job, tmp_path):
    home, _ = _copy_of(finished_job, tmp_path)
    job = home / "jobs" / NAME
    _fifo_in_place(job / "status.json")
    env = {"TRAINOPS_HOME": str(home)}
    status = cli("status", NAME, env=env, timeout=HANG_SECONDS)
    assert status.returncode == 2 and "FIFO" in status.stderr, (status.stdout, status.stderr)
    (job / "status.json").unlink()
    with open(job / "status.json", "wb") as handle:
        handle.truncate(512 << 20)
    status = cli("status", NAME, env=env, timeout=HANG_SECONDS)
    assert status.returncode == 2 and "larger than" in status.stderr, (status.stdout, status.stderr)


@pytest.mark.system
def test_a_fifo_as_a_host_log_is_named_not_read(finished_job, tmp_path):
    home, _ = _copy_of(finished_job, tmp_path)
    _fifo_in_place(home / "jobs" / NAME / "logs" / "algo-1.log")
    logs = cli("logs", NAME, env={"TRAINOPS_HOME": str(home)}, timeout=HANG_SECONDS)
    assert logs.returncode == 0 and "cannot be shown" in logs.stdout and "FIFO" in logs.stdout, logs


@pytest.mark.system
def test_a_host_log_of_one_endless_line_is_shown_in_bounded_pieces(finished_job, tmp_path):
    """A rank can leave 8 MiB with no line end in its host's log: `logs` shows it in pieces of at most
    LINE_LIMIT_CHARS, never taking the line whole into memory, and the lines after it still."""
    from trainops.backends.local.logs import LINE_LIMIT_CHARS

    home, _ = _copy_of(finished_job, tmp_path)
    with open(home / "jobs" / NAME / "logs" / "algo-1.log", "ab") as handle:
        handle.write(b"x" * (8 << 20) + b"\nafter the flood\n")
    logs = cli("logs", NAME, env={"TRAINOPS_HOME": str(home)}, timeout=HANG_SECONDS)
    assert logs.returncode == 0 and logs.stdout.splitlines()[-1].endswith("after the flood"), logs.stderr
    pieces = [line for line in logs.stdout.splitlines() if "xxxxxxxx" in line]
    assert len(pieces) == (8 << 20) // LINE_LIMIT_CHARS, len(pieces)
    assert max(len(line) for line in pieces) <= LINE_LIMIT_CHARS + 100  # the host's prefix, at most
