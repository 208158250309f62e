"""The backend conformance suite: what every backend must do, as pytest tests a backend package runs in its own suite.

A backend's tests subclass `Conformance` and provide one fixture, ``harness``: a `Harness` that holds the backend
under test and makes job specs whose job succeeds, fails, runs until stopped, or goes quiet (a stall)::

    import pytest
    from trainops.backends.testing import Conformance, Harness

    class TestToyConformance(Conformance):
        @pytest.fixture(scope="class")
        def harness(self, tmp_path_factory):
            return Harness(ToyBackend(root=str(tmp_path_factory.mktemp("toy"))), tmp_path_factory.mktemp("code"))

The suite then checks, on real jobs of that backend: submit and re-attach under each ``if_exists``, stop, the log
cursor and ``logs --follow``, each guard tripping (budget, stall, the wait bound: stopping the job, or leaving it
running when ``stop_at_wait_bound`` is off), a failed look (looked at again; past both bounds the wait gives up and
leaves the job alone), ``check_spec`` with and without options, how the failure rules classify what the backend
reports of a failed or guarded job, and its price. Nothing here is timed: every wait is on a condition, bounded.

Each job runs `JOB_SCRIPT` (written into the harness's code directory), whose ``CONFORMANCE`` environment variable
says what it does; a backend whose jobs run something else (no Python) overrides `Harness.spec`.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from trainops.backends import get_backend
from trainops.backends.api import Backend, JobHandle, JobResult
from trainops.backends.guards import JobGuards
from trainops.backends.looks import COUNT_VARIABLE, SECONDS_VARIABLE, JobOutOfSight, LookFailed
from trainops.backends.states import JobStatus, WaitTimedOut
from trainops.backends.vocabulary import classify_result
from trainops.errors import SpecError
from trainops.spec.job import JobSpec

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

__all__ = ["JOB_SCRIPT", "BEHAVIOURS", "Conformance", "Harness"]

#: What each conformance job does, by its ``CONFORMANCE`` variable: ``succeed`` prints three lines and writes a model
#: file; ``fail`` prints a line and exits 3; ``run`` prints a line every 0.2 s until stopped; ``stall`` prints one line
#: and then nothing until stopped. The model goes to the directory the backend names (SageMaker's contract, the toy's).
JOB_SCRIPT = """\
import os, pathlib, sys, time
behaviour = os.environ.get("CONFORMANCE", "succeed")
print("conformance job starts:", behaviour, flush=True)
if behaviour == "succeed":
    print("line 2", flush=True)
    print("line 3", flush=True)
    model = os.environ.get("SM_MODEL_DIR") or os.environ.get("TOY_MODEL_DIR") or "."
    pathlib.Path(model).mkdir(parents=True, exist_ok=True)
    pathlib.Path(model, "model.txt").write_text("trained")
    sys.exit(0)
if behaviour == "fail":
    print("conformance job fails on purpose", flush=True)
    sys.exit(3)
while True:
    if behaviour == "run":
        print("still running", flush=True)
    time.sleep(0.2)
"""
BEHAVIOURS = ("succeed", "fail", "run", "stall")


class Harness:
    """One backend under the suite, and how to make its jobs.

    Args:
        backend: the backend under test, opened with its settings.
        code_dir: a directory for the job's code (`JOB_SCRIPT` is written there).
        instance_type: the spec's instance type (its price is the one the budget guard uses).
        options: options a job of this backend takes, for ``check_spec`` with options (empty: none).
        bad_options: options it must refuse, each named (empty: not checked).
        spec_fields: fields every job spec of the suite has (``health_check: false`` where the engine's nodes
            have no GPU to check).
        limit: seconds any one wait of the suite may take before it fails, naming what it waited for.
    """

    def __init__(self, backend: Backend, code_dir: str | os.PathLike[str], *, instance_type: str = "ml.m5.large",
                 options: Mapping[str, Any] | None = None, bad_options: Mapping[str, Any] | None = None,
                 spec_fields: Mapping[str, Any] | None = None, limit: float = 180.0):
        self.backend = backend
        self.code_dir = Path(code_dir)
        self.instance_type = instance_type
        self.options = dict(options or {})
        self.bad_options = dict(bad_options or {})
        self.spec_fields = dict(spec_fields or {})
        self.limit = limit
        self.code_dir.mkdir(parents=True, exist_ok=True)
        (self.code_dir / "conformance_job.py").write_text(JOB_SCRIPT)

    def spec(self, behaviour: str, **fields: Any) -> JobSpec:
        """A job spec whose job does ``behaviour`` (one of `BEHAVIOURS`); ``fields`` are laid over the spec's."""
        data: dict[str, Any] = {"name": "conformance", "entry_point": "conformance_job.py",
                                "source_dir": str(self.code_dir), "instance_type": self.instance_type,
                                "environment": {"CONFORMANCE": behaviour}, **self.spec_fields, **fields}
        return JobSpec.model_validate(data)

    def name(self, what: str) -> str:
        """A job name of its own for one test."""
        return f"conf-{what}-{uuid.uuid4().hex[:8]}"

    def submit(self, behaviour: str, name: str, *, if_exists: str = "reattach", **fields: Any) -> JobHandle:
        """Submit a job that does ``behaviour``; it does not depend on this process (``detached``)."""
        return self.backend.submit(self.spec(behaviour, **fields), name, if_exists=if_exists, detached=True,
                                   log=lambda line: None, options=self.options or None)

    def until(self, condition: Any, what: str) -> Any:
        """Look until ``condition()`` is true (returning it); fail naming ``what`` past `limit` (a bound, not a
        timing check)."""
        deadline = time.monotonic() + self.limit
        while True:
            found = condition()
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"never happened within {self.limit:.0f} s: {what}")
            time.sleep(0.2)

    def running(self, handle: JobHandle) -> JobResult:
        """The job's result once its script runs (it printed its first line)."""
        def printed() -> bool:
            lines, _ = self.backend.log_lines(handle, None)
            return any("conformance job starts" in line for line in lines)

        self.until(printed, f"job {handle.job_name} printed its first line")
        return self.backend.describe(handle)

    def ended(self, handle: JobHandle) -> JobResult:
        """The job's result once it ended (looked at, not waited: no guard of the backend's wait is involved)."""
        result: JobResult = self.until(lambda: (lambda found: found if found.status.terminal else None)(
            self.backend.describe(handle)), f"job {handle.job_name} ended")
        return result

    @contextlib.contextmanager
    def failing_looks(self, count: int | None) -> Iterator[list[int]]:
        """Make the backend's looks at a job fail (`LookFailed`): the first ``count`` of them (None: every one);
        yields the count of failed looks so far. Default: the look of a `PolledBackend` (``look``), else
        ``describe``; a backend whose wait looks another way overrides this."""
        name = "look" if hasattr(self.backend, "look") else "describe"
        real = getattr(self.backend, name)
        failed = [0]

        def look(handle: JobHandle) -> Any:
            if count is None or failed[0] < count:
                failed[0] += 1
                raise LookFailed("the conformance suite failed this look on purpose")
            return real(handle)

        setattr(self.backend, name, look)
        try:
            yield failed
        finally:
            delattr(self.backend, name)


class Conformance:
    """The suite: subclass it as ``Test...`` and provide a ``harness`` fixture (`Harness`)."""

    # --- submit and re-attach ---------------------------------------------------------------------------------
    def test_a_job_runs_to_completion_and_each_if_exists_is_honoured(self, harness: Harness) -> None:
        name = harness.name("exists")
        handle = harness.submit("succeed", name)
        assert (handle.backend, handle.job_name, handle.created) == (harness.backend.name, name, True)
        result = harness.backend.wait(handle)
        assert result.status is JobStatus.COMPLETED and result.succeeded, result
        assert harness.backend.status_of(name) is JobStatus.COMPLETED
        again = harness.submit("succeed", name)  # reattach: followed, never run twice
        assert (again.job_name, again.created) == (name, False)
        assert harness.backend.wait(again).reattached
        with pytest.raises(SpecError, match="job_name"):
            harness.submit("succeed", name, if_exists="fail")
        copy = harness.submit("succeed", name, if_exists="new")
        assert copy.created and copy.job_name == f"{name}-2"
        assert harness.backend.wait(copy).status is JobStatus.COMPLETED

    def test_a_failed_job_is_reported_and_retried_under_a_new_name(self, harness: Harness) -> None:
        name = harness.name("fail")
        result = harness.backend.wait(harness.submit("fail", name))
        assert result.status is JobStatus.FAILED and result.failure_reason, result
        verdict = classify_result(result.to_dict(), backend=harness.backend)
        assert verdict is None or not verdict.retryable, verdict  # the script's own failure: not retried
        retry = harness.submit("fail", name)  # reattach after a failure: a new job under the first free suffix
        assert retry.created and retry.job_name == f"{name}-2"
        harness.ended(retry)

    # --- stop -------------------------------------------------------------------------------------------------
    def test_stop_ends_a_running_job_and_a_second_stop_is_no_error(self, harness: Harness) -> None:
        handle = harness.submit("run", harness.name("stop"))
        harness.running(handle)
        assert handle.job_name in harness.backend.stop(handle)
        result = harness.ended(handle)
        assert result.status is JobStatus.STOPPED, result
        assert isinstance(harness.backend.stop(handle), str)  # it ended already: an account, not an error

    # --- logs -------------------------------------------------------------------------------------------------
    def test_the_log_cursor_gives_each_line_once_and_follow_ends_with_the_job(self, harness: Harness) -> None:
        handle = harness.submit("succeed", harness.name("logs"))
        harness.ended(handle)
        everything, cursor = harness.backend.log_lines(handle, None)
        assert [line for line in everything if "conformance job starts" in line], everything
        assert any(line.endswith("line 3") for line in everything), everything
        assert harness.backend.log_lines(handle, cursor) == ([], cursor)  # nothing new after the cursor
        one, after_one = harness.backend.log_lines(handle, None, limit=1)
        assert one == everything[:1]
        rest, _ = harness.backend.log_lines(handle, after_one)
        assert rest == everything[1:]
        followed = list(harness.backend.logs(handle, follow=True))  # ends: the job ended
        assert [line for line in followed if line.endswith("line 3")], followed

    def test_follow_prints_lines_as_they_come_until_the_job_ends(self, harness: Harness) -> None:
        handle = harness.submit("run", harness.name("follow"))
        harness.running(handle)
        lines = harness.backend.logs(handle, follow=True)
        first = next(line for line in lines if "conformance job starts" in line)  # the engine's own lines may lead
        assert first.endswith("conformance job starts: run")
        harness.backend.stop(handle)
        rest = list(lines)  # the follow ends once the stop shows
        assert harness.backend.describe(handle).status.terminal and all(isinstance(line, str) for line in rest)

    # --- the guards -------------------------------------------------------------------------------------------
    def _guarded(self, harness: Harness, behaviour: str, guards: JobGuards, what: str,
                 **fields: Any) -> tuple[JobResult, list[str]]:
        said: list[str] = []
        handle = harness.submit(behaviour, harness.name(what), **fields)
        result = harness.backend.wait(handle, log=said.append, guards=guards)
        return result, said

    def _assert_stopped_by(self, harness: Harness, result: JobResult, said: list[str], kind: str,
                           failure_class: str) -> None:
        assert result.status is JobStatus.STOPPED, result
        assert result.details.get("guard", {}).get("kind") == kind, result
        assert result.failure_reason and result.failure_reason.startswith(result.details["guard"]["message"][:20])
        assert [line for line in said if line.startswith("[trainops] ") and "stopping the job" in line], said
        verdict = classify_result(result.to_dict(), backend=harness.backend)
        assert verdict is not None and verdict.failure_class == failure_class, verdict

    def test_the_budget_guard_stops_a_job_that_spent_it(self, harness: Harness) -> None:
        result, said = self._guarded(harness, "run", JobGuards(budget_usd=0.0001, hourly_usd=3600.0), "budget")
        self._assert_stopped_by(harness, result, said, "budget", "budget")

    def test_the_stall_guard_stops_a_job_that_went_quiet(self, harness: Harness) -> None:
        result, said = self._guarded(harness, "stall", JobGuards(stall_timeout=3.0), "stall")
        self._assert_stopped_by(harness, result, said, "stalled", "infrastructure")

    def test_the_wait_bound_stops_a_job_that_ran_past_it(self, harness: Harness) -> None:
        result, said = self._guarded(harness, "run", JobGuards(grace_seconds=0.0), "bound", max_run=2)
        self._assert_stopped_by(harness, result, said, "wait_bound", "timeout")

    def test_the_wait_bound_leaves_the_job_running_when_told_to(self, harness: Harness) -> None:
        handle = harness.submit("run", harness.name("left"), max_run=2)
        with pytest.raises(WaitTimedOut, match=handle.job_name):
            harness.backend.wait(handle, guards=JobGuards(grace_seconds=0.0, stop_at_bound=False))
        assert not harness.backend.describe(handle).status.terminal  # left running
        harness.backend.stop(handle)
        harness.ended(handle)

    # --- failed looks -----------------------------------------------------------------------------------------
    def test_a_failed_look_is_looked_at_again(self, harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(SECONDS_VARIABLE, "0")
        monkeypatch.setenv(COUNT_VARIABLE, "5")
        handle = harness.submit("succeed", harness.name("look"))
        with harness.failing_looks(2) as failed:
            result = harness.backend.wait(handle)
        assert failed[0] == 2 and result.status is JobStatus.COMPLETED, result

    def test_looks_that_keep_failing_give_up_and_leave_the_job_alone(self, harness: Harness,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(SECONDS_VARIABLE, "0")
        monkeypatch.setenv(COUNT_VARIABLE, "2")
        handle = harness.submit("run", harness.name("sight"))
        harness.running(handle)
        with harness.failing_looks(None), pytest.raises(JobOutOfSight, match="may still be running"):
            harness.backend.wait(handle)
        assert not harness.backend.describe(handle).status.terminal  # never stopped for it
        harness.backend.stop(handle)
        harness.ended(handle)

    # --- the spec ---------------------------------------------------------------------------------------------
    def test_check_spec_with_and_without_options(self, harness: Harness) -> None:
        harness.backend.check_spec(harness.spec("succeed"))
        where = dict(harness.backend.location())  # its context, as a handle carries it
        if harness.options:  # opened as a front end opens it: its context and a job's options in one mapping
            opened = get_backend(harness.backend.name, options={**where, **harness.options})
            opened.check_spec(harness.spec("succeed"))
            chosen = opened.options()
            assert all(getattr(chosen, key) == value for key, value in harness.options.items()), chosen
        if harness.bad_options:
            with pytest.raises(SpecError) as refused:
                get_backend(harness.backend.name, options={**where, **harness.bad_options})
            assert all(key in str(refused.value) for key in harness.bad_options), refused.value
        missing = harness.spec("succeed", entry_point="no_such_script.py")
        with pytest.raises(SpecError, match="no_such_script.py"):
            harness.backend.submit(missing, harness.name("spec"), detached=True, log=lambda line: None)
        assert harness.backend.status_of(harness.name("absent")) is None
