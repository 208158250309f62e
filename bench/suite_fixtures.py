"""What the test suite's shared Airflow fixture saves: `airflow db migrate` in a fresh home against a copy of one
migrated template database (tests/support/airflow_home.py), side by side in one run.

Each round migrates one fresh home (a subprocess, as the fixture did for every test module before) and copies the
template into another (in this process, as the fixture does now); wall time and CPU time (the migration's child CPU,
the copy's own), median (min-max) over the rounds.

    .venv/bin/python bench/suite_fixtures.py --repeat 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.airflow_home import copy_migrated_database, migrate, migrated_template  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    walls: dict[str, list[float]] = {"migrate": [], "copy": []}
    cpus: dict[str, list[float]] = {"migrate": [], "copy": []}
    with tempfile.TemporaryDirectory(prefix="suite-fixtures-") as scratch:
        root = Path(scratch)
        template = migrated_template(root / "shared")
        for round_ in range(arguments.repeat):
            home = root / f"migrated-{round_}"
            home.mkdir()
            wall, cpu = time.perf_counter(), children_cpu()
            migrate(home)
            walls["migrate"].append(time.perf_counter() - wall)
            cpus["migrate"].append(children_cpu() - cpu)
            wall, cpu = time.perf_counter(), own_cpu()
            copy_migrated_database(template, root / f"copied-{round_}")
            walls["copy"].append(time.perf_counter() - wall)
            cpus["copy"].append(own_cpu() - cpu)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("| a module's Airflow home | wall s | CPU s |")
    print("| --- | ---: | ---: |")
    print(f"| `airflow db migrate` (before) | {summary(walls['migrate'])} | {summary(cpus['migrate'])} |")
    print(f"| copy of the migrated template (now) | {summary(walls['copy'])} | {summary(cpus['copy'])} |")


if __name__ == "__main__":
    main()
