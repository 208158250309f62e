"""What the slurm backend adds to Slurm: submit -> every rank running, and stop -> every rank gone, with
`trainops run --backend slurm --no-wait` / `trainops stop` beside plain `sbatch` / `scancel` of the same training
script (2 nodes, one rank each, `srun python SCRIPT` in the plain batch script), alternating, on the test cluster of
tests/support/slurm_cluster.py (started here, stopped at the end).

A rank is running once the training script's first line has written its marker (its pid and the time); it is gone
once that pid is gone. Both commands are timed from the moment they are started, as a user's would be, so the
trainops side pays its CLI's start, the spec's validation, laying out the contract directories and the record, the
node script and the runtime's launcher; the plain side pays sbatch and srun only.

Slurm schedules a batch job only once ``batch_sched_delay`` (3 s by default, counted in whole seconds) has passed
since its previous scheduling pass, and a job's end is such a pass: a job submitted within 3 s of the previous one's
end waits for the rest of that window, whoever submits it. Each side therefore submits once both nodes have been
idle for ``SETTLE`` seconds, so neither inherits a window the other side's stop opened (before, the side after a
quick ``scancel`` waited about 1 s longer than the side after ``trainops stop``). What Slurm itself took (its
``submit_batch_job`` RPC to ``Allocate``, from slurmctld's log, in milliseconds) is shown for both sides.

Run:  .venv/bin/python bench/slurm_overhead.py [--rounds 5]
Needs root and Slurm (make slurm). Prints one row per round and the medians; the bounds of issue 38: start <= 1 s
more than plain sbatch, stop <= 10 s.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.slurm_cluster import missing, start_cluster, wait_until  # noqa: E402

SCRIPT = '''import json, os, time
marker = os.path.join(os.environ["BENCH_MARKERS"], os.environ.get("SM_CURRENT_HOST") or os.environ["SLURMD_NODENAME"])
with open(marker + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "time": time.time()}, handle)
os.replace(marker + ".tmp", marker)
time.sleep(3600)
'''
PLAIN = '''#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --no-requeue
#SBATCH --output={work}/{name}.log
export BENCH_MARKERS={markers}
srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL {python} {script}
'''


#: Seconds both nodes stay idle before a side submits: past slurmctld's batch_sched_delay (3 s, whole seconds).
SETTLE = 4.0
SUBMITTED = re.compile(r"^\[(\S+)\] _slurm_rpc_submit_batch_job: JobId=(\d+) ")
ALLOCATED = re.compile(r"^\[(\S+)\] (?:sched: Allocate|sched/backfill: _start_job: Started) JobId=(\d+) ")

#: CPU seconds of each submit command, in the order run (plain, trainops, plain, ...): what it costs on an idle machine.
CPU: list[float] = []


def markers(directory: Path) -> list[dict]:
    found = []
    for path in sorted(directory.glob("*")):
        if not path.name.endswith(".tmp"):
            found.append(json.loads(path.read_text()))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def idle(cluster) -> bool:
    """Both nodes idle: the previous job has left them (not COMPLETING), so neither side waits for the other's."""
    done = cluster.command("sinfo", "-h", "-N", "-o", "%N %t", check=False)
    return done.returncode == 0 and sorted(done.stdout.split()) == ["idle", "idle", "n1", "n2"]


def settled(cluster, since: list[float]) -> bool:
    """Both nodes idle for SETTLE seconds (``since`` keeps when they were first seen idle)."""
    if not idle(cluster):
        since.clear()
        return False
    if not since:
        since.append(time.monotonic())
    return time.monotonic() - since[0] >= SETTLE


def slurm_wait(cluster, job_id: str) -> float:
    """Seconds from slurmctld's receipt of the job to its allocation (its log's millisecond timestamps)."""
    seen: dict[str, datetime.datetime] = {}
    for line in (cluster.root / "log" / "slurmctld.log").read_text(errors="replace").splitlines():
        for key, pattern in (("submitted", SUBMITTED), ("allocated", ALLOCATED)):
            match = pattern.match(line)
            if match and match.group(2) == job_id:
                seen[key] = datetime.datetime.fromisoformat(match.group(1))
    if len(seen) < 2:
        return float("nan")
    return (seen["allocated"] - seen["submitted"]).total_seconds()


def measure(cluster, start: list[str], stop, directory: Path,
            batch_log: str) -> tuple[float, float, float, float, float]:
    """(seconds from starting the submit command to both ranks' markers, seconds from starting the stop to both
    ranks' pids gone, seconds the submit command took, seconds to the batch script's start: its log file appears,
    Slurm's own seconds from receiving the job to allocating it), once both nodes have been idle SETTLE seconds."""
    env = cluster.env
    since: list[float] = []
    wait_until(lambda: settled(cluster, since), "both nodes to be idle", pause=0.1)
    batch_started: list[float] = []

    def watch_batch() -> None:
        while not batch_started and time.perf_counter() - began < 120:
            if glob.glob(batch_log):
                batch_started.append(time.perf_counter() - began)
            time.sleep(0.002)

    began = time.perf_counter()
    watcher = threading.Thread(target=watch_batch, daemon=True)
    watcher.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(start, env=env, capture_output=True, text=True, timeout=300)
    returned = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(start)} failed:\n{done.stdout}{done.stderr}")
    ranks = wait_until(lambda: len(found := markers(directory)) == 2 and found, "both ranks to run", pause=0.005)
    running = max(rank["time"] for rank in ranks) - (time.time() - (time.perf_counter() - began))
    pids = [rank["pid"] for rank in ranks]
    found = re.search(r"Slurm job (\d+)", done.stdout) or re.match(r"(\d+)", done.stdout.strip())
    scheduling = slurm_wait(cluster, found.group(1)) if found else float("nan")
    began = time.perf_counter()
    stop(done.stdout)
    wait_until(lambda: not any(alive(pid) for pid in pids), "every rank to end", pause=0.005)
    watcher.join()
    return (running, time.perf_counter() - began, returned, batch_started[0] if batch_started else float("nan"),
            scheduling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    if missing():
        raise SystemExit(missing())
    work = Path(tempfile.mkdtemp(prefix="trainops-slurm-bench-"))
    cluster = start_cluster(work / "cluster")
    try:
        env = cluster.env
        source = work / "src"
        source.mkdir()
        (source / "rank.py").write_text(SCRIPT)
        rows = []
        for round_number in range(1, arguments.rounds + 1):
            plain_markers = work / f"plain-markers-{round_number}"
            plain_markers.mkdir()
            batch = work / f"plain-{round_number}.sbatch"
            batch.write_text(PLAIN.format(name=f"plain-{round_number}", work=work, markers=plain_markers,
                                          python=sys.executable, script=source / "rank.py"))

            def cancel(output: str) -> None:
                cluster.command("scancel", output.strip().split(";")[0])

            plain = measure(cluster, ["sbatch", "--parsable", str(batch)], cancel, plain_markers,
                            str(work / f"plain-{round_number}.log"))
            trainops_markers = work / f"trainops-markers-{round_number}"
            trainops_markers.mkdir()
            spec = work / f"trainops-{round_number}.yaml"
            spec.write_text(f"name: bench\nentry_point: rank.py\nsource_dir: {source}\ninstance_type: ml.c5.xlarge\n"
                            f"instance_count: 2\nmax_run: 3600\nenvironment: {{BENCH_MARKERS: '{trainops_markers}'}}\n")
            settings = ["--backend", "slurm", "-o", f"shared_dir={cluster.shared_dir}"]
            name = f"bench-{round_number}"

            def stop(_output: str, name: str = name, settings: list[str] = settings) -> None:
                done = subprocess.run([sys.executable, "-m", "trainops.cli", "stop", name, *settings], env=env,
                                      capture_output=True, text=True, timeout=300)
                if done.returncode != 0:
                    raise SystemExit(f"trainops stop failed:\n{done.stdout}{done.stderr}")

            ours = measure(cluster, [sys.executable, "-m", "trainops.cli", "run", str(spec), *settings, "-o",
                                     f"python={sys.executable}", "--job-name", name, "--no-wait"], stop,
                           trainops_markers, str(cluster.shared_dir / "jobs" / name / "logs" / "batch-*.log"))
            rows.append((plain, ours))
            print(f"round {round_number}: plain sbatch {plain[0]:.2f} s to run (returned {plain[2]:.2f}, batch "
                  f"{plain[3]:.2f}, Slurm {plain[4]:.2f}), scancel {plain[1]:.2f} s to end | trainops {ours[0]:.2f} s to "
                  f"run (returned {ours[2]:.2f}, batch {ours[3]:.2f}, Slurm {ours[4]:.2f}), stop {ours[1]:.2f} s to "
                  "end; load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
        report(rows)
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


Row = tuple[float, float, float, float, float]


def report(rows: list[tuple[Row, Row]]) -> None:
    def median(index: int, side: int) -> float:
        return statistics.median(row[side][index] for row in rows)

    print("\n| command | submit -> all ranks running | the submit command | submit -> batch script starts | "
          "of which Slurm: job received -> allocated | batch script -> all ranks running | stop -> all ranks gone |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for side, label in ((0, "plain `sbatch` / `scancel`"),
                        (1, "`trainops run --backend slurm --no-wait` / `trainops stop`")):
        in_job = statistics.median(row[side][0] - row[side][3] for row in rows)
        print(f"| {label} | {median(0, side):.2f} | {median(2, side):.2f} | {median(3, side):.2f} | "
              f"{median(4, side):.2f} | {in_job:.2f} | {median(1, side):.2f} |")
    print("(medians, seconds)")
    extra = [row[1][0] - row[0][0] for row in rows]
    print(f"\nstart: trainops - plain per round {', '.join(f'{value:+.2f}' for value in extra)} s; median "
          f"{statistics.median(extra):+.2f} s (bound <= +1 s: {'met' if statistics.median(extra) <= 1 else 'MISSED'})")
    ratios = [row[1][0] / row[0][0] for row in rows]
    print(f"start ratio trainops / plain: median {statistics.median(ratios):.2f} "
          f"({', '.join(f'{value:.2f}' for value in ratios)})")
    stops = [row[1][1] for row in rows]
    print(f"CPU seconds of the submit command: sbatch median {statistics.median(CPU[0::2]):.3f}, trainops run median "
          f"{statistics.median(CPU[1::2]):.3f} (the machine's load does not inflate these)")
    print(f"stop: trainops median {statistics.median(stops):.2f} s, max {max(stops):.2f} s (bound <= 10 s: "
          f"{'met' if max(stops) <= 10 else 'MISSED'}); plain scancel median {median(1, 0):.2f} s")
    print(json.dumps({"rounds": len(rows), "plain": [row[0] for row in rows], "trainops": [row[1] for row in rows],
                      "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
