"""The suite's work units under xdist (`support.work_units`): the modules of a directory that shares a session
fixture (the Ray cluster) go to one worker together, so the fixture starts once per run; other modules go whole to
a worker each, as ``--dist loadfile`` hands them out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.work_units import unit_of

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def test_a_shared_directorys_modules_are_one_unit_and_other_modules_one_each():
    assert unit_of("tests/system/ray/test_ray_torch.py::test_a") == "tests/system/ray/"
    assert unit_of("tests/system/ray/test_ray_stop.py::test_b[x]") == "tests/system/ray/"
    assert unit_of("tests/system/test_slurm_backend.py::test_c") == "tests/system/test_slurm_backend.py"
    assert unit_of("tests/system/raytracing/test_x.py::test_d") == "tests/system/raytracing/test_x.py"


CONFTEST = """
import json, os, sys
import pytest
sys.path.insert(0, {support!r})

@pytest.fixture(scope="session")
def cluster():
    with open({starts!r}, "a") as starts:
        starts.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return "cluster"
"""

HOOK = """
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from work_units import ModulesAndSharedDirectories
    return ModulesAndSharedDirectories(config, log)
"""

MODULE = """
import json, os
def test_uses_the_cluster(cluster):
    with open({ran!r}, "a") as ran:
        ran.write(json.dumps([__name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


@pytest.mark.parametrize("grouped", [True, False], ids=["with-the-scheduler", "plain-loadfile"])
def test_the_shared_directory_starts_its_session_fixture_once(tmp_path, grouped):
    """Four modules of tests/system/ray/ and two others, two workers: with the scheduler every Ray module runs on
    one worker and the session fixture starts once; plain ``--dist loadfile`` (the control) spreads them over both
    workers, each starting its own."""
    starts, ran = tmp_path / "starts.txt", tmp_path / "ran.jsonl"
    project = tmp_path / "project"
    ray = project / "tests" / "system" / "ray"
    ray.mkdir(parents=True)
    (project / "tests" / "conftest.py").write_text(CONFTEST.format(support=str(SUPPORT), starts=str(starts))
                                                   + (HOOK if grouped else ""))
    for index in range(4):
        (ray / f"test_ray_{index}.py").write_text(MODULE.format(ran=str(ran)))
    for index in range(2):
        (project / "tests" / "system" / f"test_other_{index}.py").write_text(
            MODULE.format(ran=str(ran)).replace("(cluster)", "()"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadfile", "--no-loadscope-reorder", "tests"], cwd=str(project), capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in ran.read_text().splitlines()]
    ray_workers = {worker for module, worker in rows if module.startswith("test_ray_")}
    assert len(rows) == 6
    if grouped:
        assert len(ray_workers) == 1 and starts.read_text().splitlines() == sorted(ray_workers)
    else:
        assert len(ray_workers) == 2 and len(starts.read_text().splitlines()) == 2
