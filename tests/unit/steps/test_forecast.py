"""The cost forecast of one attempt (trainops.steps.forecast), the budget check before anything is created, the rule
that starts no retry that cannot fit, and what the train step's result carries (forecast, spent, budget)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from trainops.errors import SpecError
from trainops.runtime import catalog
from trainops.spec.job import JobSpec
from trainops.steps.attempts import run_attempts
from trainops.steps.forecast import check_budget, forecast, hourly_cost, retry_fits

P4D = catalog.hourly_price("ml.p4d.24xlarge", "us-east-1")
LOST = "the launcher of host algo-1 was killed by signal 9 without writing a failure file"


def spec(**fields: Any) -> JobSpec:
    return JobSpec(**{"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", "instance_count": 2,
                      "max_run": 7200, **fields})


def test_one_attempt_is_instances_times_max_run_times_the_catalog_price():
    planned = forecast(spec())
    assert planned.hourly_usd == pytest.approx(2 * P4D)
    assert planned.training_usd == pytest.approx(2 * P4D * 2)
    assert planned.attempt_usd == planned.training_usd and not planned.exceeds_budget
    text = "\n".join(planned.lines())
    assert "2 x ml.p4d.24xlarge" in text and f"${2 * P4D * 2:.2f}" in text and "max_run 7200 s" in text


def test_warm_pool_idle_time_and_an_evaluation_job_add_to_the_ceiling():
    planned = forecast(spec(keep_alive_period_in_seconds=1800),
                       evaluation={"instance_type": "ml.m5.xlarge", "timeout_seconds": 3600})
    m5 = catalog.hourly_price("ml.m5.xlarge", "us-east-1")
    assert planned.warm_pool_usd == pytest.approx(2 * P4D / 2)
    assert planned.evaluation_usd == pytest.approx(m5)
    assert planned.attempt_usd == pytest.approx(2 * P4D * 2 + P4D + m5)
    text = "\n".join(planned.lines())
    assert "warm pool" in text and "1800 s" in text and "evaluation" in text


def test_spot_is_billed_at_most_max_run_and_max_wait_bounds_its_wall_time():
    planned = forecast(spec(use_spot_instances=True, max_wait=14400))
    assert planned.spot and planned.max_wait_seconds == 14400
    assert planned.training_usd == pytest.approx(2 * P4D * 2)
    assert "max_wait 14400 s" in "\n".join(planned.lines())


def test_instance_groups_are_priced_group_by_group_and_regions_by_their_factor():
    groups = [{"instance_group_name": "cpu", "instance_type": "ml.c5.xlarge", "instance_count": 1},
              {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    grouped = JobSpec(entry_point="t.py", instance_groups=groups, max_run=3600,
                      distribution={"torch_distributed": {"enabled": True}, "instance_groups": ["gpu"]})
    assert hourly_cost(grouped) == pytest.approx(catalog.hourly_price("ml.c5.xlarge") + 2 * P4D)
    # A region the catalog has no price factor for is unknown, not priced as us-east-1.
    assert forecast(spec(region="eu-west-1")).attempt_usd is None
    assert forecast(spec(region="us-west-2")).hourly_usd == pytest.approx(
        2 * catalog.hourly_price("ml.p4d.24xlarge", "us-west-2"))


def test_an_unknown_price_is_said_not_guessed():
    planned = forecast(spec(instance_type="ml.unknown.xlarge"))
    assert planned.attempt_usd is None and planned.unknown_prices == ["ml.unknown.xlarge"]
    assert "unknown" in planned.lines()[0]
    assert forecast(JobSpec(entry_point="t.py", instance_type="local")).lines() == []  # local mode: nothing


def test_budget_refuse_refuses_a_first_attempt_that_could_exceed_it_naming_the_field():
    with pytest.raises(SpecError) as raised:
        check_budget(spec(max_cost_usd=100, budget="refuse"))
    problem = raised.value.problems[0]
    assert problem.path == "max_cost_usd"
    assert f"${2 * P4D * 2:.2f}" in problem.message and "budget: stop" in problem.message
    assert "forecast:" in problem.message
    # Within the budget, or under budget: stop, nothing is refused.
    assert check_budget(spec(max_cost_usd=1000, budget="refuse")).attempt_usd == pytest.approx(2 * P4D * 2)
    assert check_budget(spec(max_cost_usd=100)).exceeds_budget


def test_budget_refuse_cannot_budget_an_instance_without_a_price():
    with pytest.raises(SpecError, match="max_cost_usd"):
        check_budget(spec(instance_type="ml.unknown.xlarge", max_cost_usd=10, budget="refuse"))


def test_a_retry_must_fit_in_what_is_left():
    assert retry_fits(spec(), 10_000) == (True, "")  # no budget: no limit
    assert retry_fits(spec(max_cost_usd=100), 40)[0]  # budget: stop: anything left may be spent
    fits, why = retry_fits(spec(max_cost_usd=100), 100.0)
    assert not fits and "spent" in why
    assert retry_fits(spec(max_cost_usd=1000, budget="refuse"), 500)[0]  # one attempt's ceiling fits in 500
    fits, why = retry_fits(spec(max_cost_usd=1000, budget="refuse"), 900)  # 100 left < one attempt's ceiling
    assert not fits and "more than" in why
    assert not retry_fits(spec(max_cost_usd=100), None)[0]  # an unknown spend cannot be budgeted


def test_no_retry_starts_that_cannot_fit_and_the_cost_carries_forecast_spent_and_budget(caplog):
    caplog.set_level(logging.INFO, logger="trainops")
    budget_spec = spec(instance_type="ml.m5.large", instance_count=1, max_cost_usd=0.05)
    ledger: dict[str, Any] = {}
    started: list[tuple[str, Any]] = []

    def attempt(name: str) -> dict[str, Any]:
        started.append((name, ledger.get("spent")))
        # A lost host after 1200 s at $0.115/h: $0.0383 of the $0.05; the second attempt is cut at the budget.
        if name == "job-1":
            return {"job_name": name, "status": "Failed", "duration_seconds": 1200,
                    "failure_reason": LOST}
        return {"job_name": name, "status": "Stopped", "duration_seconds": 400,
                "guard": {"kind": "budget", "message": "budget: the job's billable cost reached $0.0117"},
                "failure_reason": "budget: the job's billable cost reached $0.0117"}

    lines: list[str] = []
    result = run_attempts(attempt, job_name="job-1", budgets={"infrastructure": 3, "backoff_seconds": 0},
                          instance_type="ml.m5.large", sleep=lambda _: None, log=lines.append, ledger=ledger,
                          fits=lambda spent: retry_fits(budget_spec, spent),
                          cost_notes={"forecast": forecast(budget_spec).to_dict(),
                                      "budget": {"max_cost_usd": 0.05, "mode": "stop"}})
    assert [name for name, _ in started] == ["job-1", "job-1-2"]
    assert started[0][1] == 0.0 and started[1][1] == pytest.approx(1200 * 0.115 / 3600, abs=1e-6)
    assert result["failure_class"] == "budget"  # a spent budget is never retried, whatever is left of retries
    cost = result["cost"]
    assert cost["spent"] == pytest.approx(1600 * 0.115 / 3600, abs=1e-5)
    assert cost["budget"]["max_cost_usd"] == 0.05 and cost["budget"]["left"] == pytest.approx(0.05 - cost["spent"])
    assert cost["forecast"]["attempt_usd"] == pytest.approx(0.115 * 2)

    def always_lost(name: str) -> dict[str, Any]:
        return {"job_name": name, "status": "Failed", "duration_seconds": 1600, "failure_reason": LOST}

    refused = run_attempts(always_lost, job_name="job-1", budgets={"infrastructure": 3, "backoff_seconds": 0},
                           instance_type="ml.m5.large", sleep=lambda _: None, log=lines.append,
                           fits=lambda spent: retry_fits(budget_spec, spent))
    # $0.0511 spent by the first attempt: nothing left, so the infrastructure budget's retries are not used.
    assert len(refused["attempts"]) == 1 and "max_cost_usd" in refused["retry_refused"]
    assert refused["failure_class"] == "infrastructure"
    lines += [record.getMessage() for record in caplog.records]  # trainops' own messages are logged
    assert any("no retry" in line for line in lines)


def test_train_refuses_a_run_over_budget_before_anything_is_created(tmp_path, monkeypatch):
    from trainops.steps.train import train

    home = tmp_path / "home"
    monkeypatch.setenv("TRAINOPS_HOME", str(home))
    (tmp_path / "train.py").write_text("print('never run')\n")
    data = {"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2, "max_run": 7200, "output_path": str(tmp_path / "out"), "max_cost_usd": 50,
            "budget": "refuse"}
    with pytest.raises(SpecError) as raised:
        train(data, job_name="big-1", log=lambda line: None)
    assert raised.value.problems[0].path == "max_cost_usd"
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())
