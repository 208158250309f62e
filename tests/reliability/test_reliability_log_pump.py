"""The controller's log pump on its own (`trainops.backends.local.pump.LogPump`), fed through a real pipe: long
lines split and marked on safe boundaries, secrets never cut in half, `\\r` states shown live, and failures to
write (a full disk, a MemoryError, a closed console) counted without ever stopping the draining."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

from trainops.backends.local import pump as pump_module
from trainops.backends.local.pump import LINE_LIMIT, LINE_SPLIT_MARK, LogPump


def run_pump(tmp_path: Path, writes: list[bytes], *, secrets: list[str] | None = None, log=None,
             pause: float = 0.0) -> tuple[LogPump, list[str], bytes]:
    read_end, write_end = os.pipe()
    shown: list[str] = []
    pump = LogPump("algo-1", read_end, tmp_path / "algo-1.log", secrets=secrets or [],
                   log=log or shown.append, log_lock=threading.Lock())
    thread = threading.Thread(target=pump.run)
    thread.start()
    for data in writes:
        os.write(write_end, data)
        time.sleep(pause)
    os.close(write_end)
    thread.join(timeout=30)
    os.close(read_end)
    assert not thread.is_alive()
    content = (tmp_path / "algo-1.log").read_bytes() if (tmp_path / "algo-1.log").exists() else b""
    return pump, shown, content


def test_long_line_is_split_at_64_kib_and_marked(tmp_path):
    pump, shown, content = run_pump(tmp_path, [b"a" * (3 * LINE_LIMIT + 10) + b"\nnext\n"])
    lines = content.decode().split("\n")
    assert [len(line) for line in lines[:4]] == [LINE_LIMIT + len(LINE_SPLIT_MARK)] * 3 + [10]
    assert all(line.endswith(LINE_SPLIT_MARK) for line in lines[:3]) and lines[4] == "next"
    assert pump.lines_split == 3 and shown[-1] == "[algo-1] next"


def test_split_never_cuts_a_secret_or_a_utf8_character(tmp_path):
    secret = "s3cr3t-token-value"
    before = LINE_LIMIT - 5  # the secret straddles the 64 KiB boundary
    data = b"a" * before + secret.encode() + "é".encode() * 40000 + b"\n"
    _, shown, content = run_pump(tmp_path, [data], secrets=[secret])
    text = content.decode("utf-8")  # raises if a character was cut in two
    assert secret not in text and "****" in text
    assert "\ufffd" not in text
    assert all(secret not in line for line in shown)


def test_carriage_return_states_are_shown_while_the_bar_is_drawn(tmp_path):
    writes = [f"\rprogress {state}".encode() for state in range(8)] + [b"\ndone\n"]
    _, shown, content = run_pump(tmp_path, writes, pause=0.3)
    states = [line for line in shown if "progress" in line]
    assert len(states) >= 2, shown  # at least one while drawing, not only the final one
    assert shown[-1] == "[algo-1] done"
    assert b"\rprogress 3\r" in content  # the file keeps the bar as written


def test_write_failures_are_counted_and_draining_goes_on(tmp_path, monkeypatch):
    real_write, calls = os.write, {"count": 0}

    def failing_write(descriptor, data):
        calls["count"] += 1
        # Only the log file fails (os is one module: the test's own pipe writes pass through here too).
        if stat.S_ISREG(os.fstat(descriptor).st_mode) and calls["count"] % 2:
            raise OSError(28, "No space left on device")
        return real_write(descriptor, data)

    monkeypatch.setattr(pump_module.os, "write", failing_write)
    writes = [b"line %d\n" % number * 2000 for number in range(20)]
    pump, shown, _ = run_pump(tmp_path, writes)
    assert len(shown) == 20 * 2000  # the console got every line although the file lost some
    assert pump.lost_lines > 0 and "No space left" in pump.summary()


def test_a_memory_error_or_a_closed_console_never_stops_the_pump(tmp_path):
    seen = []

    def log(line):
        if len(seen) % 3 == 0:
            seen.append(line)
            raise MemoryError("planted")
        seen.append(line)

    pump, _, content = run_pump(tmp_path, [b"line %d\n" % number for number in range(30)], log=log, pause=0.001)
    assert content.count(b"\n") == 30  # the file has every line
    assert pump.console_lost > 0 and "MemoryError" in pump.summary()
