"""The training operator with a backend it was not written for (issue 38, item 1): the two bugs of 'remote' and of
one backend's options handed to every backend, fixed and kept fixed.

- A backend that does not run jobs in the caller's process (no ``run_here``), waited for in the worker, is submitted
  to and polled; before, any backend that was not ``remote`` ran the job on the LOCAL backend in
  ``wait_mode="worker"``. One that can (``run_here``) runs it in the task's process, on itself.
- Nothing a backend's options type does not take reaches it: ``preflight`` is not given unless the task gives it,
  the checkpoint key only where the options type keeps checkpoints by key; what a task gives that the backend does not
  take fails the task without retries, naming it and the backend.

The backends are registered for the test as an installed package's would be (the registry's entry points)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()  # before Airflow is imported: never write into ~/airflow

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowFailException  # noqa: E402

from trainops.backends.api import Backend, JobResult  # noqa: E402
from trainops.backends.options import BackendOptions  # noqa: E402
from trainops.backends.states import JobStatus  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402

#: (backend, job name, how it was placed, the options it got) of every submit and run, in order.
EVENTS: list[tuple[str, str, str, dict]] = []


@dataclass(frozen=True)
class MemoryOptions(BackendOptions):
    backend: ClassVar[str] = "memory"
    colour: str | None = None


class MemoryBackend(Backend):
    """Jobs kept in this process's memory; each completes on its second look (a wait polls it once)."""

    name = "memory"
    Options = MemoryOptions
    JOBS: ClassVar[dict[str, int]] = {}

    def dry_run(self, spec, name, options):
        return {"job_name": name}

    def create(self, spec, name, options, *, detached, log):
        self.JOBS[name] = 0
        EVENTS.append((self.name, name, "created" + (" detached" if detached else ""), options.to_dict()))
        return self.handle(name, created=True)

    def status_of(self, name):
        return None if name not in self.JOBS else (
            JobStatus.COMPLETED if self.JOBS[name] >= 2 else JobStatus.IN_PROGRESS)

    def describe(self, handle):
        self.JOBS[handle.job_name] += 1
        return JobResult(self.name, handle.job_name, self.status_of(handle.job_name) or JobStatus.FAILED,
                         reattached=not handle.created)

    def wait(self, handle, *, log=None, guards=None):
        EVENTS.append((self.name, handle.job_name, "waited here", {}))
        self.JOBS[handle.job_name] = 2
        return self.describe(handle)

    def stop(self, handle, reason="Stopped by the user"):
        return f"{handle.job_name}: stopped"

    def logs(self, handle, *, follow=False):
        return iter([])

    def log_lines(self, handle, cursor=None, *, limit=1000):
        return [], {}

    def render_request(self, spec, job_name, *, options=None):
        return {"job_name": job_name}


class HereBackend(MemoryBackend):
    """The same jobs, run by the caller (``run_here``)."""

    name = "here"
    RUNS_HERE = True


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    EVENTS.clear()
    MemoryBackend.JOBS.clear()
    monkeypatch.setattr("trainops.backends._entry_points",
                        lambda: {"memory": f"{__name__}:MemoryBackend", "here": f"{__name__}:HereBackend"})


def context() -> dict:
    return {"ti": SimpleNamespace(dag_id="retrain", task_id="train", run_id="manual__1", map_index=-1, try_number=1)}


def operator(backend: str, **more) -> DistributedTrainingOperator:
    spec = {"name": "digits", "entry_point": "train.py", "instance_type": "ml.m5.large"}
    return DistributedTrainingOperator(task_id="train", spec=spec, backend=backend, wait_mode="worker",
                                       check_interval=0, stream_logs=False, **more)


def test_a_backend_that_does_not_run_jobs_here_is_submitted_to_and_polled_in_the_worker_never_local(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    result = operator("memory", backend_options={"colour": "blue"}).execute(context())
    assert (result["backend"], result["status"]) == ("memory", "Completed")
    [(backend, name, placed, options)] = EVENTS
    # detached: the job must not depend on the worker; neither preflight nor a checkpoint key: the type takes none
    assert (backend, placed, options) == ("memory", "created detached", {"colour": "blue"})
    assert name == result["job_name"]
    assert not (tmp_path / "home" / "jobs").exists()  # nothing ran on the local backend


def test_a_backend_that_runs_jobs_here_runs_it_in_the_tasks_process_on_itself():
    result = operator("here").execute(context())
    assert (result["backend"], result["status"]) == ("here", "Completed")
    assert [(backend, placed) for backend, _, placed, _ in EVENTS] == [("here", "created"), ("here", "waited here")]


@pytest.mark.parametrize(("given", "named"), [
    ({"preflight": False}, "preflight"), ({"processes_per_host": 2}, "processes_per_host"),
    ({"backend_options": {"checkpoint_key": "x"}}, "checkpoint_key"),
])
def test_what_the_backend_does_not_take_fails_the_task_naming_it_before_anything_is_created(given, named):
    with pytest.raises(AirflowFailException) as raised:
        operator("memory", **given).execute(context())
    assert f"{named}: is not a setting of the memory backend (its settings: colour)" in str(raised.value)
    assert EVENTS == []


def test_a_connection_names_the_backend_and_its_settings_and_the_tasks_own_lay_over_them(monkeypatch):
    """``backend_conn_id``: a connection a platform team set once (here through Airflow's environment variables, as
    a secrets backend would hand it) names the backend and its settings; the task's own win."""
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_MEMORY",
                       '{"conn_type": "generic", "extra": {"backend": "memory", "options": {"colour": "red"}}}')
    result = operator(None, backend_conn_id="team_memory").execute(context())
    assert result["backend"] == "memory" and EVENTS[0][3] == {"colour": "red"}
    EVENTS.clear()
    MemoryBackend.JOBS.clear()
    operator(None, backend_conn_id="team_memory", backend_options={"colour": "green"}).execute(context())
    assert EVENTS[0][3] == {"colour": "green"}
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_BROKEN", '{"conn_type": "generic", "extra": {"options": ["colour"]}}')
    with pytest.raises(AirflowFailException, match="backend_conn_id: connection 'team_broken': its extra must be"):
        operator(None, backend_conn_id="team_broken").execute(context())


@pytest.mark.parametrize("backend", ["memory", "here"])
def test_a_tasks_backend_connection_is_read_once_per_execute(monkeypatch, backend):
    """One read per execute, whether the job is submitted and polled or runs in the task's process."""
    from support.connection_reads import connection_reads

    reads = connection_reads(monkeypatch, "team_once", {"backend": backend, "options": {"colour": "red"}})
    result = operator(None, backend_conn_id="team_once").execute(context())
    assert (result["backend"], result["status"]) == (backend, "Completed")
    assert reads == ["team_once"]
