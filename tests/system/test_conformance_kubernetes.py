"""The kubernetes backend passes the backend conformance suite (`trainops.backends.testing`) on the API emulator
(tests/support/k8s_api.py) with the stand-in Trainer controller (tests/support/k8s_trainer.py): each job a TrainJob
created through the official client, its nodes' commands run on this machine, followed by the kit's wait."""

from __future__ import annotations

import pytest
from support.k8s_api import api_server
from support.k8s_trainer import FakeTrainer

from trainops.backends import get_backend
from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    directory = tmp_path_factory.mktemp("k8s")
    with api_server(directory) as (store, kubeconfig):
        trainer = FakeTrainer(store)
        try:
            yield kubeconfig, directory
        finally:
            trainer.close()


class TestKubernetesConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, emulator, tmp_path_factory) -> Harness:
        kubeconfig, directory = emulator
        shared = directory / "shared"
        shared.mkdir(mode=0o700, exist_ok=True)
        backend = get_backend("kubernetes", options={"kubeconfig": str(kubeconfig), "shared_dir": str(shared),
                                                    "shared_pvc": "shared", "poll_seconds": 0.2})
        return Harness(backend, tmp_path_factory.mktemp("k8s-code"), options={"queue": "team-a"},
                       bad_options={"colour": "blue"}, instance_type="ml.m5.large",
                       spec_fields={"image_uri": "example.org/python:3", "instance_count": 1}, limit=180.0)
