"""Staging benchmark: `trainops stage` against `cp -r` (first stage) and `rsync -a` (re-stage of an unchanged tree).

Builds a tree of 2,000 files / 200 MB (sizes spread from 4 KB to ~1 MB over 20 directories, random bytes, fixed
seed) in a temporary directory, then times, side by side in one run and in alternating order:

- first stage into an empty directory: ``trainops stage SRC DST --quiet`` vs ``cp -r SRC DST`` (target <= 1.5x);
- re-stage of the unchanged tree: ``trainops stage SRC DST --quiet`` vs ``rsync -a SRC/ DST/`` (target <= 1.0x).

Each is measured twice: as the command (a new Python process each time, as a user types it) and as `stage_tree`
called in a running process (how the stage step runs inside a pipeline, an Airflow task or a KFP component). The
source is in the page cache for every run, ``sync`` runs (untimed) before each, and each figure is the median of
``--repeat`` runs. ``--workers 2,4,8`` adds a sweep of the first stage over worker
counts. Prints a Markdown table. rsync is needed for the second row: ``apt-get install -y rsync``.

    .venv/bin/python bench/staging.py [--repeat 5] [--files 2000] [--megabytes 200] [--workers 8]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build_tree(root: Path, files: int, total_bytes: int, seed: int = 4) -> int:
    """Write ``files`` files of about ``total_bytes`` in all under ``root``; return the exact byte count."""
    generator = random.Random(seed)
    weights = [generator.lognormvariate(0, 1) for _ in range(files)]
    scale = total_bytes / sum(weights)
    written = 0
    block = generator.randbytes(4 * 1024 * 1024)
    for index, weight in enumerate(weights):
        size = max(4096, int(weight * scale))
        path = root / f"shard-{index % 20:02d}" / f"sample-{index:05d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        offset = generator.randrange(0, len(block))
        data = (block[offset:] + block[:offset]) * (size // len(block) + 1)
        path.write_bytes(data[:size])
        written += size
    return written


def timed(command: list[str]) -> float:
    """Seconds one command takes; fails loudly when it does not exit 0."""
    os.sync()  # start each run with no dirty pages of the previous one still being written back
    started = time.perf_counter()
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {completed.returncode}: {completed.stderr.strip()}")
    return elapsed


def timed_in_process(source: Path, destination: Path, workers: int) -> float:
    """Seconds `stage_tree` takes when called from a running process (the stage step in a pipeline, a DAG task)."""
    from trainops.backends.local.staging import stage_tree

    os.sync()
    started = time.perf_counter()
    report = stage_tree(str(source), str(destination), workers=workers, progress=False)
    elapsed = time.perf_counter() - started
    if not report.ok:
        raise SystemExit(f"stage_tree failed: {report.problem_lines()[:5]}")
    return elapsed


def trainops_stage(source: Path, destination: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "trainops.cli", "stage", str(source), str(destination), "--quiet",
            "--workers", str(workers)]


def fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def ours_runner(in_process: bool, workers: int):
    """A function (source, destination) -> seconds: the command, or `stage_tree` in this process."""
    if in_process:
        return lambda source, destination: timed_in_process(source, destination, workers)
    return lambda source, destination: timed(trainops_stage(source, destination, workers))


def first_stage(source: Path, work: Path, repeat: int, workers: int, in_process: bool) -> tuple[list[float], list[float]]:
    """Times of trainops staging and ``cp -r`` into an empty directory, alternating which goes first."""
    run_ours = ours_runner(in_process, workers)
    ours, theirs = [], []
    for round_number in range(repeat):
        pair = [("ours", lambda: run_ours(source, fresh(work / "staged"))),
                ("theirs", lambda: timed(["cp", "-r", str(source), str(fresh(work / "copied"))]))]
        for who, run in (pair if round_number % 2 == 0 else pair[::-1]):
            (ours if who == "ours" else theirs).append(run())
    return ours, theirs


def restage(source: Path, work: Path, repeat: int, workers: int, in_process: bool) -> tuple[list[float], list[float]]:
    """Times of re-staging an unchanged tree: trainops vs ``rsync -a``, both already up to date."""
    run_ours = ours_runner(in_process, workers)
    staged, synced = work / "restaged", work / "synced"
    timed(trainops_stage(source, fresh(staged), workers))
    timed(["rsync", "-a", f"{source}/", f"{fresh(synced)}/"])
    ours, theirs = [], []
    for round_number in range(repeat):
        pair = [("ours", lambda: run_ours(source, staged)),
                ("theirs", lambda: timed(["rsync", "-a", f"{source}/", f"{synced}/"]))]
        for who, run in (pair if round_number % 2 == 0 else pair[::-1]):
            (ours if who == "ours" else theirs).append(run())
    return ours, theirs


def row(label: str, ours: list[float], theirs: list[float], baseline: str, target: float) -> str:
    """A table row: medians (and fastest runs, which show the cost without interference), ratio, verdict."""
    ratio = statistics.median(ours) / statistics.median(theirs)
    verdict = "met" if ratio <= target else "MISSED"
    return (f"| {label} | {statistics.median(ours):.3f} ({min(ours):.3f}) | {baseline} | "
            f"{statistics.median(theirs):.3f} ({min(theirs):.3f}) | {ratio:.2f}x | <= {target:.1f}x {verdict} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median reported)")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--workers", default="8", help="worker count, or a comma-separated sweep (2,4,8)")
    arguments = parser.parse_args()
    sweep = [int(value) for value in arguments.workers.split(",")]
    if shutil.which("rsync") is None:
        print("rsync is not installed; the re-stage row needs it: apt-get install -y rsync", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="trainops-bench-staging-") as scratch:
        work = Path(scratch)
        source = work / "source"
        total = build_tree(source, arguments.files, arguments.megabytes * 1_000_000)
        print(f"tree: {arguments.files} files, {total / 1e6:.1f} MB; {os.cpu_count()} CPUs; "
              f"median of {arguments.repeat} runs; `trainops stage` runs as a command (new process each time)\n")
        floor = statistics.median(timed([sys.executable, "-m", "trainops.cli", "stage", "--help"])
                                  for _ in range(arguments.repeat))
        print(f"fixed cost of the command (interpreter + imports: `trainops stage --help`): {floor:.3f} s\n")
        print("| measurement | trainops, median (min) s | baseline | baseline, median (min) s | ratio of medians | target |")
        print("| --- | --- | --- | --- | --- | --- |")
        for how, in_process in (("`trainops stage`", False), ("`stage_tree()` in-process", True)):
            for workers in sweep:
                ours, theirs = first_stage(source, work, arguments.repeat, workers, in_process)
                print(row(f"first stage, {how}, {workers} workers", ours, theirs, "`cp -r`", 1.5), flush=True)
            if shutil.which("rsync") is not None:
                ours, theirs = restage(source, work, arguments.repeat, sweep[-1], in_process)
                print(row(f"re-stage unchanged, {how}", ours, theirs, "`rsync -a`", 1.0), flush=True)
            else:
                print(f"| re-stage unchanged, {how} | - | `rsync -a` | not installed | - | apt-get install -y rsync |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
