"""Idempotency under retries, the pipeline part (issue 10, item 5): a pipeline re-run after a failed evaluation does
not train again when the training's inputs (spec hash, channel data) did not change, unless --force; it trains again
when they did. The Airflow and KFP parts (a retried task or component re-attaches to its SageMaker job) are tested
with their operators and components: see RELIABILITY.md.
"""

from __future__ import annotations

import pytest
from idempotency_scenario import rerun_after_failed_evaluation

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


def test_a_rerun_after_a_failed_evaluation_skips_the_finished_training_unless_forced(tmp_path):
    runs = rerun_after_failed_evaluation(tmp_path)
    first = runs["first (evaluation fails)"]
    assert first.returncode == 1, first.stdout + first.stderr
    assert first.train["status"] == "Completed" and first.record["steps"]["evaluate"]["status"] == "Failed"
    assert "evaluation bug" in first.record["steps"]["evaluate"]["error"]
    assert len(first.trainings) == 1
    job = first.train["job_name"]

    fixed = runs["re-run after the fix"]
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.train["reattached"] is True and fixed.train["job_name"] == job
    assert "training skipped" in fixed.stdout and "trained on" not in fixed.stdout
    assert fixed.record["status"] == "Succeeded" and len(fixed.trainings) == 1  # the training did not run again

    forced = runs["re-run with --force"]
    assert forced.returncode == 0 and forced.train["reattached"] is False and forced.train["job_name"] != job
    assert len(forced.trainings) == 2

    changed_data = runs["re-run, data changed"]
    assert changed_data.returncode == 0 and changed_data.train["reattached"] is False
    assert "trained on ['part-0.csv', 'part-1.csv']" in changed_data.stdout and len(changed_data.trainings) == 3

    changed_spec = runs["re-run, spec changed"]
    assert changed_spec.returncode == 0 and changed_spec.train["reattached"] is False
    assert len(changed_spec.trainings) == 4

    same = runs["re-run, nothing changed"]
    assert same.returncode == 0 and same.train["reattached"] is True
    assert same.train["job_name"] == changed_spec.train["job_name"] and len(same.trainings) == 4
