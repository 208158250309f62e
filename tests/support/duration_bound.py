"""A bound on how long one test may run, so the suite's growth is seen long before CI's 90-minute limit is hit.

Every test's call (its body, not its fixtures' setup: a session fixture builds a venv or migrates a database once,
for many tests) must end within ``test_seconds_bound`` seconds (pyproject.toml's ``[tool.pytest.ini_options]``),
unless it is named in `EXCEPTIONS` with a bound of its own and the reason it needs one. A test past its bound is
reported failed, with its time and its bound, so the closing line counts it ("1 failed") and `make test` fails.

The bound is about growth, not speed: it is set far above what any test takes beside a CPU hog on a 2-core machine
(the figures are in bench/README.md, "Test suite time"); a test that grows past it has gained minutes and either
gets faster, is split, or is named here with its reason. Load alone must not trip it: on a machine busier than the
test processes plus one hog (a load average above cores + 1 when the test ends, the larger of the 1- and 5-minute
averages), the bound grows in proportion, and the report says so. On a shared 2-core machine at load 12 a
``dag.test()`` of two tasks takes three times what it takes beside one hog.

``pytest --test-seconds-bound=0`` turns the check off (a debugger session, a deliberately slowed machine).
Tests within a fifth of their bound are listed at the end of the run, so one creeping up is seen before it fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

INI_NAME = "test_seconds_bound"
DEFAULT_SECONDS = 300.0
NEAR_SHARE = 0.8


@dataclass(frozen=True)
class Allowance:
    """A test allowed a longer bound, and why."""

    seconds: float
    reason: str


#: Tests allowed more than the default bound, by node id (parametrized ids included, or the bare function's id for
#: all of its parameters). Each names what it runs that cannot be shared or shortened without losing what it proves.
EXCEPTIONS: dict[str, Allowance] = {
    "tests/system/test_airflow_scheduler.py::"
    "test_retrain_pipeline_under_the_real_scheduler_survives_a_triggerer_restart": Allowance(
        900, "the whole retraining DAG (stage, a 16-epoch local job, evaluate, gate, register) under four real "
             "Airflow components, a triggerer killed and its successor's takeover waited for, the train task "
             "cleared mid-job: the components' own heartbeats and intervals set most of its time (386 s at "
             "load 12)"),
    "tests/system/test_airflow_scheduler_sagemaker.py::"
    "test_clearing_a_deferred_sagemaker_task_never_stops_its_job_and_marking_it_failed_does": Allowance(
        900, "two DAG runs under four real Airflow components: a deferred SageMaker task cleared, then one marked "
             "failed, each waited through the scheduler's and the triggerer's own heartbeats (316 s at load 13)"),
    "tests/docs/test_docs_commands.py::test_the_documented_commands_run_as_written": Allowance(
        1800, "every command block of README.md and the quick-start pages run as written, in order, in one copy of "
              "the checkout: make run's training, the image-venv and toolkit runs, an Airflow dags test and two KFP "
              "run-local passes, each of which a newcomer runs as one command (3-9 minutes at load 10-12)"),
}


def add_options(parser: pytest.Parser) -> None:
    parser.addini(INI_NAME, "seconds one test's call may take (0: no bound); exceptions in "
                            "tests/support/duration_bound.py", default=str(DEFAULT_SECONDS))
    parser.addoption("--test-seconds-bound", type=float, default=None,
                     help=f"override the ini option {INI_NAME} (0 turns the bound off)")


def bound_of(nodeid: str, default: float) -> tuple[float, str | None]:
    """The bound for one test, and the reason when it is a named exception."""
    for name in (nodeid, nodeid.split("[", 1)[0]):
        if name in EXCEPTIONS:
            return EXCEPTIONS[name].seconds, EXCEPTIONS[name].reason
    return default, None


def load_scale(load: float, cores: int) -> float:
    """How much longer a test may take at this load average than beside one hog (cores + 1 runnable): at least 1."""
    return max(1.0, load / (max(cores, 1) + 1))


def machine_load() -> float:
    one, five, _ = os.getloadavg()
    return max(one, five)


class DurationBound:
    """The plugin: fails a passed test whose call outran its bound; lists the tests near theirs at the end."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.near: list[tuple[str, float, float]] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" or not report.passed or self.seconds <= 0:
            return
        bound, reason = bound_of(item.nodeid, self.seconds)
        if call.duration <= bound:
            return
        load = machine_load()
        scale = load_scale(load, os.cpu_count() or 1)
        if call.duration <= bound * scale:
            return
        report.outcome = "failed"
        why = f" (a named exception: {reason})" if reason else ""
        loaded = f", {bound * scale:.0f} s at this machine's load average of {load:.1f}" if scale > 1 else ""
        report.longrepr = (
            f"{item.nodeid} passed, but its call took {call.duration:.0f} s, past its bound of {bound:.0f} s"
            f"{loaded}{why}. The bound is there to catch the suite's growth before CI's time limit does: make the "
            f"test share or shorten what it runs, or name it in tests/support/duration_bound.py EXCEPTIONS with "
            f"its reason.")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs where the reports are shown (the xdist controller too), so the list covers every worker's tests.
        if report.when != "call" or self.seconds <= 0:
            return
        bound, _ = bound_of(report.nodeid, self.seconds)
        if NEAR_SHARE * bound < report.duration <= bound:
            self.near.append((report.nodeid, report.duration, bound))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.near:
            return
        terminalreporter.write_sep("-", f"tests within {1 - NEAR_SHARE:.0%} of their time bound")
        for nodeid, duration, bound in sorted(self.near, key=lambda near: near[1] / near[2], reverse=True):
            terminalreporter.write_line(f"{duration:7.0f} s of {bound:.0f} s  {nodeid}")


def configure(config: pytest.Config) -> None:
    chosen = config.getoption("--test-seconds-bound")
    seconds = float(config.getini(INI_NAME)) if chosen is None else chosen
    config.pluginmanager.register(DurationBound(seconds), "trainops-duration-bound")
