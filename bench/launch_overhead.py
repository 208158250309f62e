"""Launch overhead of the local backend: `trainops run` (1 host x 2 processes) against plain
`torchrun --standalone --nproc_per_node 2`, on the same fixed-work training script, alternating runs.

Run:  .venv/bin/python bench/launch_overhead.py [--repeats 5] [--seconds 10]
Prints a table of wall-clock seconds per run and the median ratio (target <= 1.15).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = '''
"""Fixed work: the same number of matmuls and gloo all-reduces on every run (about SECONDS seconds here)."""
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
steps = int(os.environ["BENCH_STEPS"])
weights = torch.randn(256, 256)
for step in range(steps):
    activations = torch.randn(64, 256) @ weights
    if step % 20 == 0:
        dist.all_reduce(activations)  # a gradient exchange every 20 steps
dist.destroy_process_group()
'''


def calibrate(seconds: float, torchrun: list[str], env: dict[str, str], cwd: str) -> int:
    """Steps that make the script run about `seconds` under torchrun: the slope between a short and a longer run, so
    process start-up (which both launchers pay) is not counted as work. The longer run doubles until it takes at least
    a second more than the short one, so the slope is measured, not noise."""
    short = 100
    baseline = timed(torchrun, {**env, "BENCH_STEPS": str(short)}, cwd)
    long = short * 20
    while True:
        elapsed = timed(torchrun, {**env, "BENCH_STEPS": str(long)}, cwd)
        if elapsed - baseline >= 1.0 or long >= 10_000_000:
            break
        long *= 4
    per_step = (elapsed - baseline) / (long - short)
    return max(short, int(seconds / per_step))


def timed(command: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="trainops-bench-launch-"))
    (work / "src").mkdir()
    (work / "src" / "train.py").write_text(SCRIPT)
    (work / "data").mkdir()
    (work / "job.yaml").write_text(
        "name: bench-launch\nentry_point: train.py\nsource_dir: src\ninstance_type: local\ninstance_count: 1\n"
        "distribution: {type: torch_distributed, processes_per_host: 2}\ninputs: {train: data}\n"
        "output_path: out\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                str(work / "src" / "train.py")]
    steps = calibrate(args.seconds, torchrun, env, str(work))
    env["BENCH_STEPS"] = str(steps)
    rows = []
    for repeat in range(args.repeats):
        plain = timed(torchrun, env, str(work))
        ours = timed([sys.executable, "-m", "trainops.cli", "run", str(work / "job.yaml"), "--workdir",
                      str(work / "state"), "--job-name", f"bench-launch-{repeat}"], env, str(work))
        rows.append((plain, ours))
        print(f"run {repeat + 1}: torchrun {plain:6.2f} s   trainops run {ours:6.2f} s   ratio {ours / plain:.3f}",
              flush=True)
    ratios = [ours / plain for plain, ours in rows]
    print()
    print("| launcher | median s | min s | max s |")
    print("| --- | --- | --- | --- |")
    for label, values in (("torchrun --standalone --nproc_per_node 2", [r[0] for r in rows]),
                          ("trainops run (local, 1 host x 2 processes)", [r[1] for r in rows])):
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} |")
    median = statistics.median(ratios)
    print(f"\nmedian ratio trainops/torchrun: {median:.3f} (target <= 1.15) -> {'PASS' if median <= 1.15 else 'MISS'}"
          f"; {steps} steps per rank, {args.repeats} alternating repeats")


if __name__ == "__main__":
    main()
