"""The capacity preflight with botocore's Stubber, where moto has no API: DescribeTrainingPlan (moto 5.2 has no
training plans) and SageMaker's service quotas (moto answers only vpc's). The Stubber checks every request and
response against botocore's API model. The running jobs' usage, the zone check and the quota arithmetic against moto
are tests/system/test_sagemaker_capacity_moto.py; EFA reads only the catalog."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from support.sagemaker_shapes import training_request
from support.stubbed_aws import StubbedAWS

from trainops.backends.sagemaker.capacity import check_capacity
from trainops.backends.sagemaker.preflight import check_request

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p4d-plan"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def _plan(**overrides):
    plan = {"TrainingPlanArn": PLAN, "TrainingPlanName": "p4d-plan", "Status": "Active",
            "StartTime": NOW - timedelta(days=1), "EndTime": NOW + timedelta(days=7), "TotalInstanceCount": 4,
            "AvailableInstanceCount": 4, "InUseInstanceCount": 0, "TargetResources": ["training-job"],
            "ReservedCapacitySummaries": [{"ReservedCapacityArn": PLAN.replace("training-plan", "reserved-capacity"),
                                           "InstanceType": "ml.p4d.24xlarge", "TotalInstanceCount": 4,
                                           "Status": "Active", "AvailabilityZone": "us-east-1a"}]}
    plan.update(overrides)
    return plan


def _on_plan(**overrides):
    return training_request("plan-1", ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2,
                                                      "VolumeSizeInGB": 50, "TrainingPlanArn": PLAN}, **overrides)


def test_an_active_plan_with_room_passes_and_the_quota_is_not_read():
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response("describe_training_plan", _plan(), {"TrainingPlanName": PLAN})
    report = check_capacity(aws, _on_plan(), now=NOW.timestamp())
    assert report.problems == [] and report.notes == []
    aws.verify()
    assert "service-quotas" not in aws.requested  # the plan's reservation, not the on-demand quota


def test_every_plan_problem_is_reported_at_once_with_its_field():
    aws = StubbedAWS()
    plan = _plan(Status="Scheduled", StartTime=NOW + timedelta(days=3), TargetResources=["hyperpod-cluster"],
                 AvailableInstanceCount=1, EndTime=NOW + timedelta(days=3, hours=1),
                 ReservedCapacitySummaries=[{"ReservedCapacityArn": PLAN.replace("training-plan", "reserved-capacity"),
                                             "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 4,
                                             "Status": "Scheduled", "AvailabilityZone": "us-east-1a"}])
    aws.stub("sagemaker").add_response("describe_training_plan", plan, {"TrainingPlanName": PLAN})
    problems = check_capacity(aws, _on_plan(), now=NOW.timestamp()).problems
    by_field = {problem.path: problem.message for problem in problems}
    assert sorted(by_field) == ["instance_count", "instance_type", "max_run", "training_plan"]
    assert len(problems) == 5  # two about the plan itself: its status and its target
    plan_messages = [problem.message for problem in problems if problem.path == "training_plan"]
    assert "starts at 2026-12-04 12:00 UTC, more than 2 days from now" in plan_messages[0]
    assert "submit after 2026-12-02 12:00 UTC" in plan_messages[0]
    assert "hyperpod-cluster, not training jobs" in plan_messages[1]
    assert "reserves ml.p5.48xlarge, not ml.p4d.24xlarge" in by_field["instance_type"]
    assert "needs 2 instances but the training plan has 1 available" in by_field["instance_count"]
    # the job starts with the capacity; 1 h of it less the 30 minutes SageMaker reclaims the instances before its end
    assert "its start + max_run 7200 s" in by_field["max_run"] and "at most 1800 s" in by_field["max_run"]


def test_a_plan_scheduled_within_two_days_is_a_note_and_its_end_keeps_a_30_minute_margin():
    aws = StubbedAWS()
    stub = aws.stub("sagemaker")
    stub.add_response("describe_training_plan", _plan(Status="Scheduled", StartTime=NOW + timedelta(hours=5)),
                      {"TrainingPlanName": PLAN})
    report = check_capacity(aws, _on_plan(), now=NOW.timestamp())
    assert report.problems == [] and "waits Pending until its capacity starts at 2026-12-01 17:00 UTC" in \
        report.notes[0]
    stub.add_response("describe_training_plan", _plan(EndTime=NOW + timedelta(minutes=130)),
                      {"TrainingPlanName": PLAN})
    (problem,) = check_capacity(aws, _on_plan(), now=NOW.timestamp()).problems  # max_run 7200 s
    assert problem.path == "max_run" and "now + max_run 7200 s" in problem.message
    assert "at most 6000 s" in problem.message


def test_the_reserved_capacity_the_job_would_run_in_decides_the_end():
    arn = PLAN.replace("training-plan", "reserved-capacity")
    windows = [{"ReservedCapacityArn": f"{arn}-{index}", "InstanceType": "ml.p4d.24xlarge", "TotalInstanceCount": 4,
                "Status": status, "AvailabilityZone": "us-east-1a", "StartTime": NOW + timedelta(hours=start),
                "EndTime": NOW + timedelta(hours=end)}
               for index, (status, start, end) in enumerate([("Expired", -30, -1), ("Active", -1, 1)])]
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response("describe_training_plan", _plan(ReservedCapacitySummaries=windows),
                                       {"TrainingPlanName": PLAN})
    (problem,) = check_capacity(aws, _on_plan(), now=NOW.timestamp()).problems  # the plan lasts 7 days, this one 1 h
    assert problem.path == "max_run" and "at most 1800 s" in problem.message


def test_an_expired_plan_says_to_buy_another():
    aws = StubbedAWS()
    aws.stub("sagemaker").add_response("describe_training_plan", _plan(Status="Expired"), {"TrainingPlanName": PLAN})
    (problem,) = check_capacity(aws, _on_plan(), now=NOW.timestamp()).problems
    assert problem.path == "training_plan" and "create-training-plan" in problem.message


def test_a_missing_plan_is_a_problem_and_no_permission_a_note():
    aws = StubbedAWS()
    stub = aws.stub("sagemaker")
    stub.add_client_error("describe_training_plan", service_error_code="ResourceNotFound",
                          service_message="Training plan not found")
    stub.add_client_error("describe_training_plan", service_error_code="AccessDeniedException",
                          service_message="not authorized")
    (problem,) = check_capacity(aws, _on_plan(), now=NOW.timestamp()).problems
    assert problem.path == "training_plan" and "does not exist in this region" in problem.message
    report = check_capacity(aws, _on_plan(), now=NOW.timestamp())
    assert report.problems == [] and "sagemaker:DescribeTrainingPlan" in report.notes[0]


def _quota(name, code, value):
    return {"ServiceCode": "sagemaker", "QuotaCode": code, "QuotaName": name, "Value": value}


def test_the_quota_is_found_by_name_across_pages_and_read_with_get_service_quota():
    aws = StubbedAWS()
    quotas = aws.stub("service-quotas")
    quotas.add_response("list_service_quotas", {"Quotas": [_quota("ml.c5.xlarge for training job usage", "L-1", 20)],
                                                "NextToken": "page-2"},
                        {"ServiceCode": "sagemaker", "MaxResults": 100})
    quotas.add_response("list_service_quotas",
                        {"Quotas": [_quota("ml.p4d.24xlarge for training job usage", "L-P4D", 0.0)]},
                        {"ServiceCode": "sagemaker", "MaxResults": 100, "NextToken": "page-2"})
    quotas.add_response("get_service_quota", {"Quota": _quota("ml.p4d.24xlarge for training job usage", "L-P4D", 3)},
                        {"ServiceCode": "sagemaker", "QuotaCode": "L-P4D"})
    sagemaker = aws.stub("sagemaker")
    sagemaker.add_response("list_training_jobs", {"TrainingJobSummaries": [{
        "TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "CreationTime": NOW, "TrainingJobStatus": "InProgress"} for name in ("on-plan-1", "other-1")]},
        {"StatusEquals": "InProgress", "MaxResults": 100})
    sagemaker.add_response("describe_training_job", {  # on a training plan: not the quota's
        "TrainingJobName": "on-plan-1", "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/on-plan-1", "CreationTime": NOW,
        "ModelArtifacts": {"S3ModelArtifacts": ""}, "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 8,
                           "TrainingPlanArn": PLAN}},
        {"TrainingJobName": "on-plan-1"})
    sagemaker.add_response("describe_training_job", {
        "TrainingJobName": "other-1", "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/other-1",
        "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training", "CreationTime": NOW,
        "AlgorithmSpecification": {"TrainingInputMode": "File"}, "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceGroups": [
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "InstanceGroupName": "gpus"},
            {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "InstanceGroupName": "cpus"}]}},
        {"TrainingJobName": "other-1"})
    (problem,) = check_request(aws, training_request("quota-1"))
    aws.verify()
    assert problem.path == "instance_count"
    assert "quota 'ml.p4d.24xlarge for training job usage' is 3 and running training jobs hold 2 (other-1)" in \
        problem.message
    assert "--quota-code L-P4D --desired-value 4" in problem.message


def test_no_permission_to_read_quotas_is_a_note():
    aws = StubbedAWS()
    aws.stub("service-quotas").add_client_error("list_service_quotas", service_error_code="AccessDeniedException",
                                                service_message="not authorized")
    report = check_capacity(aws, training_request("quota-2"))
    assert report.problems == [] and "servicequotas:ListServiceQuotas" in report.notes[0]


def test_any_failure_to_read_is_a_note_naming_what_was_not_checked_and_why():
    # A throttle, a service error and a connection that fails are not the job's problems: each advisory read that
    # fails becomes a note and the job is not refused (only a missing plan, above, proves the job cannot run).
    from botocore.exceptions import EndpointConnectionError

    aws = StubbedAWS()
    aws.stub("service-quotas").add_client_error("list_service_quotas", service_error_code="ThrottlingException",
                                                service_message="Rate exceeded", http_status_code=400)
    report = check_capacity(aws, training_request("quota-3"))
    assert report.problems == []
    assert report.notes == ["the account's service quotas not checked: servicequotas:ListServiceQuotas failed "
                            "(ThrottlingException: Rate exceeded)"]
    aws.stub("sagemaker").add_client_error("describe_training_plan", service_error_code="InternalFailure",
                                           service_message="<html><title>503 Service Unavailable</title></html>",
                                           http_status_code=503)
    report = check_capacity(aws, _on_plan(), now=NOW.timestamp())
    assert report.problems == []
    assert report.notes == [f"training plan {PLAN} not checked: sagemaker:DescribeTrainingPlan failed (InternalFailure: "
                            "503 Service Unavailable)"]

    def unreachable(service):
        client = aws(service)
        if service == "service-quotas":
            def refuse(**_):
                raise EndpointConnectionError(endpoint_url="https://servicequotas.us-east-1.amazonaws.com/")
            client.list_service_quotas = refuse
        return client

    report = check_capacity(unreachable, training_request("quota-4"))
    assert report.problems == [] and "EndpointConnectionError" in report.notes[0]


def test_efa_from_the_catalog():
    aws = StubbedAWS()
    request = training_request("efa-1", ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2,
                                                        "VolumeSizeInGB": 50}, Environment={"FI_PROVIDER": "efa"})
    (problem,) = check_capacity(aws, request).problems
    assert problem.path == "environment.FI_PROVIDER" and "ml.g5.2xlarge has no EFA" in problem.message
    del request["Environment"]
    report = check_capacity(aws, request)
    assert report.problems == [] and "collectives run over TCP" in report.notes[-1]
    on_efa = training_request("efa-2", Environment={"FI_PROVIDER": "efa"})  # ml.p4d.24xlarge: EFA
    assert check_capacity(aws, on_efa).problems == []
    unknown = training_request("efa-3", ResourceConfig={"InstanceType": "ml.x9.48xlarge", "InstanceCount": 2,
                                                        "VolumeSizeInGB": 50})
    assert any("not in trainops' instance catalog" in note for note in check_capacity(aws, unknown).notes)
