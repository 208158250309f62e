"""The local backend passes the backend conformance suite (`trainops.backends.testing`): real detached jobs under
their supervisors on this machine, followed by the kit's wait (`trainops.backends.polled`) with the local watch."""

from __future__ import annotations

import pytest

from trainops.backends import get_backend
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]


class TestLocalConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, tmp_path_factory) -> Harness:
        backend = get_backend("local", workdir=str(tmp_path_factory.mktemp("local-work")))
        return Harness(backend, tmp_path_factory.mktemp("local-code"), options={"processes_per_host": 1},
                       bad_options={"colour": "blue"})
