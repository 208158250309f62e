"""Issue 39's attack classes, for bench/reliability.py (section `hostile-files`): each class's tests run as pytest runs
them, their outcome and time recorded as RELIABILITY.md rows 39.1-39.7 (the red team's own cases are held out: these
are the project's). The tests hold the promises; this records that they held on this run.
"""

from __future__ import annotations

from local_breaks_bench import measure as measure_breaks
from local_breaks_bench import render_rows

# (item, case, bound, test files or node ids)
CLASSES = [
    ("39.2", "Reading what a job can write: a 512 MiB sparse failure file; a FIFO as the controller lock, the status "
             "record, a host log, the failure file, metrics.json; model archives with a GNU sparse member, a negative "
             "size, hostile modification times, a corrupt header after good members, a truncated gzip, a bomb; "
             "metrics of 1e999, NaN, a 400-digit integer",
     "read bounded (process peak < 300 MB), a regular file only, never blocking; each archive refused naming the "
     "member, nothing extracted or dropped; each metric refused by name; no raw Python error",
     ["tests/reliability/test_reliability_hostile_reads.py"]),
]


def measure() -> dict:
    return measure_breaks(CLASSES)


__all__ = ["CLASSES", "measure", "render_rows"]
