"""The test suite's time by module, from the phase log of a run (tests/support/module_times.py):

    .venv/bin/python -m pytest -q -p no:cacheprovider --module-times-file=/tmp/phases.tsv tests/unit
    .venv/bin/python bench/suite_profile.py /tmp/phases.tsv [--top 40] [--by directory]

One line per module (or per directory with ``--by directory``), largest total first: the tests, the wall seconds
of all their setups, calls and teardowns, the CPU seconds of the test process and the children it reaped
meanwhile (a low share of the wall time: the module waits rather than computes), and the load average the phases
ended at (a figure taken at load 12 on 2 cores is several times a quiet machine's).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Totals:
    tests: int = 0
    setup: float = 0.0
    call: float = 0.0
    teardown: float = 0.0
    cpu: float = 0.0
    loads: list[float] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return self.setup + self.call + self.teardown


def group_of(nodeid: str, by: str) -> str:
    module = nodeid.split("::", 1)[0]
    return module.rsplit("/", 1)[0] + "/" if by == "directory" else module


def read(path: Path, by: str) -> dict[str, Totals]:
    groups: dict[str, Totals] = defaultdict(Totals)
    for line in path.read_text(encoding="utf-8").splitlines():
        when, wall, cpu, load, _worker, _outcome, nodeid = line.split("\t", 6)
        totals = groups[group_of(nodeid, by)]
        setattr(totals, when, getattr(totals, when) + float(wall))
        totals.cpu += float(cpu)
        totals.loads.append(float(load))
        totals.tests += when == "call"
    return groups


def table(groups: dict[str, Totals], top: int) -> list[str]:
    total = sum(group.wall for group in groups.values()) or 1.0
    lines = [f"{'wall s':>8} {'share':>6} {'setup':>7} {'call':>8} {'CPU s':>7} {'CPU/wall':>8} {'load':>5} "
             f"{'tests':>5}  module"]
    ranked = sorted(groups.items(), key=lambda item: item[1].wall, reverse=True)
    for name, group in ranked[:top]:
        lines.append(f"{group.wall:8.1f} {group.wall / total:6.1%} {group.setup:7.1f} {group.call:8.1f} "
                     f"{group.cpu:7.1f} {group.cpu / group.wall if group.wall else 0:8.0%} "
                     f"{statistics.median(group.loads):5.1f} {group.tests:5d}  {name}")
    rest = ranked[top:]
    if rest:
        lines.append(f"{sum(group.wall for _, group in rest):8.1f} "
                     f"{sum(group.wall for _, group in rest) / total:6.1%} {'':7} {'':8} "
                     f"{sum(group.cpu for _, group in rest):7.1f} {'':8} {'':5} "
                     f"{sum(group.tests for _, group in rest):5d}  ({len(rest)} more)")
    lines.append(f"{total:8.1f} {1:6.1%} {'':7} {'':8} {sum(group.cpu for group in groups.values()):7.1f} "
                 f"{'':8} {'':5} {sum(group.tests for group in groups.values()):5d}  all")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phases", type=Path, help="a --module-times-file log")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--by", choices=("module", "directory"), default="module")
    options = parser.parse_args()
    print("\n".join(table(read(options.phases, options.by), options.top)))


if __name__ == "__main__":
    main()
