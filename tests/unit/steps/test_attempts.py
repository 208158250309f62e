"""The attempt loop of the train step: budgets per failure class, names per attempt, costs summed over attempts."""

from __future__ import annotations

import pytest

from trainops.steps.attempts import attempt_cost, attempt_name, cost_line, run_attempts, total_cost

CAPACITY = {"status": "Failed", "failure_reason": "CapacityError: Unable to provision requested ML compute capacity",
            "duration_seconds": 60}
USER_ERROR = {"status": "Failed", "failure_reason": "rank 0 on host algo-1 exited with code 1: ValueError: boom\n"
                                                    "reason: error", "duration_seconds": 30}
DONE = {"status": "Completed", "duration_seconds": 3600, "model_artifact": "/m/model.tar.gz"}


def scripted(*outcomes):
    calls: list[str] = []

    def run(name):
        calls.append(name)
        return {**outcomes[len(calls) - 1], "job_name": name}

    return run, calls


def test_infrastructure_failures_retry_under_new_names_and_costs_add_up():
    run, calls = scripted(CAPACITY, CAPACITY, DONE)
    slept: list[float] = []
    result = run_attempts(run, job_name="bert", budgets={"infrastructure": 3, "backoff_seconds": 5},
                          instance_type="ml.p4d.24xlarge", instance_count=2, sleep=slept.append, log=lambda _: None)
    assert calls == ["bert", "bert-2", "bert-3"]
    assert slept == [5.0, 10.0]
    assert result["status"] == "Completed" and result["failure_class"] is None
    assert [a["failure_class"] for a in result["attempts"]] == ["infrastructure", "infrastructure", None]
    assert [a["retried_on"] for a in result["attempts"]] == ["infrastructure", "infrastructure", None]
    per_hour = result["cost"]["per_attempt"][2]["cost"] / 2  # one hour on 2 instances
    assert per_hour > 0
    assert result["cost"]["total"] == pytest.approx(per_hour * 2 * (60 + 60 + 3600) / 3600, rel=1e-4)
    assert result["cost"]["attempts"] == 3
    assert result["retries"]["used"] == {"infrastructure": 2}


def test_a_user_error_never_costs_a_second_attempt():
    run, calls = scripted(USER_ERROR, DONE)
    result = run_attempts(run, job_name="bert", budgets="infrastructure=3", sleep=lambda s: None, log=lambda _: None)
    assert calls == ["bert"]
    assert result["failure_class"] == "user" and "ValueError: boom" in result["failure_evidence"]["evidence"]


def test_the_budget_runs_out():
    run, calls = scripted(CAPACITY, CAPACITY, DONE)
    result = run_attempts(run, job_name="j", budgets={"infrastructure": 1, "backoff_seconds": 0},
                          sleep=lambda s: None, log=lambda _: None)
    assert calls == ["j", "j-2"] and result["status"] == "Failed"
    assert result["failure_class"] == "infrastructure"


def test_known_attempts_are_listed_and_priced_but_not_run_again_nor_charged_to_the_budget():
    run, calls = scripted(DONE)
    known = [{**CAPACITY, "job_name": "j"}]
    result = run_attempts(run, job_name="j", budgets={"infrastructure": 0}, known_attempts=known,
                          sleep=lambda s: None, log=lambda _: None)
    assert calls == ["j-2"] and result["status"] == "Completed"
    assert [a["failure_class"] for a in result["attempts"]] == ["infrastructure", None]
    assert result["cost"]["attempts"] == 2


def test_costs_use_sagemakers_estimate_when_present_and_unknown_prices_poison_the_total():
    sagemaker = attempt_cost({"billable_seconds": 1200, "cost": {"estimated_cost": 4.0, "on_demand_cost": 10.0,
                                                                 "spot_saving": 0.6, "unknown_prices": [],
                                                                 "basis": "sagemaker-billable"}})
    assert sagemaker["basis"] == "sagemaker-billable" and sagemaker["cost"] == 4.0
    # the basis is the backend's word: the step names no backend
    assert attempt_cost({"cost": {"estimated_cost": 1.0}})["basis"] == "backend-estimate"
    unknown = attempt_cost({"duration_seconds": 10}, instance_type="local")
    assert unknown["cost"] is None and unknown["unknown_prices"] == ["local"]
    total = total_cost([sagemaker, unknown])
    assert total["total"] is None and total["unknown_prices"] == ["local"]
    assert "cost unknown over 2 attempts" in cost_line(total)
    both = total_cost([sagemaker, sagemaker])
    assert both["total"] == 8.0 and both["spot_saving"] == 0.6
    assert cost_line(both) == "$8.00 over 2 attempts (spot saved 60 %)"


def test_attempt_names_stay_valid_job_names():
    assert attempt_name("x" * 63, 1) == "x" * 63
    assert attempt_name("x" * 63, 12).endswith("-12") and len(attempt_name("x" * 63, 12)) == 63


def test_step_totals_add_up_to_a_run_total():
    step = total_cost([attempt_cost({"billable_seconds": 3600, "cost": {"estimated_cost": 2.0, "on_demand_cost": 5.0,
                                                                         "spot_saving": 0.6, "unknown_prices": []}}),
                       attempt_cost({"billable_seconds": 1800, "cost": {"estimated_cost": 1.0, "on_demand_cost": 2.5,
                                                                         "spot_saving": 0.6, "unknown_prices": []}})])
    run = total_cost([step, step])
    assert run["total"] == 6.0 and run["on_demand_total"] == 15.0 and run["attempts"] == 4
    assert cost_line(run) == "$6.00 over 4 attempts (spot saved 60 %)"
