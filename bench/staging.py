"""Staging benchmark: `trainops stage` against `cp -r` (first stage) and `rsync -a` (re-stage of an unchanged tree).

Two tree shapes, side by side in one run (fixed seeds, random bytes):

- *mixed*: 2,000 files / 200 MB, sizes spread log-normally from 4 KB to a few MB over 20 directories;
- *many small files*: 100,000 files of 100 B - 4 KB (about 200 MB) in 100 directories of 1,000 (``--small-files``).

For each shape it times:

- first stage into an empty directory: trainops vs ``cp -r SRC DST`` (target <= 1.5x);
- re-stage of the unchanged tree: trainops vs ``rsync -a SRC/ DST/`` (target <= 1.0x).

Trainops is measured two ways: as the command (``trainops stage SRC DST --quiet``, a new Python process each time,
as a user types it) and as `stage_tree` called in a running process (how the stage step runs inside a pipeline, an
Airflow task or a KFP component). The source is in the page cache for every run, and ``sync`` runs (untimed) before
each one so no run pays for the write-back of the previous one.

Each round times trainops and the baseline back to back, alternating which goes first; the table gives the median
of each side over ``--repeat`` rounds (with the fastest run in brackets) and the median of the per-round ratios,
which is what the target is checked against: on a machine shared with other work, a round's two runs see the same
load, while medians taken separately can come from quiet and busy moments. The last column is the same ratio in CPU
time (user + system, every thread), which shows the work done whatever the machine's load, and the last the peak
resident memory of the command (trainops / baseline, measured by GNU ``/usr/bin/time`` when it is there). ``--workers 1,2,4,8`` sweeps the worker count.
rsync is needed for the re-stage rows and this script installs nothing: ``apt-get install -y rsync`` first (the rows
say so when it is missing). ``--scratch DIR`` puts the trees on another file system (default: ``$TMPDIR``).

    .venv/bin/python bench/staging.py [--repeat 7] [--small-repeat 3] [--files 2000] [--megabytes 200]
                                      [--small-files 100000] [--workers 2] [--shapes mixed,small] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: A timer runs one measurement and returns (wall seconds, CPU seconds: user + system, all threads, peak RSS bytes).
Timer = Callable[[], "tuple[float, float, int]"]


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


def build_small_tree(root: Path, files: int, seed: int = 5) -> int:
    """``files`` files of 100 B to 4 KB, 1,000 per directory; return the byte count."""
    generator = random.Random(seed)
    block = generator.randbytes(1024 * 1024)
    written = 0
    for index in range(files):
        directory = root / f"part-{index // 1000:04d}"
        if index % 1000 == 0:
            directory.mkdir(parents=True)
        size = generator.randrange(100, 4096)
        offset = generator.randrange(0, len(block) - size)
        (directory / f"item-{index:06d}.bin").write_bytes(block[offset:offset + size])
        written += size
    return written


_fresh_count = [0]
#: On tmpfs (no recently-deleted effect, but every copy held in memory) each first-stage copy is removed before the
#: next run of its kind makes a new one; on disk file systems nothing is removed until the end of the whole run.
_remove_between_runs = {"on": False}
_last_made: dict[str, Path] = {}


def fresh(path: Path) -> Path:
    """A new name next to ``path`` (``path-N``) that does not exist yet, for a first-stage run to copy into.

    On ext4, creating files in the minutes after many were deleted is several times slower (the inode allocator
    checks, and skips, recently deleted inodes: ``recently_deleted`` / ``find_get_block_common`` under
    ``__ext4_new_inode`` in perf), which made a run's time depend on what was removed before it (``cp -r`` of
    100,000 files took 4 s or 56 s). So on a disk file system nothing is deleted until every shape is measured (the
    copies stay, a few GB), and `settle` waits out earlier deletions before the first-stage rows; on tmpfs the
    previous copy of the same kind is removed (untimed) before a new one is made."""
    _fresh_count[0] += 1
    made = path.with_name(f"{path.name}-{_fresh_count[0]}")
    if _remove_between_runs["on"]:
        previous = _last_made.get(path.name)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        _last_made[path.name] = made
    return made


def file_system_type(path: Path) -> str:
    """The type of the file system ``path`` is on (the longest mount point of /proc/mounts above it)."""
    real, best, kind = os.path.realpath(path), "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


def settle(work: Path, sample: Path, limit_seconds: float = 360.0) -> str:
    """Wait until creating files on this file system runs at its steady speed: copy ``sample`` (one directory of
    the source) into a new directory every 15 s until the last two probes agree within 20% and neither is more than
    35% slower than the fastest probe so far, with at least three probes (30 s); or until ``limit_seconds`` pass.
    A slowdown that decays (ext4 after mass deletions) shows as probes getting faster; it cannot tell a slowdown that
    stays level for the whole wait from the file system's own speed, so the probe times are printed with the rows.
    Returns the probe times. Nothing is deleted (see `fresh`)."""
    probes: list[float] = []
    started = time.monotonic()
    while True:
        target = fresh(work / "probe")
        os.sync()
        began = time.perf_counter()
        subprocess.run(["cp", "-r", str(sample), str(target)], check=True)
        probes.append(time.perf_counter() - began)
        last_two = probes[-2:]
        if len(probes) >= 3 and max(last_two) <= 1.2 * min(last_two) and max(last_two) <= 1.35 * min(probes):
            break
        if time.monotonic() - started > limit_seconds:
            break
        time.sleep(15)
    return ", ".join(f"{probe:.3f}" for probe in probes) + f" s over {time.monotonic() - started:.0f} s"


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


#: GNU time measures a command's own peak memory (wait4's ru_maxrss would include this Python process, which the child
#: was forked from); without it the memory column says "-".
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def command_timer(make_command: Callable[[], list[str]]) -> Timer:
    """A timer of one command; ``make_command`` runs untimed first (it may clear the destination)."""
    def run() -> tuple[float, float, int]:
        command = make_command()
        peak_file = None
        if GNU_TIME:
            peak_file = tempfile.NamedTemporaryFile(prefix="trainops-bench-peak-", delete=False)
            peak_file.close()
            command = [GNU_TIME, "-f", "%M", "-o", peak_file.name, *command]
        os.sync()
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # wait4 gives this child's own CPU time and peak memory (RUSAGE_CHILDREN would mix in every earlier one).
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        error = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
        if process.stderr:
            process.stderr.close()
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {process.returncode}: {error}")
        peak = 0
        if peak_file is not None:
            text = Path(peak_file.name).read_text().strip().splitlines()
            Path(peak_file.name).unlink()
            peak = int(text[-1]) * 1024 if text and text[-1].isdigit() else 0
        return elapsed, usage.ru_utime + usage.ru_stime, peak
    return run


def in_process_timer(source: Path, make_destination: Callable[[], Path], workers: int) -> Timer:
    """A timer of `stage_tree` called in this process (already imported, as in a pipeline step)."""
    from trainops.backends.local.staging import stage_tree

    def run() -> tuple[float, float, int]:
        destination = make_destination()
        os.sync()
        # RUSAGE_CHILDREN too: the listing processes stage_tree forks (and reaps) are part of its CPU time.
        cpu_before = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        report = stage_tree(str(source), str(destination), workers=workers, progress=False)
        elapsed = time.perf_counter() - started
        if not report.ok:
            raise SystemExit(f"stage_tree failed: {report.problem_lines()[:5]}")
        cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before
        return elapsed, cpu, 0  # this process's peak says nothing here
    return run


Times = "list[tuple[float, float, int]]"


def paired(ours: Timer, theirs: Timer, repeat: int) -> tuple[Times, Times]:
    """``repeat`` rounds of both timers back to back, alternating which goes first."""
    ours_times: list[tuple[float, float, int]] = []
    theirs_times: list[tuple[float, float, int]] = []
    for round_number in range(repeat):
        if round_number % 2 == 0:
            ours_times.append(ours())
            theirs_times.append(theirs())
        else:
            theirs_times.append(theirs())
            ours_times.append(ours())
    return ours_times, theirs_times


def row(label: str, times: tuple[Times, Times], baseline: str, target: float) -> str:
    """A Markdown table row: wall-time medians (fastest in brackets), the median per-round wall ratio and the
    verdict, then the same ratio in CPU time (user + system), which waiting for a busy CPU does not inflate, and the
    peak resident memory of each command."""
    ours, theirs = times
    ours_wall, theirs_wall = [wall for wall, _, _ in ours], [wall for wall, _, _ in theirs]
    ratio = statistics.median(mine[0] / other[0] for mine, other in zip(ours, theirs))
    cpu_ratio = statistics.median(mine[1] / max(other[1], 1e-6) for mine, other in zip(ours, theirs))
    verdict = "met" if ratio <= target else "MISSED"
    if max(theirs_wall) > 2 * min(theirs_wall):  # the baseline itself was not steady: say so next to the verdict
        verdict += f" (baseline unsteady: {min(theirs_wall):.2f}-{max(theirs_wall):.2f} s)"
    ours_rss, theirs_rss = max(rss for _, _, rss in ours), max(rss for _, _, rss in theirs)
    memory = f"{ours_rss / 1e6:.0f} / {theirs_rss / 1e6:.1f} MB" if ours_rss else "-"
    return (f"| {label} | {statistics.median(ours_wall):.3f} ({min(ours_wall):.3f}) | {baseline} | "
            f"{statistics.median(theirs_wall):.3f} ({min(theirs_wall):.3f}) | **{ratio:.2f}x** | "
            f"<= {target:.1f}x {verdict} | {cpu_ratio:.2f}x | {memory} |")


def stage_command(source: Path, destination: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "trainops.cli", "stage", str(source), str(destination), "--quiet",
            "--workers", str(workers)]


def measure_shape(label: str, work: Path, source: Path, sweep: list[int], repeat: int, have_rsync: bool) -> None:
    """The rows of one tree shape: first stage against cp -r, re-stage against rsync -a, as a command and in-process."""
    if not _remove_between_runs["on"]:
        sample = min(path for path in source.iterdir() if path.is_dir())
        print(f"| {label}: settle (`cp -r` of {sample.name} until steady) | {settle(work, sample)} "
              "| | | | | | |", flush=True)
    copy = command_timer(lambda: ["cp", "-r", str(source), str(fresh(work / "copied"))])
    synced = work / "synced"
    rsync = command_timer(lambda: ["rsync", "-a", f"{source}/", f"{synced}/"])  # `synced` is set per re-stage row
    for how, in_process in (("`trainops stage`", False), ("`stage_tree()` in-process", True)):
        for workers in sweep:
            staged = work / "staged"
            ours = (in_process_timer(source, lambda: fresh(staged), workers) if in_process
                    else command_timer(lambda: stage_command(source, fresh(staged), workers)))
            print(row(f"{label}: first stage, {how}, {workers} workers", paired(ours, copy, repeat), "`cp -r`", 1.5),
                  flush=True)
        if not have_rsync:
            print(f"| {label}: re-stage unchanged, {how} | - | `rsync -a` | not installed | - | "
                  "apt-get install -y rsync | - | - |")
            continue
        restaged = fresh(work / "restaged")
        command_timer(lambda: stage_command(source, restaged, sweep[-1]))()  # bring both up to date
        synced = fresh(work / "synced")
        command_timer(lambda: ["rsync", "-a", f"{source}/", f"{synced}/"])()
        ours = (in_process_timer(source, lambda: restaged, sweep[-1]) if in_process
                else command_timer(lambda: stage_command(source, restaged, sweep[-1])))
        print(row(f"{label}: re-stage unchanged, {how}, {sweep[-1]} workers", paired(ours, rsync, repeat),
                  "`rsync -a`", 1.0), flush=True)
    if _remove_between_runs["on"]:
        for name in ("copied", "synced", "staged", "restaged"):
            for path in work.glob(f"{name}-*"):
                shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds per measurement of the mixed tree (medians)")
    parser.add_argument("--small-repeat", type=int, default=3, help="rounds per measurement of the small-files tree")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--small-files", type=int, default=100_000)
    parser.add_argument("--shapes", default="mixed,small", help="which trees: mixed, small or both (mixed,small)")
    parser.add_argument("--workers", default="2", help="worker count, or a comma-separated sweep (1,2,4,8)")
    parser.add_argument("--scratch", default=None,
                        help="where the trees go, or a comma-separated list measured one after the other "
                             "(e.g. /tmp,/dev/shm for ext4 and tmpfs; default: $TMPDIR)")
    arguments = parser.parse_args()
    sweep = [int(value) for value in arguments.workers.split(",")]
    shapes = [shape for shape in arguments.shapes.split(",") if shape]
    have_rsync = shutil.which("rsync") is not None
    if not have_rsync:
        print("rsync is not installed, so the re-stage rows are skipped; install it with: apt-get install -y rsync",
              file=sys.stderr)
    help_command = command_timer(lambda: [sys.executable, "-m", "trainops.cli", "stage", "--help"])
    floor = statistics.median(help_command()[0] for _ in range(3))
    print(f"{os.cpu_count()} CPUs; fixed cost of the command (interpreter and imports, `trainops stage --help`): "
          f"{floor:.3f} s")
    for scratch_root in (arguments.scratch or tempfile.gettempdir()).split(","):
        kind = file_system_type(Path(scratch_root))
        _remove_between_runs["on"] = kind == "tmpfs"
        with tempfile.TemporaryDirectory(prefix="trainops-bench-staging-", dir=scratch_root) as scratch:
            work = Path(scratch)
            print(f"\ntrees under {scratch_root} ({kind}), load average {os.getloadavg()[0]:.1f} at the start\n")
            print("| measurement | trainops s, median (fastest) | baseline | baseline s, median (fastest) | wall ratio "
                  "(median per round) | target | CPU-time ratio | peak memory (trainops / baseline) |")
            print("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for shape in shapes:
                source = work / f"source-{shape}"
                if shape == "mixed":
                    total = build_tree(source, arguments.files, arguments.megabytes * 1_000_000)
                    label, repeat = f"mixed {arguments.files:,} files / {total / 1e6:.0f} MB", arguments.repeat
                elif shape == "small":
                    total = build_small_tree(source, arguments.small_files)
                    label = f"small {arguments.small_files:,} files / {total / 1e6:.0f} MB"
                    repeat = arguments.small_repeat
                else:
                    parser.error(f"unknown shape {shape!r}; use mixed, small")
                measure_shape(f"{label}, {kind}", work, source, sweep, repeat, have_rsync)
            print(f"\nload average {os.getloadavg()[0]:.1f} at the end of {scratch_root}; removing the trees")
            _last_made.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
