"""Issue 24's breaks of the local backend, for bench/reliability.py (section `local-breaks`): each break's regression
tests run as pytest does them, their outcome and time recorded as RELIABILITY.md rows 24.1-24.6. The tests hold the
promises; this records that they held on this run, and how long the checks took.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

# (item, case, bound, test files or node ids)
BREAKS = [
    ("24.1", "A state root another user made first (or group/world-writable, or a link to theirs), with links planted "
             "on the lock files, host log, status and a checkpoint; links planted in your own root",
     "exit 2 naming TRAINOPS_HOME / --workdir and what to do; no link target written; nothing resumed; default "
     "root the user's state directory, 0700",
     ["tests/reliability/test_reliability_state_root.py"]),
    ("24.2", "A forged processes.json (look-alike cgroup with a linked cgroup.kill, a bystander's pid and session: "
             "trainops reads no such file any more) and a status.json controller identity copied from a live "
             "bystander",
     "trainops stop signals nothing unproven and writes through no link; only the lock holder the kernel "
     "reports is the controller",
     ["tests/reliability/test_reliability_stop_proof.py"]),
    ("24.3", "Registering onto another file system (EXDEV and friends), a full disk, a read-only registry (real "
             "256 KiB tmpfs in a mount namespace, and injected errors)",
     "plain-copy fallback; full: JobFailed, read-only: SpecError registry_dir; no version left",
     ["tests/unit/backends/test_local_registry_disks.py"]),
    ("24.4", "Two `trainops run` of one new name at once, 3 rounds each, a 2 s and an instant job",
     "one job; both exit 0; the other follows it",
     ["tests/reliability/test_reliability_same_name_runs.py"]),
    ("24.5", "A host's launcher ends at any moment of an attempt (the hang); 2 hosts, algo-2 failing its health "
             "check on every attempt, 4 cases with a PID namespace and 4 without, every core busy",
     "the launcher's exit status is the job's (never read as 0); every case ends, none waits for max_run",
     ["tests/system/test_retry_budgets.py::test_a_host_failing_its_health_check_on_every_attempt_never_hangs_"
      "with_the_cpu_saturated"]),
    ("24.6", "PATH=/nonexistent in the spec, a 600-character checkpoint_s3_uri key, a file where jobs/NAME or "
             "checkpoints/KEY should be, a rank printing OSC 52 / title / CSI / a forged [trainops] line",
     "job runs or exit 2 with the path named, never an internal error; console and `trainops logs` escaped, the "
     "log file byte-exact",
     ["tests/reliability/test_reliability_local_errors.py"]),
    ("24.7", "Each host a PID namespace by default (root: plain; nobody: in a user namespace), started by one "
             "launcher in every variant: the controller SIGKILLed (alone, or with the hosts' launchers) while a "
             "double-forked daemon without the job's marker runs (the job run from the main thread or another one); "
             "the same with TRAINOPS_LOCAL_PID_NAMESPACE=0; a daemon left by a completed job",
     "every process of the host ends with it; without a PID namespace too, unless the launcher itself is killed "
     "(then the daemon outlives it: the stated limit); what the entrypoint left is stopped and counted; the "
     "variant chosen is the strongest the machine allows",
     ["tests/reliability/test_reliability_host_namespace.py", "tests/unit/backends/test_local_isolation.py"]),
    ("24.8", "A rank SIGKILLed by the pid `trainops status` lists for it (the pid it prints is its host namespace's); "
             "a spec PATH holding a fake mpirun, or /nonexistent, on an mpirun job",
     "the job ends Failed naming the rank; the image's mpirun trainops found runs, never the spec's",
     ["tests/reliability/test_reliability_faults.py::test_a_sigkilled_rank_ends_the_job",
      "tests/reliability/test_reliability_local_errors.py::test_a_spec_path_never_chooses_the_mpirun_a_local_host_"
      "runs"]),
]


def measure(breaks: list[tuple[str, str, str, list[str]]] = BREAKS) -> dict:
    """Each break's tests run as pytest runs them (one process each): whether they passed, pytest's summary, the time.
    Other sections that record their cases by their tests (`hostile_files_bench`) pass their own list."""
    rows = []
    for item, case, bound, tests in breaks:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                              capture_output=True, text=True, timeout=1800, cwd=str(REPOSITORY))
        summary = (done.stdout.strip().splitlines() or [""])[-1].strip("= ")
        rows.append({"item": item, "case": case, "bound": bound, "tests": tests, "passed": done.returncode == 0,
                     "summary": summary, "seconds": round(time.perf_counter() - started, 1)})
    return {"rows": rows}


def render_rows(section: dict) -> list[str]:
    lines = []
    for row in section["rows"]:
        tests = ", ".join(f"`{test.split('/')[-1]}`" for test in row["tests"])
        lines.append(f"| {row['item']} | {row['case']} | {row['summary']} ({row['seconds']} s) | {row['bound']} | "
                     f"{'pass' if row['passed'] else 'FAIL'} | {tests} |")
    return lines


__all__ = ["BREAKS", "measure", "render_rows"]
