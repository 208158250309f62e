"""The toy backend (tests/support/toy_backend), written against `trainops.backends.kit` alone, passes the backend
conformance suite (`trainops.backends.testing`) with real jobs: each is a process of this machine. Its guards come
from the kit's `PolledBackend`: the toy writes no wait loop."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.backends.testing import Conformance, Harness

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

PACKAGE = Path(__file__).resolve().parents[1] / "support" / "toy_backend"


@pytest.fixture(scope="module")
def toy_importable(tmp_path_factory):
    """The toy package installed the way pip installs a distribution (its entry point registers the backend name),
    into a directory of its own that this process and its jobs' runner processes (PYTHONPATH) see."""
    target = tmp_path_factory.mktemp("toy-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(PACKAGE)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), before]))
    sys.path.insert(0, str(target))
    try:
        yield
    finally:
        sys.path.remove(str(target))
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


class TestToyConformance(Conformance):
    @pytest.fixture(scope="class")
    def harness(self, toy_importable, tmp_path_factory) -> Harness:
        from trainops_toy.backend import ToyBackend

        backend = ToyBackend(root=str(tmp_path_factory.mktemp("toy-root")))
        return Harness(backend, tmp_path_factory.mktemp("toy-code"), options={"colour": "blue", "priority": 2},
                       bad_options={"preflight": False})
