"""The evaluate component on the local backend: every metric logged, the HTML report, the gate's verdict as output."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from kfp.dsl import HTML, Metrics, Model

from trainops.backends.sagemaker.backend import evaluation_prefix
from trainops.components.evaluate_task import parse_gate
from trainops.components.factory import build_components
from trainops.components.settings import LOCAL_SETTINGS
from trainops.errors import SpecError

evaluate_model = build_components(LOCAL_SETTINGS).evaluate

EVALUATE_SCRIPT = """\
import json, os
model = json.load(open(os.path.join(os.environ["SM_CHANNEL_MODEL"], "model.json")))
out = os.environ["TRAINOPS_EVALUATION_DIR"]
json.dump({"accuracy": model["accuracy"], "loss": 0.25}, open(os.path.join(out, "metrics.json"), "w"))
open(os.path.join(out, "loss_curve.png"), "wb").write(b"\\x89PNG fake curve")
open(os.path.join(out, "report.md"), "w").write("# evaluated " + os.listdir(os.environ["SM_CHANNEL_TEST"])[0])
"""


@pytest.fixture
def setup(tmp_path):
    """A pipeline directory with the script, test data under the workdir, and a trained model.tar.gz."""
    pipeline_dir = tmp_path / "pipeline"
    pipeline_dir.mkdir()
    (pipeline_dir / "evaluate.py").write_text(EVALUATE_SCRIPT)
    (tmp_path / "work" / "test").mkdir(parents=True)
    (tmp_path / "work" / "test" / "digits.npz").write_text("data")
    model_dir = tmp_path / "trained"
    model_dir.mkdir()
    (model_dir / "model.json").write_text(json.dumps({"accuracy": 0.97}))
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(model_dir / "model.json", arcname="model.json")
    model = Model(name="model", uri=str(archive), metadata={"model_artifact": str(archive), "job_name": "job-7"})
    inputs = dict(spec_json="{}", spec_dir=".", backend="local", workdir=str(tmp_path / "work"),
                  pipeline_dir=str(pipeline_dir),
                  evaluate_json=json.dumps({"entry_point": "evaluate.py", "source_dir": ".",
                                            "channels": {"test": "${workdir}/test"}}),
                  champion_group="", registry_dir="", region="")
    return tmp_path, model, inputs


def outputs(tmp_path: Path):
    return (Metrics(name="metrics", uri=str(tmp_path / "kfp" / "metrics"), metadata={}),
            HTML(name="report", uri=str(tmp_path / "kfp" / "report"), metadata={}))


def test_metrics_are_logged_the_report_embeds_the_curve_and_the_gate_decides(setup):
    tmp_path, model, inputs = setup
    metrics, report = outputs(tmp_path)
    passed = evaluate_model.python_func(model=model, gate="accuracy >= 0.95", metrics=metrics, report=report,
                                        **inputs)
    assert passed is True
    assert metrics.metadata == {"accuracy": 0.97, "loss": 0.25}
    assert report.path.endswith(".html")  # the artifact is known as a page by its name
    page = Path(report.path).read_text()
    assert "data:image/png;base64," in page and "<h1>evaluated digits.npz</h1>" in page  # report.md rendered
    assert report.metadata["passed"] is True and report.metadata["job_name"] == "job-7"
    assert report.metadata["output_dir"] == str(tmp_path / "work" / "evaluations" / "job-7")
    assert json.loads((tmp_path / "work" / "evaluations" / "job-7" / "metrics.json").read_text())["loss"] == 0.25


def test_a_missed_gate_is_a_false_output_with_its_message_not_a_failed_task(setup):
    tmp_path, model, inputs = setup
    metrics, report = outputs(tmp_path)
    passed = evaluate_model.python_func(model=model, gate='{"metric": "loss", "operator": "<", "threshold": 0.1}',
                                        metrics=metrics, report=report, **inputs)
    assert passed is False
    assert report.metadata["message"] == "gate failed: loss = 0.25 is not < 0.1"
    assert metrics.metadata["accuracy"] == 0.97  # metrics are logged whatever the verdict


def test_a_champion_gate_reads_the_registry_under_the_workdir(setup):
    tmp_path, model, inputs = setup
    from trainops.steps.register import register

    register(model_artifact=model.uri, metrics={"accuracy": 0.99}, group="tiny",
             registry_dir=str(tmp_path / "work" / "registry"))
    metrics, report = outputs(tmp_path)
    passed = evaluate_model.python_func(model=model, gate="accuracy > champion", metrics=metrics, report=report,
                                        **{**inputs, "champion_group": "tiny"})
    assert passed is False and "0.99" in report.metadata["message"]


def test_unknown_evaluate_settings_are_bad_input(setup):
    tmp_path, model, inputs = setup
    metrics, report = outputs(tmp_path)
    with pytest.raises(SpecError, match="entry_pont"):
        evaluate_model.python_func(model=model, gate="", metrics=metrics, report=report,
                                   **{**inputs, "evaluate_json": json.dumps({"entry_pont": "evaluate.py"})})


def test_gate_parameters_and_sagemaker_evaluation_prefixes():
    assert parse_gate("") is None and parse_gate("  ") is None
    assert parse_gate("accuracy >= 0.9") == "accuracy >= 0.9"
    assert parse_gate('["a > 1", "b < 2"]') == ["a > 1", "b < 2"]
    with pytest.raises(SpecError, match="gate"):
        parse_gate("[not json")
    assert evaluation_prefix("s3://b/out/job-1/output/model.tar.gz") == "s3://b/out/job-1/evaluation"
    assert evaluation_prefix("s3://b/models/model.tar.gz") == "s3://b/models/evaluation"
