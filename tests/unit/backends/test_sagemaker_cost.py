"""Cost estimates: billable seconds x instances x on-demand price, and the spot saving."""

from __future__ import annotations

import pytest
from support.sagemaker_shapes import training_description

from trainops.backends.sagemaker.cost import estimate_cost, spot_saving
from trainops.backends.sagemaker.training import summarize
from trainops.runtime import catalog


def _summary(**options):
    return summarize(training_description("digits-1", "Completed", "Completed", **options))


def test_on_demand_cost_uses_billable_seconds_and_instance_count():
    prices = {("ml.p4d.24xlarge", "us-east-1"): 30.0}
    estimate = estimate_cost(_summary(billable=1800, training=1800), price_lookup=lambda kind, region: prices.get((kind, region)))
    assert estimate.region == "us-east-1"  # from the job's ARN
    assert estimate.estimated_cost == pytest.approx(30.0 * 2 * 0.5)
    assert estimate.on_demand_cost == estimate.estimated_cost
    assert estimate.instance_hours_billed == pytest.approx(1.0)
    assert estimate.spot_saving is None


def test_spot_jobs_report_the_saving():
    estimate = estimate_cost(_summary(spot=True, max_wait=9000, billable=1200, training=4000),
                             price_lookup=lambda kind, region: 10.0)
    assert estimate.spot is True
    assert estimate.spot_saving == pytest.approx(0.7)
    assert estimate.estimated_cost == pytest.approx(10.0 * 2 * 1200 / 3600, abs=1e-4)
    assert estimate.on_demand_cost == pytest.approx(10.0 * 2 * 4000 / 3600, abs=1e-4)


def test_unknown_prices_make_totals_unknown_rather_than_wrong():
    estimate = estimate_cost(_summary(billable=100, training=100), price_lookup=lambda kind, region: None)
    assert estimate.estimated_cost is None
    assert estimate.unknown_prices == ["ml.p4d.24xlarge"]


def test_default_prices_come_from_the_catalog():
    estimate = estimate_cost(_summary(billable=3600, training=3600))
    expected = catalog.hourly_price("ml.p4d.24xlarge", "us-east-1")
    assert estimate.price_per_hour == expected
    if expected is not None:
        assert estimate.estimated_cost == pytest.approx(expected * 2)


def test_spot_saving_edge_cases():
    assert spot_saving(None, 100) is None
    assert spot_saving(10, 0) is None
    assert spot_saving(25, 100) == 0.75
