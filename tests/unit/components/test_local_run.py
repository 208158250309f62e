"""Reading a kfp.local run back: task states from kfp's log records, outputs from executor outputs."""

from __future__ import annotations

import json
import logging
import os

import pytest

from trainops.components.local_run import (
    MAX_EXECUTOR_OUTPUT_BYTES,
    KfpLogRecorder,
    LocalRunOutcome,
    TaskState,
    collect_tasks,
    describe,
    expected_tasks,
    read_task,
)
from trainops.components.pipeline import read_pipeline_source


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("root", logging.INFO, __file__, 1, message, None, None)


def test_the_recorder_reads_colored_kfp_lines_and_lets_every_record_through():
    recorder = KfpLogRecorder()
    lines = ["Executing task \x1b[96m'train-model'\x1b[0m",
             "Task \x1b[96m'train-model'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m",
             "Task \x1b[96m'gate-failed'\x1b[0m finished with status \x1b[91mFAILURE\x1b[0m",
             "Pipeline \x1b[95m'digits-retrain'\x1b[0m finished with status \x1b[91mFAILURE\x1b[0m. Inner task failed"]
    assert all(recorder.filter(record(line)) for line in lines)
    assert recorder.tasks == {"train-model": "SUCCEEDED", "gate-failed": "FAILED"}
    assert recorder.pipeline_status == "FAILURE"


def executor_output(run_dir, task, parameters, artifacts=None):
    (run_dir / task).mkdir(parents=True)
    (run_dir / task / "executor_output.json").write_text(json.dumps(
        {"parameterValues": parameters,
         "artifacts": {name: {"artifacts": [value]} for name, value in (artifacts or {}).items()}}))


def test_tasks_that_never_started_are_a_branch_not_taken_or_not_run(tmp_path):
    expected = ["train-model", "evaluate-model", "register-model", "gate-failed"]
    executor_output(tmp_path, "train-model", {"job_name": "j", "status": "Completed", "reattached": True,
                                              "model_artifact": "/m.tar.gz"})
    executor_output(tmp_path, "evaluate-model", {"Output": False},
                    {"metrics": {"metadata": {"accuracy": 0.5}}, "report": {"uri": "/r", "metadata": {
                        "message": "gate failed: accuracy = 0.5 is not >= 0.9"}}})
    tasks = collect_tasks(tmp_path, expected, {"train-model": "SUCCEEDED", "evaluate-model": "SUCCEEDED",
                                               "gate-failed": "FAILED"})
    assert [task.state for task in tasks.values()] == ["SUCCEEDED", "SUCCEEDED", "SKIPPED", "FAILED"]
    outcome = LocalRunOutcome("p", tmp_path, tasks, pipeline_status="FAILURE")
    assert outcome.metrics == {"accuracy": 0.5} and not outcome.succeeded
    assert describe(tasks["train-model"]) == "SUCCEEDED: job j Completed (re-attached), model /m.tar.gz"
    assert describe(tasks["evaluate-model"]) == "SUCCEEDED: gate failed: accuracy = 0.5 is not >= 0.9"

    failed_training = collect_tasks(tmp_path, expected, {"train-model": "FAILED"})
    assert [task.state for task in failed_training.values()] == ["FAILED", "NOT_RUN", "NOT_RUN", "NOT_RUN"]


def test_a_run_succeeds_only_when_kfp_says_so_and_no_task_failed(tmp_path):
    tasks = {"train-model": TaskState("train-model", "SUCCEEDED")}
    assert LocalRunOutcome("p", tmp_path, tasks, pipeline_status="SUCCESS").succeeded
    assert not LocalRunOutcome("p", tmp_path, tasks, pipeline_status=None).succeeded


def test_the_expected_tasks_follow_the_pipeline_file(tmp_path):
    (tmp_path / "train.yaml").write_text("name: t\nentry_point: train.py\ninstance_type: ml.m5.large\n")
    (tmp_path / "p.yaml").write_text("name: p\nsteps:\n  train: {spec: train.yaml}\n"
                                     "  evaluate: {entry_point: e.py, on_gate_failure: skip_register}\n")
    assert expected_tasks(read_pipeline_source(tmp_path / "p.yaml")) == ["train-model", "evaluate-model"]


@pytest.mark.parametrize("kind", ["fifo", "huge", "not-json", "a-list", "link"])
def test_an_executor_output_that_is_not_what_kfp_wrote_is_reported_never_read_whole_or_blocking(kind, tmp_path,
                                                                                                  caplog):
    task = tmp_path / "train-model"
    task.mkdir()
    output = task / "executor_output.json"
    if kind == "fifo":
        os.mkfifo(output)  # opening it for reading would block for ever
    elif kind == "huge":
        with open(output, "wb") as handle:  # sparse: no disk used
            handle.truncate(MAX_EXECUTOR_OUTPUT_BYTES + 1)
    elif kind == "not-json":
        output.write_text('{"parameterValues": ')
    elif kind == "a-list":
        output.write_text("[1, 2]")
    else:
        (tmp_path / "elsewhere.json").write_text(json.dumps({"parameterValues": {"job_name": "theirs"}}))
        output.symlink_to(tmp_path / "elsewhere.json")
    with caplog.at_level(logging.WARNING, logger="trainops"):
        state = read_task("train-model", "SUCCEEDED", task)
    assert (state.state, state.parameters, state.artifacts) == ("SUCCEEDED", {}, {})
    assert f"train-model: its outputs are not read: {output}" in caplog.text
