"""The ray backend's system tests share one real Ray cluster (`support.ray_cluster`): started once per test session
at the first test that asks for it, stopped when the session ends; and one relay to its Jobs API for the tests that
run trainops outside the cluster's namespace (``jobs_api``). Under xdist a session is a worker's, so `make test`
hands this directory's modules to one worker together (`support.work_units`): one cluster per run."""

from __future__ import annotations

import pytest
from support.ray_cluster import missing, start_cluster


@pytest.fixture(scope="session")
def ray_cluster():
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def jobs_api(ray_cluster):
    """The cluster's Jobs API as a process outside its namespace reaches it: ``http://127.0.0.1:PORT`` (the relay
    the cluster starts with itself)."""
    return ray_cluster.api
