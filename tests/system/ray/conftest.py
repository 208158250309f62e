"""The ray backend's system tests share one real Ray cluster (`support.ray_cluster`): started at the first test that
asks for it, and stopped as soon as the run leaves this directory, not when the session ends; and one relay to its
Jobs API for the tests that run trainops outside the cluster's namespace (``jobs_api``). Under xdist `make test`
hands this directory's modules to one worker together (`support.work_units`), which runs them one after another:
one cluster per run.

Why not a session fixture: an idle Ray cluster is not idle. In a profile of the whole suite (stop 54, process
accounting) the cluster started for these modules lived 45 minutes, 37 of them after its modules had ended, and its
daemons (two log monitors, the dashboard and its agents, the idle workers, the GCS and raylets' threads) spent about
600 CPU seconds in all, steadily, so about 490 after: a tenth of the suite's CPU, on two cores also running the other
modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.ray_cluster import RayCluster, missing, start_cluster

HERE = Path(__file__).resolve().parent
#: The cluster running now (at most one), handed from one module of this directory to the next.
_running: list[RayCluster] = []
#: The test that runs after the one being torn down (None: the last of this process's run).
_next: list[pytest.Item | None] = [None]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    _next[0] = nextitem  # read by `ray_cluster`'s teardown, which runs inside this hook
    return (yield)


def _stays_here(item: pytest.Item | None) -> bool:
    return item is not None and Path(item.path).resolve().parent == HERE


def pytest_sessionfinish(session: pytest.Session) -> None:
    while _running:  # a run cut short (Ctrl-C, -x) between two modules of this directory
        _running.pop().stop()


@pytest.fixture(scope="module")
def ray_cluster():
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    if not _running:
        _running.append(start_cluster())
    yield _running[0]
    if _running and not _stays_here(_next[0]):
        _running.pop().stop()


@pytest.fixture(scope="module")
def jobs_api(ray_cluster):
    """The cluster's Jobs API as a process outside its namespace reaches it: ``http://127.0.0.1:PORT`` (the relay
    the cluster starts with itself)."""
    return ray_cluster.api
