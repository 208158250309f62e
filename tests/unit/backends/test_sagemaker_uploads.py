"""What gets uploaded, without S3: file selection, the deterministic tarball, the runtime's files. The uploads
themselves run against moto in tests/system/test_sagemaker_uploads_moto.py."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from trainops.backends.sagemaker.uploads import list_files, runtime_files, source_tarball_bytes
from trainops.errors import SpecError


@pytest.fixture
def source(tmp_path):
    root = tmp_path / "src"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "train.py").write_text("print('train')\n")
    (root / "pkg" / "model.py").write_text("MODEL = 1\n")
    (root / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    outside = tmp_path / "secret.txt"
    outside.write_text("do not ship\n")
    (root / "leak.txt").symlink_to(outside)
    (root / "inside-link.py").symlink_to(root / "train.py")
    (root / "linked-dir").symlink_to(tmp_path)
    return root


def test_list_files_skips_caches_git_and_links_out(source):
    files, skipped = list_files(source)
    assert [name for _, name in files] == ["inside-link.py", "pkg/model.py", "run.sh", "train.py"]
    assert skipped == ["leak.txt", "linked-dir"]


def test_a_missing_directory_names_the_field(tmp_path):
    with pytest.raises(SpecError) as raised:
        list_files(tmp_path / "nope")
    assert raised.value.problems[0].path == "source_dir"


def test_tarball_is_byte_for_byte_deterministic(source):
    first = source_tarball_bytes(source)
    os.utime(source / "train.py", (1, 1))  # times change; the archive must not
    second = source_tarball_bytes(source)
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as archive:
        members = archive.getmembers()
        assert [member.name for member in members] == ["inside-link.py", "pkg/model.py", "run.sh", "train.py"]
        assert {member.mtime for member in members} == {0}
        assert archive.getmember("run.sh").mode == 0o755
        assert archive.getmember("train.py").mode == 0o644
        assert archive.extractfile("pkg/model.py").read() == b"MODEL = 1\n"


def _copy_upload_set(destination: Path) -> list[str]:
    names = []
    for path, name in runtime_files():
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        names.append(name)
    return names


def _contract(base: Path, current: str) -> None:
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps(
        {"current_host": current, "hosts": ["algo-1", "algo-2"], "current_instance_type": "ml.c5.xlarge",
         "network_interface_name": "eth0"}))
    hyperparameters = {"sagemaker_program": "train.py", "epochs": 2,
                       "trainops_distribution": {"type": "torch_distributed"}}
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) for k, v in hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps({"train": {"TrainingInputMode": "File"}}))
    (base / "input" / "data" / "train").mkdir(parents=True)
    (base / "input" / "data" / "trainops_code").mkdir(parents=True)
    (base / "input" / "data" / "trainops_code" / "train.py").write_text("print('hello')\n")


def test_the_upload_set_imports_and_dry_runs_alone(tmp_path):
    """Exactly the files uploaded as the runtime channel, in an otherwise empty directory, with no site-packages and
    no environment of ours: `python -m trainops.runtime launch --dry-run` prints the plan.

    `-E -s -S` rather than `-I -S`: since Python 3.11 `-I` also implies `-P`, which leaves the current directory
    off sys.path; in the container the channel is on PYTHONPATH, here it is the current directory."""
    channel = tmp_path / "trainops_runtime"
    names = _copy_upload_set(channel)
    assert names[0] == "trainops/__init__.py"
    assert all(name == "trainops/__init__.py" or name.startswith("trainops/runtime/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert any(name.endswith("instances.json") for name in names)  # data files travel too
    base = tmp_path / "opt-ml"
    _contract(base, "algo-2")
    result = subprocess.run(
        [sys.executable, "-E", "-s", "-S", "-m", "trainops.runtime", "launch", "--dry-run", "--base-dir", str(base)],
        cwd=channel, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    argv = plan["argv"]
    assert argv[1:3] == ["-m", "trainops.runtime.torch_launcher"]
    assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--master_addr") + 1] == "algo-1"
    assert argv[-3:] == [str(base / "input" / "data" / "trainops_code" / "train.py"), "--epochs", "2"]


def test_the_upload_set_holds_every_module_the_runtime_imports(tmp_path):
    """Every runtime module imports from the upload set alone, with no site-packages (a module reached only at run
    time, such as the health check or the MPI coordination, would otherwise fail on the first real host)."""
    channel = tmp_path / "trainops_runtime"
    names = _copy_upload_set(channel)
    modules = sorted(name[:-3].replace("/", ".").removesuffix(".__init__") for name in names if name.endswith(".py"))
    # __main__ would run the CLI; the stand-ins of AWS's libraries are imported inside a torch rank (torch is there).
    torch_only = ("trainops.runtime.shims.smddp", "trainops.runtime.shims.tsm")
    modules = [module for module in modules if module != "trainops.runtime.__main__" and module not in torch_only]
    assert "trainops.runtime.healthcheck" in modules and "trainops.runtime.errors" in modules
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\nprint('ok')\n"
    result = subprocess.run([sys.executable, "-E", "-s", "-S", "-c", code, *modules], cwd=channel,
                            capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_code_that_imports_trainops_gets_the_runtime_in_its_source_tarball(tmp_path):
    # Under the toolkit launcher the image has no trainops and no runtime channel: the examples' `import
    # trainops.runtime` failed with "No module named 'trainops'" (issue 47). The archive carries the runtime beside
    # the script, only for code that imports it and has no trainops/ of its own.
    import io
    import tarfile

    def members(source):
        with tarfile.open(fileobj=io.BytesIO(source_tarball_bytes(source))) as archive:
            return archive.getnames()

    uses = tmp_path / "uses"
    uses.mkdir()
    (uses / "train.py").write_text("import os\nimport trainops.runtime\n\nctx = trainops.runtime.init()\n")
    names = members(uses)
    assert "train.py" in names and "trainops/__init__.py" in names and "trainops/runtime/__init__.py" in names
    assert names == sorted(names)
    assert {name for name in names if name.startswith("trainops/")} == {relative for _, relative in runtime_files()}

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("import torch  # mentions trainops only in a comment\n")
    assert members(plain) == ["train.py"]

    own = tmp_path / "own"
    (own / "trainops").mkdir(parents=True)
    (own / "trainops" / "__init__.py").write_text("")
    (own / "train.py").write_text("from trainops import runtime\n")
    assert members(own) == ["train.py", "trainops/__init__.py"]
