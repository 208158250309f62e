"""The states tables (waiters as data) shared by the wait loop, the Airflow trigger and the CLI."""

from __future__ import annotations

import logging

import botocore.session
import pytest

from trainops.backends import states
from trainops.backends.sagemaker import vocabulary as sagemaker_words


@pytest.mark.parametrize(
    ("resource", "status", "expected"),
    [
        ("training_job", "InProgress", "waiting"),
        ("training_job", "Stopping", "waiting"),
        ("training_job", "Completed", "success"),
        ("training_job", "Failed", "failure"),
        ("training_job", "Stopped", "failure"),
        ("processing_job", "Completed", "success"),
        ("processing_job", "Failed", "failure"),
        ("fsx_task", "EXECUTING", "waiting"),
        ("fsx_task", "SUCCEEDED", "success"),
        ("fsx_task", "CANCELED", "failure"),
        ("fsx_file_system", "AVAILABLE", "success"),
        ("fsx_file_system", "CREATING", "waiting"),
        ("fsx_file_system", "MISCONFIGURED", "failure"),
        ("fsx_association", "CREATING", "waiting"),
        ("fsx_association", "AVAILABLE", "success"),
        ("training_job", None, "waiting"),
    ],
)
def test_classify(resource, status, expected):
    assert states.classify(resource, status) == expected


def test_unknown_status_waits_and_warns_once(caplog):
    with caplog.at_level(logging.WARNING, logger="trainops.backends.states"):
        assert states.classify("training_job", "Hibernating") == "waiting"
        assert states.classify("training_job", "Hibernating") == "waiting"
    warnings = [record for record in caplog.records if "Hibernating" in record.getMessage()]
    assert len(warnings) == 1


def test_unknown_resource_is_a_programming_error():
    with pytest.raises(KeyError):
        states.classify("lambda_function", "Active")


@pytest.mark.parametrize(
    ("resource", "service", "shape"),
    [
        ("training_job", "sagemaker", "TrainingJobStatus"),
        ("processing_job", "sagemaker", "ProcessingJobStatus"),
        ("fsx_task", "fsx", "DataRepositoryTaskLifecycle"),
        ("fsx_file_system", "fsx", "FileSystemLifecycle"),
        ("fsx_association", "fsx", "DataRepositoryLifecycle"),
    ],
)
def test_every_status_the_api_defines_is_in_the_table(resource, service, shape):
    # botocore's service model is the list of statuses AWS can return; a new one shows up here first.
    model = botocore.session.get_session().get_service_model(service)
    assert set(model.shape_for(shape).enum) <= set(sagemaker_words.TABLES[resource])


def test_every_secondary_status_has_a_meaning():
    model = botocore.session.get_session().get_service_model("sagemaker")
    assert set(model.shape_for("SecondaryStatus").enum) <= set(sagemaker_words.TRAINING_SECONDARY_MEANINGS)
    assert "spot" in sagemaker_words.explain_secondary_status("Interrupted")
    assert "max_run" in sagemaker_words.explain_secondary_status("MaxRuntimeExceeded")


def test_terminal_statuses_and_wait_bound():
    assert states.terminal_statuses("training_job") == {"Completed", "Failed", "Stopped", "Deleting"}
    assert states.is_terminal("fsx_task", "FAILED") and not states.is_terminal("fsx_task", "PENDING")
    assert states.wait_bound_seconds(3600, None, 600) == 4200
    assert states.wait_bound_seconds(3600, 7200, 600) == 11400


def test_states_module_is_stdlib_only():
    import ast
    import sys
    from pathlib import Path

    tree = ast.parse(Path(states.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"__future__", "trainops"} <= set(sys.stdlib_module_names)
