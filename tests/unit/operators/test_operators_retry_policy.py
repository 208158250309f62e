"""The failure classifier as Airflow 3.3's retry policy (AIP-105), the compat module's names, default_deferrable and
the conf guards of the retraining DAG (pipeline files only from allowed directories, overrides only when allowed)."""

from __future__ import annotations

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402

from trainops.errors import SpecError  # noqa: E402
from trainops.operators import compat  # noqa: E402
from trainops.operators.common import failure_exception  # noqa: E402
from trainops.operators.pipeline_file import (  # noqa: E402
    allowed_pipeline_dirs,
    check_overrides,
    check_pipeline_file,
)
from trainops.operators.retry_policy import failure_class_of, retry_policy  # noqa: E402
from trainops.operators.training import DistributedTrainingOperator  # noqa: E402


def test_this_airflow_has_retry_policies_and_every_operator_gets_the_classifier():
    from airflow.sdk.definitions.retry_policy import RetryAction

    policy = retry_policy()
    assert policy is not None, "Airflow 3.3.2 has pluggable retry policies (airflow.sdk.definitions.retry_policy)"
    operator = DistributedTrainingOperator(task_id="train", spec={})
    assert operator.has_retry_policy and type(operator.retry_policy) is type(policy)
    # a deterministic error of the task's code fails at once (was: retried twice)
    assert policy.evaluate(ModuleNotFoundError("No module named 'sklearn'"), 1, 3).action is RetryAction.FAIL
    infrastructure = failure_exception("training job x ended Failed", {
        "status": "Failed", "failure_reason": "CapacityError: Unable to provision requested ML compute capacity"})
    assert infrastructure.failure_class == "infrastructure"
    assert policy.evaluate(infrastructure, 1, 3).action is RetryAction.RETRY
    assert policy.evaluate(ConnectionResetError("reset by peer"), 1, 3).action is RetryAction.RETRY
    # a bug or an unknown failure: Airflow's own retries decide, as before
    assert policy.evaluate(RuntimeError("boom"), 1, 3).action is RetryAction.DEFAULT
    assert DistributedTrainingOperator(task_id="t", spec={}, retry_policy=None).retry_policy is None


def test_failure_classes_of_exceptions():
    assert failure_class_of(SyntaxError("bad")) == "user"
    assert failure_class_of(TimeoutError()) == "infrastructure"
    assert failure_class_of(ValueError("x")) is None


def test_compat_names_come_from_the_task_sdk_on_airflow_3():
    from airflow.sdk import DAG, BaseOperator

    assert not compat.AIRFLOW_2
    assert compat.BaseOperator is BaseOperator and compat.DAG is DAG
    with pytest.raises(AttributeError):
        compat.NotAName  # noqa: B018


def test_default_deferrable_follows_the_airflow_configuration(monkeypatch):
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert DistributedTrainingOperator(task_id="a", spec={}).wait_mode == "defer"
    assert DistributedTrainingOperator(task_id="b", spec={}, deferrable=False).wait_mode == "worker"
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert DistributedTrainingOperator(task_id="c", spec={}).wait_mode == "worker"
    assert DistributedTrainingOperator(task_id="d", spec={}, wait_mode="reschedule").reschedule is True


def test_a_pipeline_file_outside_the_allowed_directories_is_refused_naming_the_field(tmp_path):
    allowed_dir = tmp_path / "pipelines"
    (allowed_dir / "digits").mkdir(parents=True)
    inside = allowed_dir / "digits" / "pipeline.yaml"
    assert check_pipeline_file(inside, allowed_pipeline_dirs([str(allowed_dir)])) == inside.resolve()
    (tmp_path / "other").mkdir()
    link = allowed_dir / "sneaky"
    link.symlink_to(tmp_path / "other")  # a link out of the directory is outside it
    for outside in (tmp_path / "other" / "pipeline.yaml", link / "pipeline.yaml",
                    allowed_dir / ".." / "other" / "pipeline.yaml"):
        with pytest.raises(SpecError, match="pipeline_file: .* is not inside a directory this DAG reads"):
            check_pipeline_file(outside, allowed_pipeline_dirs([str(allowed_dir)]))
    # the deployment's Variable widens the list (JSON or path-separated)
    assert check_pipeline_file(tmp_path / "other" / "p.yaml",
                               allowed_pipeline_dirs([str(allowed_dir)], f'["{tmp_path / "other"}"]'))
    assert len(allowed_pipeline_dirs([], f"{tmp_path}/a:{tmp_path}/b")) == 2


def test_conf_overrides_only_for_fields_the_dag_author_allows():
    with pytest.raises(SpecError) as refused:
        check_overrides({"role": "arn:aws:iam::1:role/theirs", "image_uri": "evil"}, ())
    assert [problem.path for problem in refused.value.problems] == ["overrides.image_uri", "overrides.role"]
    assert check_overrides({"role": "arn:aws:iam::1:role/x"}, ("role",)) == {"role": "arn:aws:iam::1:role/x"}
    with pytest.raises(SpecError, match="overrides.entry_point"):
        check_overrides({"entry_point": "x.py"}, ("entry_point",))  # never overridable, even when listed


def test_airflow_older_than_2_11_is_refused_with_what_to_do(tmp_path):
    """The compat module run against a stand-in ``airflow`` package of version 2.10.5 refuses to import, naming the
    floor and the upgrade (before: ``No module named 'airflow.sdk'``)."""
    import subprocess
    import sys
    from pathlib import Path

    fake = tmp_path / "airflow"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '2.10.5'\n")
    compat_file = Path(compat.__file__)
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import runpy; "
            f"runpy.run_path({str(compat_file)!r})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "trainops needs Airflow 2.11 or later" in done.stderr and "this is Airflow 2.10.5" in done.stderr
