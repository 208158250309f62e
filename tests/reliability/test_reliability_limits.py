"""Issue 39, class 4: the limits of this machine end in clear errors, never `internal error` or a failure deep inside
a host: a full staging disk (a real tmpfs, out of blocks or of inodes), the per-user process limit (another local
user, made with useradd, under `prlimit --nproc`), a NUL in a hyperparameter. (An S3 object that changes or vanishes
while it is staged: tests/unit/backends/test_local_staging_s3.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from local_breaks import cli
from support import other_user
from support.project_copy import readable_project

from trainops.errors import JobFailed

REPOSITORY = Path(__file__).resolve().parents[2]

# In a mount namespace of its own: a 1 MiB tmpfs (too small for the 20 files of 300 KB), then a roomy one with four
# inodes (the first files fit, then nothing more can be created). Prints what each `trainops stage` said.
FULL_DISKS = r"""
import json, subprocess, sys
source, small, few = sys.argv[1], sys.argv[2], sys.argv[3]
said = {}
for label, target, options in (("blocks", small, "size=1m,mode=0700"), ("inodes", few, "size=20m,nr_inodes=4,mode=0700")):
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "trainops-test", target], check=True)
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "stage", source, target], capture_output=True,
                          text=True, timeout=120)
    said[label] = [done.returncode, done.stdout + done.stderr, sorted(__import__("os").listdir(target))]
print(json.dumps(said))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="mounting a tmpfs needs root")
def test_a_full_staging_disk_is_a_clear_error_before_or_while_copying(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for number in range(20):
        (source / f"part-{number:02}.bin").write_bytes(os.urandom(300_000))
    small, few = tmp_path / "small", tmp_path / "few"
    small.mkdir()
    few.mkdir()
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", FULL_DISKS,
                           str(source), str(small), str(few)], capture_output=True, text=True, timeout=300,
                          cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    code, text, left = said["blocks"]
    assert code == 1 and "has 1.0 MiB free, but the 20 files to stage there need 5.7 MiB" in text, text
    assert "nothing was copied" in text and left == [], left  # refused before the first byte
    code, text, left = said["inodes"]
    assert code == 1 and "internal error" not in text and "is full (No space left on device)" in text, text
    assert not [name for name in left if name.startswith(".trainops-stage-")], left  # no temporary left behind


def test_a_nul_in_a_hyperparameter_is_refused_when_the_job_is_validated(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('ran')\n")
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "nul", "entry_point": "train.py", "source_dir": "src",
                                "instance_type": "ml.m5.large", "instance_count": 1,
                                "hyperparameters": {"lr": "0.1", "note": "a\u0000b"}}))
    home = tmp_path / "home"
    result = cli("run", str(spec), "--job-name", "nul", env={"TRAINOPS_HOME": str(home)})
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "hyperparameters: 'note': contains a NUL character" in result.stderr, result.stderr
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())  # nothing was started


# --- the per-user process limit ---------------------------------------------------------------------------------------
def _as_rival_with_limit(limit: int, *command: str, home: Path) -> subprocess.CompletedProcess:
    """``command`` run by the other user under ``prlimit --nproc=limit``, with a Python it can run and trainops
    importable from the copy the other user can read (`rival_home`; never the checkout's own path, which may lie
    where no other user can reach: a 0700 home)."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TRAINOPS_HOME": str(home / "state"),
                   "PYTHONPATH": (home / PYTHONPATH_FILE).read_text()}
    uid, gid = other_user.rival()
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "env", "-i",
                           *(f"{key}={value}" for key, value in environment.items()), "prlimit", f"--nproc={limit}",
                           python, *command], capture_output=True, text=True, timeout=180, cwd=home)


needs_rival_python = pytest.mark.skipif(
    not other_user.available() or not os.path.exists(f"/usr/bin/python{sys.version_info.major}."
                                                     f"{sys.version_info.minor}"),
    reason="needs root with useradd and setpriv, and a system Python of this version the other user may run")


#: The file of `rival_home` that holds the PYTHONPATH of the other user's copy of trainops.
PYTHONPATH_FILE = "pythonpath"


@pytest.fixture
def rival_home():
    with readable_project() as pythonpath:
        yield from _rival_home(pythonpath)


def _rival_home(pythonpath: str):
    home = other_user.shared_directory("trainops-rival-home-", 0o755)
    (home / PYTHONPATH_FILE).write_text(pythonpath)
    uid, gid = other_user.rival()
    os.chown(home, uid, gid)
    source = home / "src"
    source.mkdir()
    (source / "train.py").write_text("print('RANK-RAN', flush=True)\n")
    (home / "job.yaml").write_text("name: limited\nentry_point: train.py\nsource_dir: src\n"
                                   "instance_type: ml.m5.large\ninstance_count: 2\noutput_path: out\n")
    for path in (source, source / "train.py", home / "job.yaml"):
        os.chown(path, uid, gid)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_rival_python
def test_a_process_limit_that_leaves_no_room_for_the_job_is_refused_when_validated(rival_home):
    result = _as_rival_with_limit(12, "-m", "trainops.cli", "run", "job.yaml", "--job-name", "limited",
                                  home=rival_home)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "processes: the per-user process limit (ulimit -u, RLIMIT_NPROC) is 12" in result.stderr, result.stderr
    assert "internal error" not in result.stderr and not (rival_home / "state" / "jobs" / "limited").exists()
    roomy = _as_rival_with_limit(200, "-m", "trainops.cli", "run", "job.yaml", "--job-name", "limited",
                                 home=rival_home)
    assert roomy.returncode == 0 and roomy.stdout.count("RANK-RAN") == 2, (roomy.stdout, roomy.stderr)


@needs_rival_python
def test_a_host_that_cannot_fork_says_the_process_limit(rival_home):
    """A host's launcher that meets the limit (one process allowed: it cannot fork its host's init) says so."""
    copy = Path((rival_home / PYTHONPATH_FILE).read_text().split(":")[0])  # the copy's code, not the checkout's
    launcher = copy / "trainops" / "backends" / "local" / "host_init.py"
    result = _as_rival_with_limit(1, "-I", "-S", str(launcher), "user-pid", str(rival_home / "report"), "/bin/true",
                                  home=rival_home)
    assert result.returncode == 127, (result.stdout, result.stderr)
    assert "could not start: the per-user process limit (ulimit -u, RLIMIT_NPROC: 1" in result.stderr, result.stderr


def test_a_controller_that_cannot_fork_fails_the_job_saying_the_limit(tmp_path, monkeypatch):
    """The controller's own fork refused (EAGAIN, as the kernel answers at the limit): a `JobFailed` naming the limit,
    and the record says so as a failure before the script started (failure class `setup`), not an internal error."""
    import errno

    from trainops.backends.local import job as job_module
    from trainops.backends.local.job import LocalJob
    from trainops.backends.local.job_input import from_spec
    from trainops.backends.vocabulary import classify_result
    from trainops.spec.loader import load_job_spec

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('ran')\n")
    (tmp_path / "job.yaml").write_text("name: forkless\nentry_point: train.py\nsource_dir: src\n"
                                       "instance_type: ml.m5.large\ninstance_count: 1\n")

    def refused(*arguments, **options):
        raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

    monkeypatch.setattr(job_module.subprocess, "Popen", refused)
    job = LocalJob(from_spec(load_job_spec(str(tmp_path / "job.yaml"))), "forkless", workdir=tmp_path / "work",
                   log=lambda line: None)
    with pytest.raises(JobFailed, match="could not start its processes: the machine refused to start another process"):
        job.run()
    record = json.loads((tmp_path / "work" / "jobs" / "forkless" / "status.json").read_text())
    assert record["status"] == "Failed", record
    assert record["failure_reason"].startswith("before the training script started: the machine refused"), record
    assert classify_result(record).failure_class == "setup"

