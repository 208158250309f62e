"""The staging-at-scale row of RELIABILITY.md (issue 15, item 14), measured for bench/reliability.py.

100,000 small files (209 MB) staged as a command, `trainops stage` against `cp -r` (first stage) and `rsync -a`
(re-stage of the unchanged tree), three rounds each, alternating which goes first, on tmpfs (/dev/shm) where there
is one: no slowdown left by earlier deletions, as ext4 has (bench/staging.py measures both file systems, both tree
shapes, as a command and in-process, with more rounds; its table is in bench/README.md). The timers and the tree are
bench/staging.py's own. Beside them runs the floor (bench/staging_floor.py): the system calls a one-process Python
stage must make, in a bare loop, in the same rounds.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import staging as bench

FLOOR = str(Path(__file__).with_name("staging_floor.py"))

FILES = 100_000
ROUNDS = 3
WORKERS = 1


def _summary(times: list[list]) -> dict:
    ours, theirs, floor = times
    return {"floor": statistics.median(wall for wall, _, _ in floor),
            "floor_ratio": statistics.median(low[0] / other[0] for low, other in zip(floor, theirs, strict=True)),
            "ours": statistics.median(wall for wall, _, _ in ours),
            "theirs": statistics.median(wall for wall, _, _ in theirs),
            "ratio": statistics.median(mine[0] / other[0] for mine, other in zip(ours, theirs, strict=True)),
            "peak_mb": max(rss for _, _, rss in ours) / 1e6,
            # CPU seconds of each command (user + system, its children included): what the load does not change
            "cpu_ours": statistics.median(cpu for _, cpu, _ in ours),
            "cpu_theirs": statistics.median(cpu for _, cpu, _ in theirs)}


def measure() -> dict:
    """First stage and re-stage of the small-files tree, as a command, against cp -r and rsync -a."""
    scratch = Path(tempfile.mkdtemp(prefix="reliability-staging-",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    bench._remove_between_runs["on"] = True  # each first-stage copy goes before the next is made (tmpfs: memory)
    try:
        source = scratch / "source"
        megabytes = bench.build_small_tree(source, FILES) / 1e6
        copy = bench.command_timer(lambda: ["cp", "-r", str(source), str(bench.fresh(scratch / "copied"))])
        ours = bench.command_timer(lambda: bench.stage_command(source, bench.fresh(scratch / "staged"), WORKERS))
        floor = bench.command_timer(lambda: [sys.executable, FLOOR, "first", str(source),
                                             str(bench.fresh(scratch / "floor"))])
        first = _summary(bench.in_turn([ours, copy, floor], ROUNDS))
        restage = None
        if shutil.which("rsync"):
            restaged, synced, floored = scratch / "restaged", scratch / "synced", scratch / "floored"
            bench.command_timer(lambda: bench.stage_command(source, restaged, WORKERS))()
            bench.command_timer(lambda: ["rsync", "-a", f"{source}/", f"{synced}/"])()
            bench.command_timer(lambda: [sys.executable, FLOOR, "first", str(source), str(floored)])()
            restage = _summary(bench.in_turn([
                bench.command_timer(lambda: bench.stage_command(source, restaged, WORKERS)),
                bench.command_timer(lambda: ["rsync", "-a", f"{source}/", f"{synced}/"]),
                bench.command_timer(lambda: [sys.executable, FLOOR, "restage", str(source), str(floored)])], ROUNDS))
        return {"files": FILES, "megabytes": megabytes, "file_system": bench.file_system_type(scratch),
                "rounds": ROUNDS, "workers": WORKERS, "first": first, "restage": restage}
    finally:
        bench._remove_between_runs["on"] = False
        shutil.rmtree(scratch, ignore_errors=True)


def render_row(section: dict) -> str:
    first, restage = section["first"], section["restage"]
    measured = (f"first stage {first['ours']:.2f} s against `cp -r` {first['theirs']:.2f} s: **{first['ratio']:.2f}x**, "
                f"CPU {first['cpu_ours']:.2f} s against {first['cpu_theirs']:.2f} s, peak {first['peak_mb']:.0f} MB "
                f"(floor {first['floor']:.2f} s: {first['floor_ratio']:.2f}x); ")
    if restage is None:
        measured += "re-stage: rsync is not installed (`apt-get install -y rsync`)"
        met = False
    else:
        measured += (f"re-stage {restage['ours']:.2f} s against `rsync -a` {restage['theirs']:.2f} s: "
                     f"**{restage['ratio']:.2f}x**, CPU {restage['cpu_ours']:.2f} s against "
                     f"{restage['cpu_theirs']:.2f} s, peak {restage['peak_mb']:.0f} MB (floor {restage['floor']:.2f} s: "
                     f"{restage['floor_ratio']:.2f}x)")
        met = first["ratio"] <= 1.5 and restage["ratio"] <= 1.0
    return (f"| 15.14 | Staging {section['files']:,} small files ({section['megabytes']:.0f} MB) as a command, "
            f"one process, {section['file_system']}, {section['rounds']} alternating rounds | "
            f"{measured} | first stage <= 1.5x `cp -r`, re-stage <= 1.0x `rsync -a` | "
            f"{'met' if met else '**MISSED**'} | `bench/staging.py` (ext4 and tmpfs, both shapes: bench/README.md); floor: "
            f"the same system calls in a bare Python loop, `bench/staging_floor.py` |")
