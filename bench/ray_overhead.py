"""What the ray backend adds to Ray: submit -> every rank running, and stop -> every rank gone, with
`trainops run --backend ray --no-wait` / `trainops stop` beside plain `ray job submit --no-wait` / `ray job stop` of
the same training script (2 hosts, one rank each), alternating, on the test cluster of tests/support/ray_cluster.py
(a head and a worker node in a private network namespace, started here, stopped at the end).

The plain side is what a Ray user writes to run a script on two nodes: an entrypoint that asks a STRICT_SPREAD
placement group of two 1-CPU bundles and runs ``python SCRIPT`` in one task per bundle (`PLAIN_DRIVER`), submitted
with ``ray job submit --working-dir``. The trainops side is the same script as a 2-host spec (the driver lays out each
host's SageMaker contract and runs the trainops runtime there).

A rank is running once the training script has written its marker (its pid and the time); it is gone once that pid
is gone. Both commands are timed from the moment they are started, as a user's would be: each side pays its CLI's
start (Ray's ``ray`` command imports Ray; ``trainops`` imports its spec models and Ray's job client), the upload of
its packages (Ray keeps them by content hash: the first round of each side uploads, the others find them) and Ray's
job supervisor and driver start. Each side submits once the previous job has ended and its ranks are gone.

CPU, each side: of its two commands (this process's reaped children), and of the cluster over the round (`ClusterCpu`:
a cpuacct cgroup holding every process of the cluster, so a process that ended is still counted).

Run:  .venv/bin/python bench/ray_overhead.py [--rounds 5]
Needs root (the namespace, the cgroup) and trainops[ray]. Prints one row per round and the medians; the bounds of
issue 45: start <= 1 s more than plain ``ray job submit``, stop <= 10 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.ray_cluster import missing, start_cluster, wait_until  # noqa: E402

SCRIPT = '''import json, os, time
marker = os.path.join(os.environ["BENCH_MARKERS"], os.environ.get("SM_CURRENT_HOST") or os.environ["BENCH_HOST"])
with open(marker + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "time": time.time()}, handle)
os.replace(marker + ".tmp", marker)
time.sleep(3600)
'''
#: Where the cluster's cpuacct cgroup is made (cgroup v1, as on this machine).
CGROUP_ROOT = "/sys/fs/cgroup/cpuacct"
#: Seconds the idle cluster's CPU is read over before the rounds.
IDLE_SECONDS = 10.0
PLAIN_DRIVER = '''import os, subprocess, sys
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
group = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
ray.get(group.ready())


@ray.remote(num_cpus=1)
def host(index):
    env = {**os.environ, "BENCH_HOST": f"algo-{index + 1}"}
    return subprocess.run([sys.executable, "train.py"], env=env).returncode


codes = ray.get([host.options(scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))
                 .remote(i) for i in range(2)])
sys.exit(max(codes))
'''


def markers_of(directory: Path) -> dict[str, dict]:
    found = {}
    for host in ("algo-1", "algo-2"):
        path = directory / host
        if path.exists():
            found[host] = json.loads(path.read_text())
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children_cpu() -> float:
    """CPU seconds of this process's reaped children (the commands run here, each through nsenter, which execs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class ClusterCpu:
    """CPU seconds the cluster's processes use, read from a cpuacct cgroup (v1) of their own: every process of the
    namespace is moved into it once the cluster is up, and what they start (a job's supervisor, driver, actors,
    ranks) is born in it, so a process that ended is still counted. Ray's own idle work (GCS, raylets, dashboard) is
    in it too, as on any cluster. The commands run from here are not in it (they are this process's children)."""

    def __init__(self, cluster):
        self.group = Path(CGROUP_ROOT) / f"trainops-ray-bench-{os.getpid()}"
        self.group.mkdir()
        for pid in cluster.pids():
            try:
                (self.group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                continue

    def seconds(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Once the cluster's processes are gone (an empty cgroup is removed with rmdir)."""
        self.group.rmdir()


def one_round(cluster, cpu: ClusterCpu, side: str, name: str, work: Path) -> dict[str, float]:
    markers = work / "markers" / name
    markers.mkdir(parents=True)
    env = {**cluster.client_env(), "TRAINOPS_HOME": str(work / "home"), "RAY_ADDRESS": cluster.address}
    if side == "plain":
        submit = ["ray", "job", "submit", "--no-wait", "--submission-id", name, "--working-dir", str(work / "plain"),
                  "--runtime-env-json", json.dumps({"env_vars": {"BENCH_MARKERS": str(markers)}}), "--",
                  "python", "driver.py"]
        stop = ["ray", "job", "stop", name]
        submit[0] = stop[0] = str(Path(sys.executable).parent / "ray")
    else:
        spec = work / f"{name}.yaml"
        spec.write_text(f"name: bench\nentry_point: train.py\nsource_dir: {work / 'code'}\n"
                        "instance_type: ml.c5.xlarge\ninstance_count: 2\nmax_run: 3600\n"
                        f"output_path: file://{work / 'output'}\nenvironment: {{BENCH_MARKERS: '{markers}'}}\n")
        trainops = [sys.executable, "-m", "trainops.cli"]
        submit = [*trainops, "run", str(spec), "--backend", "ray", "--no-wait", "--job-name", name]
        stop = [*trainops, "stop", name, "--backend", "ray"]
    cpu_before, cluster_before = children_cpu(), cpu.seconds()
    began = time.time()
    submitted = subprocess.run(cluster.inside(submit), env=env, capture_output=True, text=True, timeout=300)
    returned = time.time() - began
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    wait_until(lambda: len(markers_of(markers)) == 2, f"{name}: both ranks to run", timeout=300, pause=0.05)
    found = markers_of(markers)
    running = max(record["time"] for record in found.values()) - began
    stop_began = time.time()
    stopped = subprocess.run(cluster.inside(stop), env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_until(lambda: not any(alive(record["pid"]) for record in found.values()), f"{name}: every rank to end",
               timeout=300, pause=0.05)
    gone = time.time() - stop_began
    commands_cpu = children_cpu() - cpu_before
    wait_until(lambda: (cluster.get(f"/api/jobs/{name}") or {}).get("status") in ("STOPPED", "FAILED", "SUCCEEDED"),
               f"{name}: Ray to end the job", timeout=300)
    job_cpu = cpu.seconds() - cluster_before
    return {"start": running, "submit_command": returned, "stop": gone, "commands_cpu": commands_cpu,
            "cluster_cpu": job_cpu, "seconds": time.time() - began}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    reason = missing()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    work = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    for directory, files in (("code", {"train.py": SCRIPT}), ("plain", {"train.py": SCRIPT, "driver.py": PLAIN_DRIVER})):
        (work / directory).mkdir()
        for file, text in files.items():
            (work / directory / file).write_text(text)
    cluster = start_cluster()
    rows: dict[str, list[dict[str, float]]] = {"plain": [], "trainops": []}
    cpu = None
    try:
        cpu = ClusterCpu(cluster)
        idle_before, idle_began = cpu.seconds(), time.time()
        time.sleep(IDLE_SECONDS)  # Ray's own CPU with no job, to read the rounds' cluster CPU against
        idle = (cpu.seconds() - idle_before) / (time.time() - idle_began)
        print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f}, "
              f"cluster started in {cluster.started_seconds:.1f} s, idle cluster {idle:.2f} CPU-s/s", flush=True)
        for round_number in range(arguments.rounds + 1):  # round 0 uploads each side's packages: not counted
            for side in ("plain", "trainops") if round_number % 2 == 0 else ("trainops", "plain"):
                row = one_round(cluster, cpu, side, f"{side}-{round_number}", work)
                label = "warm-up" if round_number == 0 else f"round {round_number}"
                print(f"{label:>9} {side:>8}: submit -> all ranks running {row['start']:.2f} s (the submit command "
                      f"{row['submit_command']:.2f} s), stop -> all ranks gone {row['stop']:.2f} s; CPU: commands "
                      f"{row['commands_cpu']:.2f} s, cluster {row['cluster_cpu']:.2f} s over {row['seconds']:.1f} s; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                if round_number:
                    rows[side].append(row)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        cluster.stop()
        if cpu is not None:
            cpu.remove()
    print("\n| command | submit -> all ranks running | the submit command | stop -> all ranks gone | CPU: the "
          "commands | CPU: the cluster, the round |")
    print("| --- | --- | --- | --- | --- | --- |")
    medians = {}
    for side, label in (("plain", "plain `ray job submit --no-wait` / `ray job stop`"),
                        ("trainops", "`trainops run --backend ray --no-wait` / `trainops stop`")):
        medians[side] = {key: statistics.median(row[key] for row in rows[side]) for key in rows[side][0]}
        print(f"| {label} | {medians[side]['start']:.2f} s | {medians[side]['submit_command']:.2f} s | "
              f"{medians[side]['stop']:.2f} s | {medians[side]['commands_cpu']:.2f} s | "
              f"{medians[side]['cluster_cpu']:.2f} s over {medians[side]['seconds']:.1f} s |")
    extra = [t["start"] - p["start"] for t, p in zip(rows["trainops"], rows["plain"], strict=True)]
    start_extra = medians["trainops"]["start"] - medians["plain"]["start"]
    print(f"\nstart: trainops {start_extra:+.2f} s median against plain (per round "
          f"{', '.join(f'{value:+.2f}' for value in extra)}): bound <= 1 s {'met' if start_extra <= 1 else 'MISSED'}")
    worst = max(row["stop"] for row in rows["trainops"])
    print(f"stop: trainops {medians['trainops']['stop']:.2f} s median, {worst:.2f} s max: bound <= 10 s "
          f"{'met' if worst <= 10 else 'MISSED'}")
    print(f"idle cluster: {idle:.2f} CPU-s/s (in each round's cluster CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
