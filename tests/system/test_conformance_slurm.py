"""The slurm backend passes the backend conformance suite (`trainops.backends.testing`) on the real two-node test
cluster (`support.slurm_cluster`, started once for this module): each job a Slurm batch job through the Slurm
commands (transport cli), followed by the kit's wait (`trainops.backends.polled`)."""

from __future__ import annotations

import os
import sys

import pytest
from support.slurm_cluster import missing, start_cluster

from trainops.backends import get_backend
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900),
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)  # the Slurm commands this process runs reach this cluster
    try:
        yield cluster
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        cluster.stop()


class TestSlurmConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, slurm, tmp_path_factory) -> Harness:
        backend = get_backend("slurm", shared_dir=str(slurm.shared_dir), poll_seconds=0.5)
        return Harness(backend, tmp_path_factory.mktemp("slurm-code"), options={"python": sys.executable},
                       bad_options={"colour": "blue"}, instance_type="ml.g5.12xlarge",
                       spec_fields={"health_check": False, "instance_count": 1}, limit=300.0)
