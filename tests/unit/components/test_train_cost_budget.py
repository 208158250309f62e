"""The KFP train component's metrics and Model metadata carry the forecast, what was spent and the budget (issue 25
item 4), and the register component puts them in the registry entry's description, as `trainops run` does: a real
local job through the component functions KFP runs."""

from __future__ import annotations

import json
from pathlib import Path

from kfp.dsl import Metrics, Model

from trainops.components.factory import build_components
from trainops.components.settings import LOCAL_SETTINGS
from trainops.steps.attempts import budget_line, cost_figures, registry_note

ops = build_components(LOCAL_SETTINGS)


def inputs(tmp_path: Path) -> dict:
    pipeline_dir = tmp_path / "pipeline"
    (pipeline_dir / "code").mkdir(parents=True)
    (pipeline_dir / "code" / "train.py").write_text(
        "import os, pathlib\nprint('trained', flush=True)\n"
        "pathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text('ok')\n")
    spec = {"name": "priced", "entry_point": "train.py", "source_dir": "code", "instance_type": "ml.m5.large",
            "instance_count": 1, "max_run": 600, "max_cost_usd": 5.0}
    return dict(spec_json=json.dumps(spec), spec_dir=".", backend="local", workdir=str(tmp_path / "work"),
                pipeline_dir=str(pipeline_dir), channels_json="{}", job_name="", name_base="priced", run_key="",
                processes_per_host=0, region="", retries_json="")


def test_the_train_components_metrics_and_the_registry_entry_carry_forecast_spent_and_budget(tmp_path):
    model = Model(name="model", uri=str(tmp_path / "kfp" / "model"), metadata={})
    training = Metrics(name="training", uri=str(tmp_path / "kfp" / "training"), metadata={})
    name, status, _, _ = ops.train.python_func(**inputs(tmp_path), model=model, training=training)
    assert status == "Completed"
    logged = training.metadata
    # 1 x ml.m5.large for max_run 600 s at the catalog's price: the forecast of one attempt
    assert logged["forecast_attempt_usd"] > 0 and logged["spent_usd"] == logged["training_cost_usd"]
    assert logged["max_cost_usd"] == 5.0
    assert abs(logged["budget_left_usd"] - (5.0 - logged["spent_usd"])) < 1e-6
    assert logged["budget"].startswith("forecast at most $") and "max_cost_usd $5.00" in logged["budget"]
    assert model.metadata["cost"]["max_cost_usd"] == 5.0
    note = model.metadata["cost_note"]
    assert note.startswith(f"trained by {name} (forecast at most $") and note.endswith("over 1 attempt")

    ops.register.python_func(model=model, metrics=None, spec_json=inputs(tmp_path / "again")["spec_json"],
                             spec_dir=".", backend="local", workdir=str(tmp_path / "work"),
                             pipeline_dir=str(tmp_path / "pipeline"), group="priced", approval="Approved",
                             registry_dir="", description="nightly", region="")
    entry = json.loads((tmp_path / "work" / "registry" / "priced" / "v1" / "entry.json").read_text())
    assert entry["description"] == f"nightly; {note}"


def test_the_lines_say_what_is_known_and_leave_out_what_is_not():
    cost = {"total": 0.02, "spent": 0.02, "attempts": 2, "forecast": {"attempt_usd": 0.19},
            "budget": {"max_cost_usd": 1.0, "mode": "stop", "left": 0.98}}
    assert cost_figures(cost) == {"forecast_attempt_usd": 0.19, "spent_usd": 0.02, "max_cost_usd": 1.0,
                                  "budget_left_usd": 0.98}
    assert budget_line(cost) == "forecast at most $0.19 per attempt; max_cost_usd $1.00, $0.98 left"
    assert registry_note("job-2", cost) == ("trained by job-2 (forecast at most $0.19 per attempt; max_cost_usd "
                                            "$1.00, $0.98 left): spent $0.02 over 2 attempts")
    unpriced = {"total": None, "attempts": 1, "unknown_prices": ["ml.x9.huge"], "forecast": {"attempt_usd": None}}
    assert cost_figures(unpriced) == {} and budget_line(unpriced) == ""
    assert registry_note("job-1", unpriced) == "trained by job-1: spent cost unknown over 1 attempt (no price for " \
                                               "ml.x9.huge)"
