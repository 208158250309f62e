"""A status look that fails is not a failed job, on the local backend (issue 38 item 4): the wait on a detached job
reads its status record; a read that fails for now (here EMFILE, for real: the waiting process's RLIMIT_NOFILE is
lowered to the descriptors it has, so the kernel refuses every open) is a failed look. The wait goes through such a
window to the job's real outcome; a window past both bounds ends the wait with `JobOutOfSight`, the job still
running (its supervisor is another process), and a later wait follows it to its end.

The window ends on a condition, not a time: the handler of the policy's own warning restores the limit after the
third failed look (and lets the job finish), so the test never depends on how fast the machine is.
"""

from __future__ import annotations

import logging
import os
import resource

import pytest

from trainops.backends.api import get_backend
from trainops.backends.local import status
from trainops.backends.looks import JobOutOfSight
from trainops.steps.train import load_spec

pytestmark = pytest.mark.system


@pytest.fixture
def job(tmp_path):
    """A detached local job that runs until the test creates its ``go`` file."""
    go = tmp_path / "go"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(
        "import os, pathlib, time\n"
        f"while not pathlib.Path({str(go)!r}).exists():\n"
        "    time.sleep(0.1)\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('trained')\n")
    spec = load_spec({"name": "unreadable", "entry_point": "train.py", "source_dir": str(tmp_path / "code"),
                      "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 300})
    backend = get_backend("local", workdir=str(tmp_path / "w"))
    handle = backend.submit(spec, "unreadable-job", detached=True)
    yield backend, handle, go
    go.touch()  # whatever happened, the job ends
    backend.stop(handle, "the test ended")


class NoDescriptors(logging.Handler):
    """While active, this process can open no file (EMFILE); the ``until``-th failed look ends that (the policy's
    warning is the condition) and calls ``then``."""

    def __init__(self, until: int | None, then=lambda: None):
        super().__init__(logging.WARNING)
        self.until, self.then, self.seen = until, then, 0
        self.limits = resource.getrlimit(resource.RLIMIT_NOFILE)

    def __enter__(self) -> NoDescriptors:
        logging.getLogger("trainops.backends.looks").addHandler(self)
        lowest_free = os.dup(0)
        os.close(lowest_free)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, self.limits[1]))
        return self

    def restore(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, self.limits)

    def emit(self, record: logging.LogRecord) -> None:
        if "could not look at local job" not in record.getMessage():
            return
        self.seen += 1
        if self.seen == self.until:
            self.restore()
            self.then()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()
        logging.getLogger("trainops.backends.looks").removeHandler(self)


def test_the_local_wait_reads_through_a_window_of_unreadable_records_to_the_jobs_real_outcome(job):
    backend, handle, go = job
    assert status.read(handle.job_name, handle.workdir)["status"] == "InProgress"
    with NoDescriptors(until=3, then=go.touch) as window:
        result = backend.wait(handle, poll_seconds=0.2)
    assert window.seen == 3
    assert result.status.value == "Completed" and result.failure_reason is None, result


def test_a_window_past_both_bounds_ends_the_wait_but_not_the_job(job, monkeypatch):
    backend, handle, go = job
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_COUNT", "3")
    monkeypatch.setenv("TRAINOPS_FAILED_LOOKS_SECONDS", "1")
    with NoDescriptors(until=None), pytest.raises(JobOutOfSight) as raised:
        backend.wait(handle, poll_seconds=0.2)
    message = str(raised.value)
    assert "could not look at local job unreadable-job" in message and "Too many open files" in message
    assert "It may still be running: this wait did not stop it." in message
    assert f"`trainops status unreadable-job --workdir {handle.workdir}` shows where it stands" in message
    assert raised.value.failures >= 3 and raised.value.seconds >= 1
    assert status.read(handle.job_name, handle.workdir)["status"] == "InProgress"  # its supervisor runs it on
    go.touch()
    assert backend.wait(handle, poll_seconds=0.2).status.value == "Completed"
