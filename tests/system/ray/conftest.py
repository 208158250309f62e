"""The ray backend's system tests share one real Ray cluster (`support.ray_cluster`): started once per test session
(per xdist worker) at the first test that asks for it, stopped when the session ends."""

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
