"""What the kubernetes backend adds to a plain TrainJob: submit -> every pod running, and stop -> every pod gone, with
`trainops run --backend kubernetes --no-wait` / `trainops stop` beside a plain TrainJob create / foreground delete of
the same training script (2 nodes, one process each) through the official client, alternating, on the emulated
cluster of the tests (tests/support/k8s_cluster.py: the API emulator and the stand-in Trainer controller, started
here, stopped at the end). The plain create is measured two ways: as a command of its own (a fresh Python with the
official client, as `kubectl create -f` or the Kubeflow SDK is a command a user starts), and from this warm process.

A pod is running once the training script's first line has written its marker (its pid and the time); it is gone
once that pid is gone. The trainops side is timed from the moment its command starts, as a user's would be: it pays
its CLI's start, the spec's validation, the preflight's reads, laying out the job's files on the shared volume, the
create, then in each pod the node script and the runtime's launcher. The plain command pays its interpreter's start
and importing the official client (which trainops pays too); the warm plain create pays nothing but the call: the
strictest baseline there is. Its pods run the script directly.

Both sides run with byte code as an installed package has it: trainops' modules compiled before the rounds (a wheel's
install compiles them; this checkout is an editable install) and ``PYTHONDONTWRITEBYTECODE`` dropped from the
commands' and the pods' environment (set in this machine's shells: with it, every trainops command compiled its
hundred modules from source, which the plain command, importing only the installed client, never paid).

What it cannot show: a real API server's latency, scheduling, image pulls and container starts, which a real
cluster adds to both sides alike.

Run:  .venv/bin/python bench/kubernetes_overhead.py [--rounds 5]
Prints one row per round and the medians; the bounds of issue 44: start <= 1 s more than the plain create (the
command), stop <= 10 s.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.k8s_cluster import NAMESPACE, EmulatedCluster, emulated_cluster  # noqa: E402

SCRIPT = '''import json, os, time
name = os.environ.get("SM_CURRENT_HOST") or "node-" + os.environ["PET_NODE_RANK"]
marker = os.path.join(os.environ["BENCH_MARKERS"], name)
with open(marker + ".tmp", "w") as handle:
    json.dump({"pid": os.getpid(), "time": time.time()}, handle)
os.replace(marker + ".tmp", marker)
time.sleep(3600)
'''
NODES = 2


def wait_until(condition: Any, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"waited {limit:.0f} s for {what}")
        time.sleep(0.01)


def running(markers: Path) -> list[dict[str, Any]]:
    """The markers of the pods whose script started (each its pid and the time it wrote it)."""
    found = []
    for path in markers.glob("*"):
        if not path.name.endswith(".tmp"):
            try:
                found.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                pass
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone, waiting for its reaper
    except OSError:
        return False


def pods_cpu(cluster: EmulatedCluster, name: str) -> float:
    """CPU seconds the pods of TrainJob ``name`` have used so far: every live process of each node's session (the
    controller starts each node in a session of its own), with the children each has waited for."""
    sessions = {process.pid for process in cluster.trainer.processes.get(name, [])}
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sessions:  # field 6 of stat: the session id
            total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def ended(markers: list[dict[str, Any]]) -> float:
    """Wait until every marker's process is gone; the time it was seen gone."""
    wait_until(lambda: not any(alive(marker["pid"]) for marker in markers), "every pod's process to end")
    return time.time()


#: CPU seconds (user + system) of each command run, by side: what the wall times above cost on a machine that is
#: not shared (on this 2-core machine the wall times swing with the other sessions' load; CPU time does not).
CPU: dict[str, list[float]] = {}
#: CPU seconds of both pods of a job until both run the script, by side.
PODS_CPU: dict[str, list[float]] = {}


def command(side: str, arguments: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a command to its end; its output. Its CPU time (its own and its waited children's) goes to `CPU`."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(arguments, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read().decode(errors="replace")
    CPU.setdefault(side, []).append(usage.ru_utime + usage.ru_stime)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(arguments[:6])} ... failed:\n{text}")
    return text


def plain_body(name: str, script: Path, markers: Path) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                    "name": "torch-distributed"},
                     "trainer": {"image": "example.org/python:3", "numNodes": NODES, "numProcPerNode": 1,
                                 "command": ["python3", str(script)],
                                 "env": [{"name": "BENCH_MARKERS", "value": str(markers)}]}}}


def plain_call(kubeconfig: str, action: str, argument: str) -> None:
    """``create BODY_FILE`` or ``delete NAME`` (foreground) through the official client: the plain side's call."""
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
    if action == "create":
        body = json.loads(Path(argument).read_text())
        api.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs", body)
    else:
        api.delete_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NAMESPACE, "trainjobs", argument,
                                            body=client.V1DeleteOptions(propagation_policy="Foreground"))


def plain_round(cluster: EmulatedCluster, work: Path, index: int, script: Path, fresh: bool) -> tuple[float, float]:
    """A TrainJob created and deleted (foreground) through the official client: each call a command of its own
    (``fresh``), or a call from this process."""
    side = "plain-command" if fresh else "plain-warm"
    markers = work / f"{side}-{index}"
    markers.mkdir()
    name = f"{side}-{index}"
    body = work / f"{name}.json"
    body.write_text(json.dumps(plain_body(name, script, markers)))

    def call(action: str, argument: str) -> None:
        if fresh:
            command(f"plain-command {action}", [sys.executable, __file__, "--call",
                                                              str(cluster.kubeconfig), action, argument])
        else:
            plain_call(str(cluster.kubeconfig), action, argument)

    started = time.time()
    call("create", str(body))
    wait_until(lambda: len(running(markers)) == NODES, "every plain pod running")
    up = max(marker["time"] for marker in running(markers)) - started
    PODS_CPU.setdefault(side, []).append(pods_cpu(cluster, name))
    stopping = time.time()
    call("delete", name)
    return up, ended(running(markers)) - stopping


def trainops_round(cluster: EmulatedCluster, work: Path, index: int, script: Path,
                   tree: Path | None = None) -> tuple[float, float]:
    """`trainops run --no-wait` of the same script on the same two nodes, then `trainops stop`: this checkout's
    trainops, or (``tree``) the ``trainops`` package of another revision's tree, put first on the path."""
    side = "trainops" if tree is None else "trainops-compare"
    markers = work / f"{side}-{index}"
    markers.mkdir()
    spec = work / f"{side}-{index}.yaml"
    spec.write_text(f"entry_point: {script.name}\nsource_dir: {script.parent}\ninstance_type: ml.c5.xlarge\n"
                    f"instance_count: {NODES}\nimage_uri: example.org/python:3\nmax_run: 3600\n"
                    f"environment: {{BENCH_MARKERS: {markers}}}\n")
    settings = [part for key, value in cluster.settings().items() for part in ("-o", f"{key}={value}")]
    trainops = [sys.executable, "-m", "trainops.cli"]
    env = cluster.env(work / "home")
    if tree is not None:
        env["PYTHONPATH"] = str(tree)  # ahead of this checkout's editable install (run from `work`, not the checkout)
    name = f"{side}-{index}"
    started = time.time()
    command(f"{side} create", [*trainops, "run", str(spec), "--backend", "kubernetes", *settings,
                               "--job-name", name, "--no-wait"], env, cwd=work)
    wait_until(lambda: len(running(markers)) == NODES, "every trainops pod running")
    up = max(marker["time"] for marker in running(markers)) - started
    PODS_CPU.setdefault(side, []).append(pods_cpu(cluster, name))
    stopping = time.time()
    command(f"{side} delete", [*trainops, "stop", name, "--backend", "kubernetes", *settings], env, cwd=work)
    return up, ended(running(markers)) - stopping


SIDES = {"plain-command": "plain TrainJob create / foreground delete, each a command (official client)",
         "plain-warm": "plain TrainJob create / foreground delete from a warm process (official client)",
         "trainops": "`trainops run --backend kubernetes --no-wait` / `trainops stop`"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="a fourth side: the trainops package of another revision's tree (e.g. `git archive REV "
                             "trainops | tar -x -C TREE`), to show a change side by side")
    parser.add_argument("--call", nargs=3, metavar=("KUBECONFIG", "ACTION", "ARGUMENT"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.call:
        plain_call(*arguments.call)
        return
    sides = dict(SIDES)
    if arguments.compare:
        arguments.compare = arguments.compare.resolve()
        sides["trainops-compare"] = f"the same, trainops of {arguments.compare}"
    rows: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    dropped = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None  # commands and pods inherit os.environ
    import compileall

    for tree in (ROOT, *([arguments.compare] if arguments.compare else [])):
        compileall.compile_dir(str(tree / "trainops"), quiet=1)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="k8s-bench-") as directory:
        work = Path(directory)
        script = work / "code" / "bench_train.py"
        script.parent.mkdir()
        script.write_text(SCRIPT)
        with emulated_cluster(work) as cluster:
            for index in range(arguments.rounds):
                rows["plain-command"].append(plain_round(cluster, work, index, script, fresh=True))
                rows["plain-warm"].append(plain_round(cluster, work, index, script, fresh=False))
                rows["trainops"].append(trainops_round(cluster, work, index, script))
                if arguments.compare:
                    rows["trainops-compare"].append(trainops_round(cluster, work, index, script,
                                                                   arguments.compare))
                print(f"round {index + 1}: " + " | ".join(f"{side} start {rows[side][-1][0]:.2f} s stop "
                                                          f"{rows[side][-1][1]:.2f} s" for side in sides), flush=True)
    print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load_before:.1f} "
          f"before, {os.getloadavg()[0]:.1f} after, {arguments.rounds} rounds, medians in seconds"
          f"{' (PYTHONDONTWRITEBYTECODE dropped)' if dropped else ''}\n")
    print("| command | submit -> all pods running | stop -> all pods gone |\n| --- | --- | --- |")
    for side, label in sides.items():
        print(f"| {label} | {statistics.median(r[0] for r in rows[side]):.2f} | "
              f"{statistics.median(r[1] for r in rows[side]):.2f} |")
    for baseline in ("plain-command", "plain-warm", *(["trainops-compare"] if arguments.compare else [])):
        more = [t[0] - p[0] for p, t in zip(rows[baseline], rows["trainops"], strict=True)]
        verdict = ("met" if statistics.median(more) <= 1 else "MISSED") if baseline == "plain-command" else "(shown)"
        print(f"\nstart, trainops against {baseline}: {statistics.median(more):+.2f} s median (per round "
              f"{', '.join(f'{value:+.2f}' for value in more)}); bound <= 1 s more: {verdict}")
    print("\nCPU seconds of each command (median): " + ", ".join(
        f"{side} {statistics.median(values):.2f}" for side, values in sorted(CPU.items())))
    print("CPU seconds of both pods until both run the script (median): " + ", ".join(
        f"{side} {statistics.median(values):.2f}" for side, values in sorted(PODS_CPU.items())))
    stops = [t[1] for t in rows["trainops"]]
    print(f"stop: {statistics.median(stops):.2f} s median, {max(stops):.2f} s max; bound <= 10 s: "
          f"{'met' if max(stops) <= 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
