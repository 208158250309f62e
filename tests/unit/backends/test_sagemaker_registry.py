"""Registry requests and metric round trips (pure). Registration against moto is in tests/system."""

from __future__ import annotations

import pytest

from trainops.backends.sagemaker import registry
from trainops.errors import SpecError


def test_approval_follows_the_gate():
    assert registry.approval_status(True) == "Approved"
    assert registry.approval_status(True, manual_approval=True) == "PendingManualApproval"
    assert registry.approval_status(False) == "Rejected"
    assert registry.approval_status(False, manual_approval=True) == "Rejected"


def test_metrics_round_trip_through_metadata():
    metrics = {"accuracy": 0.9312, "loss": 0.25, "epochs": 3, "note": "text", "flag": True}
    properties = registry.metadata_from_metrics(metrics, {"source": "trainops"})
    assert properties["metric:accuracy"] == "0.9312"
    assert "metric:note" not in properties and "metric:flag" not in properties
    assert properties["source"] == "trainops"
    assert registry.metrics_from_metadata(properties) == {"accuracy": 0.9312, "loss": 0.25, "epochs": 3.0}


def test_request_carries_metrics_both_ways():
    request = registry.build_model_package_request(
        group="digits", image_uri="image:1", model_artifact_uri="s3://b/model.tar.gz", metrics={"accuracy": 0.9},
        metrics_uri="s3://b/metrics.json", approval="Rejected",
    )
    assert request["ModelApprovalStatus"] == "Rejected"
    assert request["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"] == "s3://b/metrics.json"
    assert request["CustomerMetadataProperties"] == {"metric:accuracy": "0.9"}
    assert request["InferenceSpecification"]["Containers"][0]["ModelDataUrl"] == "s3://b/model.tar.gz"


def test_unknown_approval_is_refused():
    with pytest.raises(SpecError) as raised:
        registry.build_model_package_request(group="g", image_uri="i", model_artifact_uri="s3://b/m", metrics={},
                                             metrics_uri="s3://b/x", approval="Maybe")
    assert raised.value.problems[0].path == "approval"
