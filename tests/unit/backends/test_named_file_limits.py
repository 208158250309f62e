"""The file of named backends ($TRAINOPS_BACKENDS) is read as a spec file is (issue 48 item 3): the spec loader's
limits (size, aliases, depth, values), a regular file only, never waited on; each refusal a `SpecError` naming the
file and the variable. A read that waits (a FIFO with no writer) is caught by a bounded join, not a timed
assertion."""

from __future__ import annotations

import os
import threading

import pytest

from trainops.backends.named_file import named_backends
from trainops.errors import SpecError


def bounded(call, seconds: float = 60.0):
    """``call()``'s outcome (a value or the error it raised) from a thread that must return."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the read of the file of named backends waited"
    return outcome[0]


def refusal(monkeypatch, path) -> str:
    monkeypatch.setenv("TRAINOPS_BACKENDS", str(path))
    error = bounded(named_backends)
    assert isinstance(error, SpecError), error
    text = str(error)
    assert str(path) in text and "$TRAINOPS_BACKENDS" in text
    return text


def test_a_fifo_is_refused_without_waiting_for_a_writer(monkeypatch, tmp_path):
    os.mkfifo(tmp_path / "backends.yaml")
    assert "is a FIFO" in refusal(monkeypatch, tmp_path / "backends.yaml")


def test_a_device_that_never_ends_is_refused_unread(monkeypatch):
    assert "is a device" in refusal(monkeypatch, "/dev/zero")


def test_dev_null_is_no_named_backends(monkeypatch):
    monkeypatch.setenv("TRAINOPS_BACKENDS", os.devnull)
    assert bounded(named_backends) == {}


def test_a_file_larger_than_a_spec_file_may_be_is_refused_unparsed(monkeypatch, tmp_path):
    path = tmp_path / "backends.yaml"
    with open(path, "wb") as handle:  # 200 MB, sparse: what a reader would parse for seconds
        handle.truncate(200 * 1024 * 1024)
    assert "is larger than 1,048,576 bytes" in refusal(monkeypatch, path)


def test_an_alias_bomb_is_refused_by_the_loaders_limits(monkeypatch, tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 9)]
    (tmp_path / "backends.yaml").write_text("\n".join(lines) + "\nhpc: {backend: slurm, options: {x: *a8}}\n")
    text = refusal(monkeypatch, tmp_path / "backends.yaml")
    assert "is not YAML trainops reads" in text


def test_a_good_file_still_reads(monkeypatch, tmp_path):
    (tmp_path / "backends.yaml").write_text("hpc:\n  backend: slurm\n  options: {shared_dir: /fsx/t}\n")
    monkeypatch.setenv("TRAINOPS_BACKENDS", str(tmp_path / "backends.yaml"))
    assert bounded(named_backends)["hpc"].options == {"shared_dir": "/fsx/t"}


@pytest.mark.parametrize("text", [b"\xff\xfe", b"hpc:\0\n"])
def test_bytes_that_are_not_text_are_refused(monkeypatch, tmp_path, text):
    (tmp_path / "backends.yaml").write_bytes(text)
    refusal(monkeypatch, tmp_path / "backends.yaml")
