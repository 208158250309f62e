"""Issue 24, break 3: the registry on another file system, on a full disk, on a read-only one.

`copy_file_range` refuses some pairs of file systems (EXDEV on kernels before 5.19 across mounts, EOPNOTSUPP,
EINVAL, ENOSYS on some): the copy falls back to reading and writing. A full disk or a read-only registry is a clear
error, and no version (or half of one) is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.backends.local.registry import LocalRegistry
from trainops.errors import JobFailed, SpecError


def _artifact(tmp_path: Path, size: int = 300_000) -> Path:
    path = tmp_path / "model.tar.gz"
    path.write_bytes(os.urandom(size))
    return path


def _leftovers(root: Path) -> list[str]:
    """Everything under the registry but the group's directory, its lock file and its (empty) staging directory."""
    if not root.exists():
        return []
    return sorted(str(path.relative_to(root)) for path in root.rglob("*")
                  if path.name != ".lock" and not (path.is_dir() and path.name in ("g", ".staging")))


@pytest.mark.parametrize("code", [errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS])
def test_a_copy_that_copy_file_range_refuses_falls_back_to_a_plain_copy(tmp_path, monkeypatch, code):
    def refuse(*_arguments, **_options):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    artifact = _artifact(tmp_path)
    model_dir = tmp_path / "model"
    (model_dir / "sub").mkdir(parents=True)
    (model_dir / "sub" / "weights.bin").write_bytes(os.urandom(70_000))
    registry = LocalRegistry(tmp_path / "registry")
    first = registry.register(group="g", model_artifact=str(artifact), metrics={"a": 1.0})
    assert Path(first.model_artifact).read_bytes() == artifact.read_bytes()
    second = registry.register(group="g", model_artifact=str(model_dir), metrics={"a": 1.0})
    assert (Path(second.model_artifact) / "sub" / "weights.bin").read_bytes() == \
        (model_dir / "sub" / "weights.bin").read_bytes()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_registry_disk_is_a_clear_error_leaving_no_version(tmp_path, monkeypatch, code):
    def full(*_arguments, **_options):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", full, raising=False)
    root = tmp_path / "registry"
    with pytest.raises(JobFailed, match="full") as raised:
        LocalRegistry(root).register(group="g", model_artifact=str(_artifact(tmp_path)), metrics={"a": 1.0})
    assert str(root) in str(raised.value) and "nothing was registered" in str(raised.value)
    assert _leftovers(root) == []


def test_a_read_only_registry_is_a_clear_error_naming_the_directory(tmp_path, monkeypatch):
    real_mkdir = os.mkdir

    def read_only(path, *arguments, **options):
        if "registry" in os.fspath(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real_mkdir(path, *arguments, **options)

    monkeypatch.setattr(os, "mkdir", read_only)
    root = tmp_path / "registry"
    with pytest.raises(SpecError) as raised:
        LocalRegistry(root).register(group="g", model_artifact=str(_artifact(tmp_path)), metrics={"a": 1.0})
    assert raised.value.problems[0].path == "registry_dir" and "read-only" in str(raised.value).lower()
    assert not root.exists() or _leftovers(root) == []


# In a mount namespace of its own: a 256 KiB tmpfs as the registry (a real ENOSPC), then the same tmpfs made
# read-only (a real EROFS). Prints what each registration raised.
REAL_DISKS = r"""
import json, os, subprocess, sys
from pathlib import Path
from trainops.backends.local.registry import LocalRegistry
root, artifact, small = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
root.mkdir()
# mode 0700: a registry is its user's alone (a tmpfs's root is world-writable by default, which is refused)
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "trainops-test", str(root)], check=True)
outcome = {}
for label, source in (("full", artifact), ("fits", small)):
    try:
        version = LocalRegistry(root).register(group="g", model_artifact=source, metrics={"a": 1.0})
        outcome[label] = ["ok", version.version]
    except Exception as error:
        outcome[label] = [type(error).__name__, str(error)]
    outcome[label + "_left"] = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != ".lock")
subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
try:
    LocalRegistry(root).register(group="g2", model_artifact=small, metrics={"a": 1.0})
    outcome["read_only"] = ["ok", ""]
except Exception as error:
    outcome["read_only"] = [type(error).__name__, str(error)]
print(json.dumps(outcome))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="mounting a tmpfs needs root")
def test_a_real_full_and_read_only_registry_disk(tmp_path):
    artifact = _artifact(tmp_path, 1_000_000)
    small = tmp_path / "small.tar.gz"
    small.write_bytes(b"x" * 1000)
    result = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", REAL_DISKS,
                             str(tmp_path / "registry"), str(artifact), str(small)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["full"][0] == "JobFailed" and "full" in outcome["full"][1], outcome
    assert outcome["full_left"] == ["g", "g/.staging"], outcome  # no version, no half-copied file
    assert outcome["fits"] == ["ok", 1], outcome  # the failed one used no number
    assert outcome["read_only"][0] == "SpecError" and "read-only" in outcome["read_only"][1].lower(), outcome
