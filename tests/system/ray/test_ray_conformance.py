"""The ray backend passes the backend conformance suite (`trainops.backends.testing`) on the real test cluster
(`support.ray_cluster`): each job one Ray job through the Jobs API, followed by the kit's wait.

The suite calls the backend in this process, which is outside the cluster's network namespace: it reaches the Jobs
API through the relay of the ``jobs_api`` fixture (`support.ray_cluster.RayCluster.relay`), as an Airflow worker
reaches a cluster's dashboard, through an address of its own."""

from __future__ import annotations

import pytest

from trainops.backends import get_backend
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]


class TestRayConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, jobs_api, tmp_path_factory) -> Harness:
        backend = get_backend("ray", address=jobs_api, poll_seconds=0.5)
        return Harness(backend, tmp_path_factory.mktemp("ray-code"), options={"gpus_per_host": 0},
                       bad_options={"colour": "blue"}, instance_type="ml.c5.xlarge",
                       spec_fields={"instance_count": 1,  # the model goes to a directory every node sees
                                    "output_path": tmp_path_factory.mktemp("ray-output").as_uri()},
                       limit=300.0)
