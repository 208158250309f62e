"""What gets uploaded, without S3: file selection, the deterministic tarball, the runtime's files. The uploads
themselves run against moto in tests/system/test_sagemaker_uploads_moto.py."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

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


def test_runtime_files_are_the_package_init_and_the_runtime():
    names = [name for _, name in runtime_files()]
    assert names[0] == "trainops/__init__.py"
    assert "trainops/runtime/__init__.py" in names
    assert all(name == "trainops/__init__.py" or name.startswith("trainops/runtime/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert any(name.endswith("instances.json") for name in names)  # data files travel too
