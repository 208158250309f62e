"""Shared fixtures (AWS: a moto server per module and per-test environment pointing boto3 at it; Airflow: a home per
module from one migrated template database), the bound on one test's time (`support.duration_bound`), and each
module's total time at the end of a run (`support.module_times`, ``--module-times=N``)."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path

import pytest

# tests/support holds helpers (not tests); make it importable as `support` without __init__.py files under tests/.
sys.path.insert(0, str(Path(__file__).parent))

AWS_TEST_REGION = "us-east-1"

# No developer's file of named backends (~/.config/trainops/backends.yaml) reaches a test, nor a test's process:
# a test of named backends sets its own.
os.environ["TRAINOPS_BACKENDS"] = os.devnull
# Nor does a test's job land in the developer's job index (trainops.job_index): one per test session, a test of the
# index sets its own.
os.environ["TRAINOPS_JOB_INDEX"] = tempfile.mkdtemp(prefix="trainops-test-job-index-")

# Ctrl-C reaches the processes the tests start. A shell without job control starts `make test &` (or `nohup make
# test`) with SIGINT ignored, and an ignored signal stays ignored across fork and exec, so every process of the run
# would ignore the Ctrl-C the tests send (a report server, `make slurm-cluster`, a job's launcher) and those tests
# would fail for the way the suite was started. A handler, unlike an ignored signal, is reset to the default by
# exec: the tests' processes start as a terminal's do.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from support import duration_bound, module_times  # noqa: E402

# Airflow homes: one `airflow db migrate` per run (the template), a copy per module (see support/airflow_home.py).
# Modules that import `airflow_home` themselves get the same fixture.
from support.airflow_home import airflow_db_template, airflow_home  # noqa: E402,F401 - fixtures for every test


def pytest_addoption(parser):
    duration_bound.add_options(parser)
    module_times.add_options(parser)


def pytest_configure(config):
    duration_bound.configure(config)
    module_times.configure(config)


@pytest.fixture(scope="module")
def moto_endpoint():
    """The URL of a plain moto server on 127.0.0.1, as a user starts one (started once per test module, stopped after
    it: its thread must not outlive the module, since a process with other threads never forks, e.g. a large local
    stage). What moto lacks stays missing here: SageMaker's Service Quotas, FSx's Lifecycle and MountName; the
    fixtures `moto_quotas` and `moto_fsx_details` add them for the tests of the checks that read them."""
    from support.moto_server import MotoServer

    server = MotoServer().start()
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def moto_quotas(moto_endpoint):
    """SageMaker's service quotas in the moto server (tests/support/moto_quotas.py) for this test; yields
    `set_quota(name, value)`."""
    from support.moto_quotas import patch_sagemaker_quotas, set_quota

    undo = patch_sagemaker_quotas()
    try:
        yield set_quota
    finally:
        undo()


@pytest.fixture
def moto_fsx_details(moto_endpoint):
    """FSx descriptions with a Lifecycle and a MountName, as AWS gives them (tests/support/moto_server.py), for this
    test; yields `set_file_system(file_system_id, lifecycle=..., mount_name=...)`."""
    from support.moto_server import patch_fsx_descriptions, set_file_system

    undo = patch_fsx_descriptions()
    try:
        yield set_file_system
    finally:
        undo()


@pytest.fixture
def aws_environment(monkeypatch, moto_endpoint):
    """Dummy credentials, a region, and AWS_ENDPOINT_URL pointing boto3 at the moto server; returns the endpoint."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", AWS_TEST_REGION)
    monkeypatch.setenv("AWS_REGION", AWS_TEST_REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    # Never read a developer's real AWS files during tests.
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    return moto_endpoint


@pytest.fixture
def aws_clients(aws_environment):
    """A trainops client factory (adaptive retries) bound to the moto server."""
    from trainops.aws.clients import default_client_factory

    return default_client_factory(region=AWS_TEST_REGION)


@pytest.fixture
def task_state(monkeypatch):
    """The state Airflow records for a killed try's task instance (what its execution API or database answers to
    `trainops.operators.kills.task_state`): set ``states["now"]`` (default ``failed``: a user marked the task
    failed); an exception there is a look-up that fails. ``states["asked"]`` lists the task instances looked up."""
    states: dict = {"now": "failed", "asked": []}

    def state(ti):
        if isinstance(states["now"], Exception):
            raise states["now"]
        states["asked"].append((ti.dag_id, ti.task_id, ti.run_id, ti.map_index))
        return states["now"]

    monkeypatch.setattr("trainops.operators.kills.task_state", state)
    return states


@pytest.fixture(autouse=True)
def _own_job_index(monkeypatch, tmp_path_factory):
    """Each test its own job index (trainops.job_index): a job another test ran under the same name is never the
    one `trainops status NAME` finds."""
    monkeypatch.setenv("TRAINOPS_JOB_INDEX", str(tmp_path_factory.mktemp("job-index")))


# The order the modules are handed out in. `make test` runs two xdist workers with ``--dist loadfile``: a module goes
# whole to one worker (its module fixtures, a Slurm cluster or an Airflow home, are set up once), the next module to
# whichever worker is free. Handed out longest first, the run ends on short unit modules on both workers, instead of
# one worker idling while the other runs a ten-minute module it started last. Within a rank, collection order.
LONGEST_FIRST = (
    "slow",  # a module with a test marked slow: the real Airflow components, minutes each
    "tests/system/",  # real processes, servers, clusters
    "tests/reliability/",  # hostile inputs and faults, many processes
)  # then the rest: unit, golden and differential modules, seconds each


def module_rank(items: list[pytest.Item]) -> int:
    """A module's place in `LONGEST_FIRST`: the slow marker on any of its tests, else its directory."""
    if any(item.get_closest_marker("slow") for item in items):
        return 0
    return next((rank for rank, prefix in enumerate(LONGEST_FIRST) if items[0].nodeid.startswith(prefix)),
                len(LONGEST_FIRST))


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent when pytest runs without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Modules whole to a worker, the Ray modules together (`support.work_units`: one Ray cluster per run)."""
    from support.work_units import ModulesAndSharedDirectories  # only under xdist, which this hook implies

    return ModulesAndSharedDirectories(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(modules.values(), key=module_rank)  # a stable sort: modules stay whole and in order
    items[:] = [item for module in ranked for item in module]
