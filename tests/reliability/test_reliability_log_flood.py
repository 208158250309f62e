"""Issue 39, class 4: under a log flood from 8 ranks, every rank's last lines reach the console and `trainops logs`.

The console is a pipe read slowly (as a terminal over a slow link is): before the fix the pumps waited for it, the
ranks' relays waited for the pumps, and when the job ended the hosts' launchers stopped the relays with their last
lines still unwritten (ranks 0 and 4 lost theirs, from both the console and the log files).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from local_breaks import TRAINOPS, cli

from trainops.backends.local import host_console
from trainops.backends.local.host_console import HostConsole

SCRIPT = """import os
rank = os.environ.get("RANK", "?")
line = f"rank {rank} " + "x" * 150
for number in range(int(os.environ["LINES"])):
    print(line, number)
print(f"LAST-LINE-OF-RANK-{rank}", flush=True)
"""

# Reads the console at about 80 KB/s into a file (a slow terminal): the 1.3 MB of the flood take some 16 s.
SLOW_READER = """import os, sys, time
with open(sys.argv[1], "wb") as out:
    while True:
        data = os.read(0, 8192)
        if not data:
            break
        out.write(data)
        time.sleep(0.1)
"""


@pytest.mark.system
@pytest.mark.timeout(600)
def test_every_ranks_last_line_reaches_a_slow_console_and_the_logs(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    spec = tmp_path / "job.yaml"
    spec.write_text("name: flood\nentry_point: train.py\nsource_dir: src\ninstance_type: ml.g5.12xlarge\n"
                    "instance_count: 2\ndistribution: {type: torch_distributed, processes_per_host: 4}\n"
                    "output_path: out\nenvironment: {LINES: '1000'}\n")
    env = {**os.environ, "TRAINOPS_HOME": str(tmp_path / "home")}
    console = tmp_path / "console.txt"
    run = subprocess.Popen([*TRAINOPS, "run", str(spec), "--job-name", "flood"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=env)
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER, str(console)], stdin=run.stdout)
    run.stdout.close()  # the reader holds it now
    assert run.wait(timeout=500) == 0 and reader.wait(timeout=60) == 0
    shown = console.read_text(errors="replace")
    logs = cli("logs", "flood", env={"TRAINOPS_HOME": str(tmp_path / "home")}).stdout
    for rank in range(8):
        assert f"LAST-LINE-OF-RANK-{rank}" in shown, (rank, shown[-2000:])
        assert f"LAST-LINE-OF-RANK-{rank}" in logs, rank
    assert sum("x" * 150 in line for line in logs.splitlines()) == 8 * 1000  # every line, in the log files


def test_a_console_that_falls_behind_leaves_out_the_oldest_lines_and_shows_each_sources_last_ones(monkeypatch):
    monkeypatch.setattr(host_console, "QUEUE_LINES", 100)
    printed: list[str] = []
    release = threading.Event()

    def slow(line: str) -> None:
        release.wait(10)
        printed.append(line)

    console = HostConsole(slow)
    for number in range(20):
        console.put(f"[algo-1 rank 0] early {number}")  # rank 0 ends early...
    for number in range(1000):
        console.put(f"[algo-2 rank 1] flood {number}")  # ...then rank 1 floods past the queue
    release.set()
    console.close()
    assert console.left_out > 0 and console.lost == 0
    note = next(index for index, line in enumerate(printed) if "the console could not keep up" in line)
    assert f"{console.left_out} line(s) were not shown" in printed[note]
    after = printed[note + 1:]
    assert after == [f"[algo-1 rank 0] early {number}" for number in range(10, 20)]  # its last 10, left out before
    assert printed[note - 1] == "[algo-2 rank 1] flood 999"  # the flood's own last lines were printed in order


def test_a_console_still_behind_when_the_job_ends_shows_each_sources_last_line_not_the_backlog(monkeypatch):
    """Issue 48 item 7: at the end of a job the console is given `CLOSE_SECONDS`; one still behind then (a slow
    terminal) had its whole backlog dropped, the last lines of the ranks that ended last with it (`trainops logs`
    kept them). Now the backlog is left out instead and the note and each source's last lines go first. The console
    here is held until the end has given up on it (bounds of 0 s), then let go."""
    monkeypatch.setattr(host_console, "LAST_LINES_SECONDS", 0.0, raising=False)
    printed: list[str] = []
    release = threading.Event()

    def slow(line: str) -> None:
        release.wait(60)
        printed.append(line)

    console = HostConsole(slow)
    for rank in range(8):
        for number in range(200):
            console.put(f"[algo-{1 + rank // 4} rank {rank}] flood {number}")
        console.put(f"[algo-{1 + rank // 4} rank {rank}] LAST-LINE-OF-RANK-{rank}")
    console.close(timeout=0.0)  # the end's bound: the console is still behind, held in its first line
    release.set()  # the console reads again: what the end queued for it is printed
    console._thread.join(60)
    assert not console._thread.is_alive()
    for rank in range(8):
        assert f"[algo-{1 + rank // 4} rank {rank}] LAST-LINE-OF-RANK-{rank}" in printed, (rank, printed[-20:])
    assert any("the console could not keep up" in line for line in printed)
    assert len(printed) < 200  # the backlog was left out (the log files have it), not printed before the last lines


def test_a_line_that_comes_after_the_end_is_printed_not_queued_for_a_stopped_printer():
    printed: list[str] = []
    console = HostConsole(printed.append)
    console.put("[algo-1 rank 0] before the end")
    console.close()
    console.put("[algo-1 rank 0] a pump that outlived its bound")
    assert printed == ["[algo-1 rank 0] before the end", "[algo-1 rank 0] a pump that outlived its bound"]
