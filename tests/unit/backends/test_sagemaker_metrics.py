"""`SageMakerBackend.metrics`: the seam's "metrics" capability reads FinalMetricDataList.

botocore's Stubber (tests/support/stubbed_aws.py), because moto's DescribeTrainingJob does not report final
metrics; the Stubber checks the request and the response against the real SageMaker API model."""

from __future__ import annotations

from datetime import datetime, timezone

from support.stubbed_aws import StubbedAWS  # tests/ is on sys.path (tests/conftest.py)

from trainops.backends import get_backend
from trainops.backends.api import JobHandle


def test_final_metrics_come_from_the_job_description():
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response("describe_training_job", {
        "TrainingJobName": "digits-1",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:111122223333:training-job/digits-1",
        "ModelArtifacts": {"S3ModelArtifacts": "s3://bucket/digits-1/output/model.tar.gz"},
        "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": datetime(2026, 12, 1, tzinfo=timezone.utc),
        "FinalMetricDataList": [{"MetricName": "accuracy", "Value": 0.98,
                                 "Timestamp": datetime(2026, 12, 1, tzinfo=timezone.utc)}],
    }, {"TrainingJobName": "digits-1"})
    backend = get_backend("sagemaker", region="us-east-1", client_factory=aws)
    assert backend.metrics(JobHandle("sagemaker", "digits-1", region="us-east-1")) == {"accuracy": 0.98}
    aws.verify()
