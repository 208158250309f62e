"""Local training with each rank's share of this machine's cores, beside the libraries' default (issue 39, class 6).

    .venv/bin/python bench/reliability_threads.py                 # the digits training, 3 settings x 2 rounds
    .venv/bin/python bench/reliability_threads.py --rounds 3 --pipeline   # and `make run`'s pipeline, before/after

The digits example's training job (examples/digits/train.yaml: 2 emulated hosts of one rank, 12 epochs, DDP over
gloo), on data exported by its prepare_data.py into a scratch directory, run by `trainops run` under each setting in
turn, round after round (so the load of a shared machine falls on all of them alike):

- ``library default`` (``TRAINOPS_LOCAL_THREADS=0``): each rank starts torch's and OpenMP's default, one thread per
  core, as every local job did before: 2 ranks x N threads on N cores;
- ``share`` (the default now): ``OMP_NUM_THREADS`` = the cores / the ranks on this machine, set by the runtime for
  each rank (`trainops.runtime.plan.local_thread_share`);
- ``one thread`` (``OMP_NUM_THREADS=1`` in the environment, which the runtime leaves alone).

The time is the job's own ``duration_seconds`` (its status record: from its start to its end, the hosts' start-up
included). With ``--pipeline`` it also times `trainops run examples/digits/pipeline.yaml` (what `make run` runs: export,
stage, train, evaluate, register) in a fresh work directory under ``library default`` and ``share``. Prints a table
of medians and ratios to ``share``, and the JSON of every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
EXAMPLE = REPOSITORY / "examples" / "digits"
SETTINGS = {
    "library default": {"TRAINOPS_LOCAL_THREADS": "0"},
    "share": {},
    "one thread": {"OMP_NUM_THREADS": "1"},
}


def _environment(setting: str, home: Path) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OMP_NUM_THREADS", "TRAINOPS_LOCAL_THREADS", "MKL_NUM_THREADS")}
    environment.update(SETTINGS[setting], TRAINOPS_HOME=str(home))
    return environment


def train_once(setting: str, scratch: Path, data: Path, number: int) -> dict:
    home = scratch / f"home-{number}"
    name = f"threads-{number}"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(EXAMPLE / "train.yaml"), "--job-name",
                           name, "--channel", f"train={data / 'train'}"], capture_output=True, text=True,
                          timeout=3600, env=_environment(setting, home), cwd=REPOSITORY)
    wall = time.perf_counter() - started
    record = json.loads((home / "jobs" / name / "status.json").read_text())
    return {"setting": setting, "kind": "training", "exit": done.returncode, "status": record.get("status"),
            "seconds": record.get("duration_seconds"), "wall_seconds": round(wall, 2),
            "tail": done.stdout[-300:] if done.returncode else ""}


def pipeline_once(setting: str, scratch: Path, number: int) -> dict:
    workdir = scratch / f"pipeline-{number}"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(EXAMPLE / "pipeline.yaml"), "--workdir",
                           str(workdir)], capture_output=True, text=True, timeout=3600,
                          env=_environment(setting, scratch / f"pipeline-home-{number}"), cwd=REPOSITORY)
    return {"setting": setting, "kind": "pipeline", "exit": done.returncode,
            "seconds": round(time.perf_counter() - started, 2), "tail": done.stdout[-300:] if done.returncode else ""}


def table(runs: list[dict], kind: str, settings: list[str]) -> list[str]:
    medians = {setting: statistics.median(run["seconds"] for run in runs if run["kind"] == kind
                                          and run["setting"] == setting and run["exit"] == 0)
               for setting in settings if any(run["kind"] == kind and run["setting"] == setting and run["exit"] == 0
                                              for run in runs)}
    base = medians.get("share")
    lines = [f"| {kind} | setting | runs (s) | median (s) | x the share |", "| --- | --- | --- | ---: | ---: |"]
    for setting, median in medians.items():
        each = ", ".join(f"{run['seconds']:.1f}" for run in runs if run["kind"] == kind and run["setting"] == setting)
        ratio = f"{median / base:.2f}" if base else "-"
        lines.append(f"| {kind} | {setting} | {each} | {median:.1f} | {ratio} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pipeline", action="store_true", help="also time `make run`'s pipeline, before and after")
    args = parser.parse_args()
    context = {"cores": os.cpu_count(), "usable": len(os.sched_getaffinity(0)), "load": os.getloadavg()[0]}
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="trainops-threads-") as directory:
        scratch = Path(directory)
        subprocess.run([sys.executable, str(EXAMPLE / "prepare_data.py"), "--out", str(scratch / "data")], check=True,
                       capture_output=True, timeout=600)
        number = 0
        for _ in range(args.rounds):
            for setting in SETTINGS:
                number += 1
                runs.append(train_once(setting, scratch, scratch / "data", number))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
            if args.pipeline:
                for setting in ("library default", "share"):
                    number += 1
                    runs.append(pipeline_once(setting, scratch, number))
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    context["load_end"] = os.getloadavg()[0]
    print(f"{context['usable']} usable CPUs of {context['cores']}; load average {context['load']:.1f} at the start, "
          f"{context['load_end']:.1f} at the end; {args.rounds} rounds")
    print("\n".join(table(runs, "training", list(SETTINGS))))
    if args.pipeline:
        print("\n".join(table(runs, "pipeline", ["library default", "share"])))
    failed = [run for run in runs if run["exit"] != 0]
    for run in failed:
        print(f"FAILED: {run}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
