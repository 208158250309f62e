"""EvaluateModelOperator and QualityGateOperator: a real local evaluation through the step, and each of the three
things a failed gate can do (fail with metric/value/threshold, skip downstream, continue)."""

from __future__ import annotations

import json
from pathlib import Path

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk import DAG  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException, DownstreamTasksSkipped  # noqa: E402

from trainops.operators.evaluate import EvaluateModelOperator, QualityGateOperator  # noqa: E402
from trainops.operators.register import RegisterModelOperator  # noqa: E402

SCRIPT = """
import json, os
model = os.environ["SM_CHANNEL_MODEL"]
score = float(open(os.path.join(model, "score.txt")).read())
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "metrics.json"), "w") as sink:
    json.dump({"accuracy": score, "loss": 1 - score}, sink)
print("evaluated", score)
"""


class FakeTI:
    def __init__(self):
        self.dag_id, self.task_id, self.run_id, self.map_index = "retrain", "evaluate", "manual__1", -1
        self.pushed: dict = {}

    def xcom_push(self, key, value):
        self.pushed[key] = value


@pytest.fixture
def evaluation_inputs(tmp_path):
    code, model, test = tmp_path / "code", tmp_path / "model", tmp_path / "test"
    for directory in (code, model, test):
        directory.mkdir()
    (code / "evaluate.py").write_text(SCRIPT)
    (test / "data.txt").write_text("x")

    def with_score(score: float) -> dict:
        (model / "score.txt").write_text(str(score))
        return dict(entry_point="evaluate.py", source_dir=str(code), model_artifact=str(model),
                    channels={"test": str(test)}, output_dir=str(tmp_path / "out"), gate="accuracy >= 0.95")

    return with_score


def evaluate_operator(**arguments) -> EvaluateModelOperator:
    return EvaluateModelOperator(task_id="evaluate", **arguments)


def test_template_fields_exist():
    for operator_class in (EvaluateModelOperator, QualityGateOperator, RegisterModelOperator):
        assert operator_class.template_fields
    op = evaluate_operator(entry_point="e.py", model_artifact="m", channels={}, output_dir="o")
    for field in ("entry_point", "model_artifact", "channels", "gate", "backend", "aws_conn_id", "region_name"):
        assert field in op.template_fields and hasattr(op, field)


def test_a_passing_model_returns_the_metrics_and_the_gate(evaluation_inputs, capsys):
    result = evaluate_operator(**evaluation_inputs(0.97)).execute({"ti": FakeTI()})
    assert result["passed"] is True
    assert result["metrics"] == {"accuracy": 0.97, "loss": pytest.approx(0.03)}
    assert result["gate"]["threshold"] == 0.95
    assert "evaluated 0.97" in capsys.readouterr().out  # the script's output is in the task log
    json.dumps(result)  # small JSON


def test_a_failed_gate_fails_the_task_naming_metric_value_and_threshold(evaluation_inputs):
    with pytest.raises(AirflowException, match=r"gate failed: accuracy = 0\.9 is not >= 0\.95"):
        evaluate_operator(**evaluation_inputs(0.9)).execute({"ti": FakeTI()})


def test_continue_returns_a_failed_verdict_for_a_later_gate_task(evaluation_inputs):
    result = evaluate_operator(on_gate_failure="continue", **evaluation_inputs(0.9)).execute({"ti": FakeTI()})
    assert result["passed"] is False
    assert result["message"].startswith("gate failed: accuracy = 0.9")
    with pytest.raises(AirflowException, match="accuracy = 0.9 is not >= 0.95"):
        QualityGateOperator(task_id="gate", evaluation=result).execute({"ti": FakeTI()})


def test_skip_downstream_skips_every_later_task_and_keeps_the_metrics_in_xcom(evaluation_inputs):
    with DAG("retrain", schedule=None):
        evaluate = evaluate_operator(on_gate_failure="skip_downstream", **evaluation_inputs(0.9))
        register = RegisterModelOperator(task_id="register", model_artifact="m", metrics={}, group="g")
        notify = QualityGateOperator(task_id="notify", evaluation={})
        evaluate >> register >> notify
    ti = FakeTI()
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        evaluate.execute({"ti": ti, "task": evaluate})
    assert sorted(skipped.value.tasks) == ["notify", "register"]
    assert ti.pushed["return_value"]["metrics"]["accuracy"] == 0.9


def test_the_gate_task_passes_a_passing_verdict():
    verdict = {"passed": True, "message": "gate passed: accuracy = 0.97 >= 0.95", "metrics": {"accuracy": 0.97}}
    assert QualityGateOperator(task_id="gate", evaluation=verdict).execute({"ti": FakeTI()}) == verdict


def test_bad_gate_settings_fail_without_retry_naming_the_field(evaluation_inputs):
    with pytest.raises(AirflowFailException, match="on_gate_failure"):
        QualityGateOperator(task_id="gate", evaluation={"passed": False}, on_gate_failure="maybe").execute({})
    with pytest.raises(AirflowFailException, match="evaluation"):
        QualityGateOperator(task_id="gate", evaluation="not a result").execute({})
    with pytest.raises(AirflowFailException, match="gate"):
        evaluate_operator(**{**evaluation_inputs(0.97), "gate": "accuracy >>= 0.95"}).execute({"ti": FakeTI()})


def test_a_champion_gate_without_a_group_is_refused_not_silently_passed(evaluation_inputs):
    arguments = {**evaluation_inputs(0.97), "gate": "accuracy > champion"}
    with pytest.raises(AirflowFailException, match="champion_group"):
        evaluate_operator(**arguments).execute({"ti": FakeTI()})


def test_the_evaluation_timeout_is_passed_to_the_step_and_stops_a_slow_script(evaluation_inputs, tmp_path):
    arguments = evaluation_inputs(0.97)
    (Path(arguments["source_dir"]) / "evaluate.py").write_text("import time\ntime.sleep(60)\n")
    # a templated value (the retraining DAG's XCom, or Jinja) arrives as text
    operator = evaluate_operator(**arguments, timeout="2")
    with pytest.raises(AirflowException, match="ran past its timeout of 2 s"):
        operator.execute({"ti": FakeTI()})


@pytest.mark.parametrize("value", ["soon", "-1", 0])
def test_a_bad_evaluation_timeout_fails_without_retry_naming_the_field(evaluation_inputs, value):
    operator = evaluate_operator(**evaluation_inputs(0.97), timeout=value)
    with pytest.raises(AirflowFailException, match="timeout"):
        operator.execute({"ti": FakeTI()})


def test_the_evaluation_link_is_the_one_its_backend_declares_and_a_local_one_has_none():
    from trainops.backends import get_backend
    from trainops.operators.links import EvaluationJobLink, remember_links

    op = EvaluateModelOperator(task_id="evaluate", entry_point="e.py", model_artifact="s3://b/m.tar.gz",
                               channels={"test": "s3://b/t/"}, output_dir="s3://b/e/", region_name="eu-west-1")
    remember_links(op, get_backend("local"), "evaluation", "evaluate-1")
    assert EvaluationJobLink().get_link(op, ti_key=None) == ""
    sagemaker = get_backend("sagemaker", region="eu-west-1", client_factory=lambda service: None)
    remember_links(op, sagemaker, "evaluation", "evaluate-0123456789")
    assert EvaluationJobLink().get_link(op, ti_key=None) == (
        "https://console.aws.amazon.com/sagemaker/home?region=eu-west-1#/processing-jobs/evaluate-0123456789")
