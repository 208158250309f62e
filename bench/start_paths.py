"""What the two import-time-sensitive start paths cost, at two revisions: `trainops --help` and the parse of
`dags/retrain_pipeline.py` (issue 43 item 5: function-local imports only where import time needs them).

    .venv/bin/python bench/start_paths.py [--before 42304b7] [--after HEAD] [--rounds 9]

Each revision's ``trainops`` and ``dags`` are exported (``git archive``) to a temporary directory; every measurement
is a fresh interpreter with ``PYTHONPATH`` at that tree, timing itself with ``time.process_time`` (CPU time: on a
shared machine wall time swings with the load, CPU time much less), around ``main(['--help'])`` for the CLI and around
running the DAG file once ``airflow.sdk`` is imported (the part trainops adds; bench/dag_parse.py has the cold
figures). Each round runs both revisions back to back; one round first, untimed, writes the bytecode caches.
Printed: the median (min-max) per path and revision, and whether both revisions load the same trainops modules.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAIL = "import json\nprint(json.dumps([spent * 1000, sorted(m for m in sys.modules if m.startswith('trainops'))]))\n"
PATHS = {
    "trainops --help": (
        "import contextlib, io, sys, time\n"
        "start = time.process_time()\n"
        "from trainops.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "spent = time.process_time() - start\n"),
    "dags/retrain_pipeline.py after import airflow.sdk": (
        "import runpy, sys, time\n"
        "import airflow.sdk\n"
        "start = time.process_time()\n"
        "runpy.run_path(sys.argv[1])\n"
        "spent = time.process_time() - start\n"),
}


def export(revision: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", revision, "trainops", "dags"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(code: str, tree: Path, home: str) -> tuple[float, tuple[str, ...]]:
    env = dict(os.environ, PYTHONPATH=str(tree), AIRFLOW_HOME=home)
    done = subprocess.run([sys.executable, "-c", code + TAIL, str(tree / "dags" / "retrain_pipeline.py")],
                          capture_output=True, text=True, env=env, cwd=home, check=True)
    spent, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return spent, tuple(loaded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="42304b7")
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=9)
    given = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {label: export(revision, Path(scratch) / label)
                 for label, revision in (("before", given.before), ("after", given.after))}
        home = str(Path(scratch) / "airflow")
        os.mkdir(home)
        times: dict[tuple[str, str], list[float]] = {}
        loaded: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        for round_ in range(given.rounds + 1):
            for path, code in PATHS.items():
                for label, tree in trees.items():
                    spent, modules = measure(code, tree, home)
                    if round_:  # the first round writes the bytecode caches
                        times.setdefault((path, label), []).append(spent)
                        loaded.setdefault((path, label), set()).add(modules)
        print(f"before {given.before}, after {given.after}: CPU ms, median (min-max) of {given.rounds} rounds; "
              f"load average {os.getloadavg()[0]:.1f}")
        for path in PATHS:
            for label in trees:
                values = times[(path, label)]
                print(f"| {path} | {label} | {statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f}) | "
                      f"{len(next(iter(loaded[(path, label)])))} trainops modules |")
            same = loaded[(path, "before")] == loaded[(path, "after")]
            print(f"{path}: {'the same' if same else 'DIFFERENT'} trainops modules loaded")


if __name__ == "__main__":
    main()
