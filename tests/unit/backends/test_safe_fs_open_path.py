"""`safe_fs.open_path` walks a path one directory at a time, each opened relative to the last: an exception landing
as it closes the directory it leaves (Ctrl-C) must not make its cleanup close that number a second time, which
would close whatever file has taken the number by then (or fail with EBADF and hide the interrupt)."""

from __future__ import annotations

import os

import pytest

from trainops.backends.hostfs import safe_fs


def test_an_interrupt_while_a_level_is_closed_closes_each_descriptor_once(tmp_path, monkeypatch):
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    open_before = sorted(os.listdir("/proc/self/fd"))
    closed: list[int] = []
    close = os.close

    def interrupted_close(descriptor: int) -> None:
        closed.append(descriptor)
        close(descriptor)
        if len(closed) == 2:  # the level `a` has just been closed, on the way down to `b`
            raise KeyboardInterrupt

    monkeypatch.setattr(safe_fs.os, "close", interrupted_close)
    try:
        with pytest.raises(KeyboardInterrupt):  # not EBADF from closing `a` twice
            safe_fs.open_path(["a", "b", "c"], root)
        open_after = sorted(os.listdir("/proc/self/fd"))
    finally:
        monkeypatch.undo()
        os.close(root)
    assert len(closed) == 3  # the root's duplicate, `a`, then `b` by the cleanup (a number may come round again)
    assert open_after == open_before  # nothing of the walk left open
