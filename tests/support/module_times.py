"""Where the suite's time goes, by test module: every run can say which modules hold its minutes.

``--durations`` names the slowest single phases; most of the suite's time is spread over many tests of middling
length, so the question "which module is worth making cheaper" needs each module's total. With
``--module-times=N`` (`make test` passes it) the end of the run lists the N modules of the largest total: the wall
seconds of every setup, call and teardown of the module's tests, and the CPU seconds spent meanwhile by the test
process and everything it started (`CpuGroup`): where the test process may make a cgroup (root, the cgroup v1
``cpuacct`` hierarchy or cgroup v2), it moves itself into one of its own, and the group's CPU counts every process
started from it, the daemons it never reaps included (a Slurm cluster's, a Ray cluster's, an Airflow component, a
detached job supervisor). Elsewhere the figure is the process and the children it reaped (Python interpreters,
torchrun, ``airflow`` commands), and daemons are missing from it. A daemon that outlives its module (a session's
cluster) counts in whichever module runs meanwhile. A module whose CPU share of its wall time is small is waiting
(a scheduler's heartbeat, a Slurm time limit, a poll interval): more workers or a shorter wait would shorten it,
more cores would not.

``--module-times-file=PATH`` writes one line per phase (tab-separated: phase, wall s, CPU s, load average, worker,
outcome, node id) for the whole run; ``bench/suite_profile.py`` sums such a file by module.

Under xdist each worker measures its own tests' CPU and hands it to the controller on the report (a user
property), so the list covers every worker.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

CPU_PROPERTY = "cpu_seconds"


def add_options(parser: pytest.Parser) -> None:
    parser.addoption("--module-times", type=int, default=0, metavar="N",
                     help="list the N test modules of the largest total time (wall and CPU) at the end; 0: none")
    parser.addoption("--module-times-file", default=None, metavar="PATH",
                     help="write every test phase's wall and CPU seconds to PATH (tab-separated)")


def cpu_seconds() -> float:
    """CPU time of this process and of the children it has reaped so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuGroup:
    """A cgroup holding this process and everything it starts from now on, for their CPU time (the kernel counts
    it; no process is looked for). Only accounting: under cgroup v1 the ``cpuacct`` hierarchy schedules nothing;
    under v2 the new group enables no controller."""

    def __init__(self, group: Path, parent: Path, usage: Callable[[Path], float]):
        self.group, self.parent, self._usage = group, parent, usage

    @classmethod
    def open(cls) -> CpuGroup | None:
        """This process moved into a new group beside the one it is in; None where it cannot be (not root, no
        cgroup file system): the caller falls back to `cpu_seconds`."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                root, usage = Path("/sys/fs/cgroup/cpuacct"), _cpuacct_seconds
            elif controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                root, usage = Path("/sys/fs/cgroup"), _cpu_stat_seconds  # cgroup v2 alone
            else:
                continue
            parent = root / path.lstrip("/")
            _remove_empty_groups(parent)
            group = parent / f"trainops-tests-{os.getpid()}"
            try:
                group.mkdir()
                (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
                usage(group)
            except OSError:
                with contextlib.suppress(OSError):
                    group.rmdir()
                continue
            return cls(group, parent, usage)
        return None

    def seconds(self) -> float:
        return self._usage(self.group)

    def close(self) -> None:
        """Back into the group it came from; the group is removed once no process it counts is left."""
        with contextlib.suppress(OSError):
            (self.parent / "cgroup.procs").write_text(f"{os.getpid()}\n")
            self.group.rmdir()


def _remove_empty_groups(parent: Path) -> None:
    """Groups an earlier run left (its test process ended while a daemon it started was still ending, so the group
    could not be removed then): the kernel removes only a group no process is in, so a running worker's stays."""
    for stale in parent.glob("trainops-tests-*"):
        with contextlib.suppress(OSError):
            stale.rmdir()


def _cpuacct_seconds(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


def _cpu_stat_seconds(group: Path) -> float:
    fields = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(fields["usage_usec"]) / 1e6


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class ModuleTimes:
    """The plugin: CPU measured around each phase where the test runs; totals kept where the reports arrive."""

    def __init__(self, top: int, path: str | None, reporting: bool, group: CpuGroup | None = None):
        self.top = top
        self.group = group
        self.measure = group.seconds if group is not None else cpu_seconds
        self.file = open(path, "a", encoding="utf-8") if path and reporting else None  # noqa: SIM115 - whole run
        self.started: dict[tuple[str, str], float] = {}
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)

    def _start(self, item: pytest.Item, when: str) -> None:
        self.started[(item.nodeid, when)] = self.measure()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._start(item, "setup")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self._start(item, "call")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self._start(item, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        started = self.started.pop((item.nodeid, report.when), None)
        if started is not None:
            report.user_properties.append((CPU_PROPERTY, round(self.measure() - started, 3)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs where the reports are shown: the xdist controller sees every worker's.
        cpu = next((value for name, value in report.user_properties if name == CPU_PROPERTY), 0.0)
        module = module_of(report.nodeid)
        self.wall[module] += report.duration
        self.cpu[module] += cpu
        if report.when == "call":
            self.tests[module] += 1
        if self.file is not None:
            worker = getattr(report, "node", None)
            name = getattr(worker, "gateway", None) and worker.gateway.id  # xdist: the worker's id
            self.file.write(f"{report.when}\t{report.duration:.3f}\t{cpu:.3f}\t{os.getloadavg()[0]:.1f}\t"
                            f"{name or '-'}\t{report.outcome}\t{report.nodeid}\n")
            self.file.flush()

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.top <= 0 or not self.wall:
            return
        total = sum(self.wall.values())
        terminalreporter.write_sep("-", f"{self.top} test modules of the largest total time "
                                        f"(wall s summed over all workers: {total:.0f} s)")
        terminalreporter.write_line(f"{'wall s':>8} {'share':>6} {'CPU s':>7} {'tests':>5}  module")
        for module in sorted(self.wall, key=self.wall.get, reverse=True)[:self.top]:
            wall = self.wall[module]
            terminalreporter.write_line(f"{wall:8.1f} {wall / total:6.1%} {self.cpu[module]:7.1f} "
                                        f"{self.tests[module]:5d}  {module}")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.file is not None:
            self.file.close()
        if self.group is not None:
            self.group.close()


def configure(config: pytest.Config) -> None:
    top, path = config.getoption("--module-times"), config.getoption("--module-times-file")
    if top <= 0 and not path:
        return
    worker = hasattr(config, "workerinput")  # an xdist worker measures; the controller reports
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # The process that runs the tests (a worker, or the only process without xdist) counts its descendants' CPU.
    controller = not worker and bool(getattr(config.option, "numprocesses", None))
    group = None if controller else CpuGroup.open()
    config.pluginmanager.register(ModuleTimes(top, path, not worker, group), "trainops-module-times")
