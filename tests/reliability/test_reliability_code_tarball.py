"""Issue 39, class 2, for the runtime's source tarball (an ``s3://.../sourcedir.tar.gz`` source_dir, unpacked by
`trainops.runtime.contract.unpack_code_tarball` on every host): headers that lie are refused before anything is
written, naming the member, as the model archive extractor refuses them (the archives of `hostile_archives`)."""

from __future__ import annotations

import io
import json
import os
import tarfile

import hostile_archives
import pytest

from trainops.runtime import code_tarball
from trainops.runtime.contract import CODE_CHANNEL, ContractError, unpack_code_tarball


def _contract(base):
    """A host's contract directory whose code channel is to hold one tarball; returns that channel."""
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    channel = base / "input" / "data" / CODE_CHANNEL
    channel.mkdir(parents=True)
    return channel


def _refused(base, member: str) -> str:
    with pytest.raises(ContractError) as raised:
        unpack_code_tarball(str(base))
    message = str(raised.value)
    assert repr(member) in message and "cannot unpack the code tarball" in message, message
    code = base / "code"
    assert not code.exists() or not any(code.iterdir()), sorted(os.listdir(code))  # nothing unpacked
    return message


def test_an_archive_of_under_300_bytes_with_a_sparse_member_of_1_gib_is_refused_naming_it(tmp_path):
    channel = _contract(tmp_path / "ml")
    archive = channel / "sourcedir.tar.gz"
    archive.write_bytes(hostile_archives.gzipped(hostile_archives.sparse_member("holes.bin", 1 << 30)
                                                 + hostile_archives.end()))
    assert archive.stat().st_size < 300  # the attack: 247 bytes that wrote 1 GiB
    assert "sparse" in _refused(tmp_path / "ml", "holes.bin")


@pytest.mark.parametrize("case", ["sparse", "negative-size", "huge-mtime", "negative-mtime", "nan-mtime",
                                  "corrupt-second-header", "truncated-gzip"])
def test_a_source_tarball_whose_headers_lie_is_refused_naming_the_member(tmp_path, case):
    channel = _contract(tmp_path / "ml")
    made, member = hostile_archives.archives(tmp_path)[case]
    made.rename(channel / "sourcedir.tar.gz")
    _refused(tmp_path / "ml", member)


def test_a_member_over_the_size_budget_is_refused_before_its_data_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv(code_tarball.LIMIT_VARIABLE, str(1 << 20))
    channel = _contract(tmp_path / "ml")
    # Cut 4 KB in: had the data been read, it would be a truncated stream; the header alone refuses it.
    hostile_archives.bomb(channel / "sourcedir.tar.gz", 8, cut_short=True)
    assert "over the limit" in _refused(tmp_path / "ml", "zeros.bin")


def test_an_archive_bomb_is_refused_by_ratio(tmp_path, monkeypatch):
    monkeypatch.setattr(code_tarball, "RATIO_FLOOR_BYTES", 1 << 20)
    channel = _contract(tmp_path / "ml")
    hostile_archives.bomb(channel / "sourcedir.tar.gz", 8)
    assert "a bomb" in _refused(tmp_path / "ml", "zeros.bin")


@pytest.mark.parametrize("name", ["../escape.py", "/tmp/absolute-escape.py", "lib/../../escape.py"])
def test_a_path_escape_is_refused_and_nothing_is_written_outside(tmp_path, name):
    channel = _contract(tmp_path / "ml")
    with tarfile.open(channel / "sourcedir.tar.gz", "w:gz") as bundle:
        for member, data in (("train.py", b"print(1)\n"), (name, b"bad\n")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    _refused(tmp_path / "ml", name)
    assert not (tmp_path / "ml" / "escape.py").exists() and not (tmp_path / "escape.py").exists()
    assert not os.path.exists("/tmp/absolute-escape.py")


def test_a_bad_limit_setting_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv(code_tarball.LIMIT_VARIABLE, "lots")
    channel = _contract(tmp_path / "ml")
    with tarfile.open(channel / "sourcedir.tar.gz", "w:gz") as bundle:
        bundle.addfile(tarfile.TarInfo("train.py"), io.BytesIO(b""))
    with pytest.raises(ContractError, match=code_tarball.LIMIT_VARIABLE):
        unpack_code_tarball(str(tmp_path / "ml"))
