"""Log marks are input (issue 48, class 6): the Airflow Variable that says where a task's log stands in its job's log
(`trainops.operators.log_marks`) can be set by anyone who may set Variables. A forged one (text, a negative offset,
an offset far past the end of the log, one inside a line) hid every later line of the job from the task log: the
host log reader seeked to it and found nothing, or failed at every poll. Now a mark that is not a cursor, or one the
backend refuses, is ignored with a warning and the task log continues from the job's first line (lines may repeat,
none is hidden). A real detached local job; a dict stands for Airflow's Variables here (tests/system/
test_airflow_log_marks.py forges the Variable in a real Airflow run)."""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home
from support.trigger_log import recorded_trigger

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.operators import log_marks  # noqa: E402

HANDLE = SimpleNamespace(backend="local", job_name="marked-1")
FORGED = {
    "text": "not json at all",
    "a JSON text": json.dumps("algo-1"),
    "a list": json.dumps([1, 2]),
    "a negative offset": json.dumps({"algo-1": -5}),
    "a boolean": json.dumps({"algo-1": True}),
    "a float": json.dumps({"algo-1": 1.5}),
    "huge": json.dumps({f"algo-{n}": n for n in range(20000)}),
}
#: Marks of a cursor's shape (text is a CloudWatch token's shape) that the local backend's log refuses.
TEXT_OFFSET = json.dumps({"algo-1": "forged"})
PAST_THE_END = json.dumps({"algo-1": 10**12})
INSIDE_A_LINE = json.dumps({"algo-1": 3})

JOB = "for step in range(1, 6):\n    print(f'line {step} of the job', flush=True)\n"
ALL = [f"[algo-1 rank 0] line {step} of the job" for step in range(1, 6)]


@pytest.fixture
def variables(monkeypatch):
    store: dict[str, str] = {}
    monkeypatch.setattr("trainops.operators.compat.get_variable", lambda key, default=None: store.get(key, default))
    monkeypatch.setattr("trainops.operators.compat.set_variable", store.__setitem__)
    monkeypatch.setattr("trainops.operators.compat.delete_variable", lambda key: store.pop(key, None))
    return store


class Log:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, message: str, *args) -> None:
        self.warnings.append(message % args)


@pytest.mark.parametrize("kind", sorted(FORGED))
def test_a_mark_that_is_not_a_cursor_is_ignored_with_a_warning_and_the_log_starts_over(variables, kind):
    variables[log_marks.key(HANDLE)] = FORGED[kind]
    log = Log()
    assert log_marks.load(HANDLE, log) == {}  # the cursor of the log's first line, not None (which may skip)
    [warning] = log.warnings
    assert "is not a place in its log" in warning and "continues from the job's first line" in warning, warning


def test_no_mark_and_a_good_mark_are_kept_as_they_are(variables):
    log = Log()
    assert log_marks.load(HANDLE, log) is None
    variables[log_marks.key(HANDLE)] = json.dumps({"algo-1": 120, "algo-2": 0})
    assert log_marks.load(HANDLE, log) == {"algo-1": 120, "algo-2": 0}
    variables[log_marks.key(HANDLE)] = json.dumps({"/aws/sagemaker/TrainingJobs/j/algo-1": "f/3847/s"})
    assert log_marks.load(HANDLE, log) == {"/aws/sagemaker/TrainingJobs/j/algo-1": "f/3847/s"}
    assert log.warnings == []


def test_the_host_log_reader_refuses_an_offset_past_the_end_or_inside_a_line(tmp_path):
    from trainops.backends.hostfs.host_logs import read_new_lines

    logs = tmp_path / "jobs" / "j" / "logs"
    logs.mkdir(parents=True)
    (logs / "algo-1.log").write_bytes(b"first\nsecond\n")
    assert read_new_lines("j", tmp_path, {"algo-1": 6}, 10)[0] == ["[algo-1] second"]
    assert read_new_lines("j", tmp_path, {"algo-1": 13}, 10) == ([], {"algo-1": 13})  # at the end: nothing new
    for cursor, said in (({"algo-1": 14}, "past the end of its log (13 bytes)"), ({"algo-1": 3}, "inside a line"),
                         ({"algo-1": -1}, "not a byte offset"), ({"algo-1": "6"}, "not a byte offset")):
        with pytest.raises(ValueError, match="the log cursor of algo-1 is") as raised:
            read_new_lines("j", tmp_path, cursor, 10)
        assert said in str(raised.value)


@pytest.fixture
def ended_job(tmp_path):
    from trainops.backends.api import get_backend
    from trainops.backends.local import status
    from trainops.steps.train import load_spec

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(JOB)
    spec = {"name": "marked", "entry_point": "train.py", "source_dir": str(tmp_path / "code"),
            "instance_type": "ml.m5.large", "instance_count": 1, "max_run": 300}
    backend = get_backend("local", workdir=str(tmp_path / "work"))
    handle = backend.submit(load_spec(spec), "marked-1", detached=True)
    backend.wait(handle)
    assert status.read("marked-1", str(tmp_path / "work"))["status"] == "Completed"
    return backend, handle, spec


@pytest.mark.parametrize("mark", [TEXT_OFFSET, FORGED["a negative offset"], PAST_THE_END,
                                  INSIDE_A_LINE], ids=["text", "negative", "past-the-end", "inside-a-line"])
def test_a_trigger_resumed_with_a_forged_mark_writes_every_line_of_the_job(variables, ended_job, mark):
    _, handle, _ = ended_job
    variables[log_marks.key(handle)] = mark
    seen: list[str] = []
    event = asyncio.run(recorded_trigger(seen.append)(handle.to_dict(), poll_seconds=0.2).run().__anext__()).payload
    assert event["status"] == "success", event
    assert [line for line in seen if "of the job" in line] == ALL, seen
    assert any("is not a place in its log" in line for line in seen), seen


@pytest.mark.parametrize("mark", [TEXT_OFFSET, PAST_THE_END], ids=["text", "past-the-end"])
def test_a_task_reattaching_with_a_forged_mark_writes_every_line_of_the_job(variables, ended_job, mark, capsys):
    from trainops.operators.training import DistributedTrainingOperator

    backend, handle, spec = ended_job
    variables[log_marks.key(handle)] = mark
    task = DistributedTrainingOperator(task_id="train", spec=spec, backend="local", deferrable=False)
    log = Log()
    cursor = task._write_logs(backend, handle, log_marks.load(handle, log), limit=1000, resume=True)
    out = capsys.readouterr().out
    written = [line for line in out.splitlines() if "of the job" in line]
    assert "is not a place in its log" in out  # the task log says why its lines start over
    assert [re.search(r"\[algo-1 rank 0\] line \d of the job", line)[0] for line in written] == ALL, written
    assert cursor == {"algo-1": handle_log_size(backend, handle)}


def handle_log_size(backend, handle) -> int:
    from trainops.backends.hostfs import paths

    return (paths.job_dir(handle.job_name, handle.workdir) / "logs" / "algo-1.log").stat().st_size


def test_a_cloudwatch_token_cloudwatch_does_not_know_is_refused_and_the_log_starts_over():
    """The SageMaker backend's cursor is stream -> CloudWatch token: a forged token (CloudWatch answers
    InvalidParameterException) or a number in its place is refused like a bad offset, and `log_marks.read` starts
    over from the first line instead of failing at every poll."""
    from support.stubbed_aws import StubbedAWS

    from trainops.backends.sagemaker.logs import LOG_GROUP, read_new_lines

    job, stream = "digits-abc", "digits-abc/algo-1-100"
    aws = StubbedAWS()
    logs = aws.stub("logs")

    def streams() -> None:
        logs.add_response("describe_log_streams", {"logStreams": [{"logStreamName": stream}]},
                          {"logGroupName": LOG_GROUP, "logStreamNamePrefix": job + "/"})

    streams()
    logs.add_client_error("get_log_events", service_error_code="InvalidParameterException",
                          service_message="The specified nextToken is invalid.",
                          expected_params={"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True,
                                           "limit": 1000, "nextToken": "f/forged"})
    streams()
    logs.add_response("get_log_events", {"events": [{"timestamp": 1, "message": "first line"}],
                                         "nextForwardToken": "f/1"},
                      {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True, "limit": 1000})
    backend = SimpleNamespace(log_lines=lambda handle, cursor, limit: read_new_lines(aws, job, cursor, limit))
    log = Log()
    lines, cursor = log_marks.read(backend, SimpleNamespace(backend="sagemaker", job_name=job),
                                   {stream: "f/forged"}, 1000, log)
    assert lines == ["[algo-1] first line"] and cursor == {stream: "f/1"}
    assert "not a token CloudWatch knows" in log.warnings[0], log.warnings
    streams()
    with pytest.raises(ValueError, match="not a CloudWatch token"):
        read_new_lines(aws, job, {stream: 42}, 1000)
