"""The capacity preflight's quota check against a moto server on 127.0.0.1: the running jobs' instances are moto's
own (CreateTrainingJob, ListTrainingJobs StatusEquals=InProgress, DescribeTrainingJob); SageMaker's service quotas,
which moto 5.2 does not have, come from tests/support/moto_quotas.py (ListServiceQuotas/GetServiceQuota answered
from a table) for the arithmetic, and a plain moto server shows what a user sees there: a note, fast, and the job
goes on. The training plan's zone check reads moto's EC2 subnets; DescribeTrainingPlan itself is stubbed
(botocore's Stubber), since moto has no training plans. The Stubber-only checks are in
tests/unit/backends/test_sagemaker_capacity.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from botocore.stub import Stubber
from support.moto_quotas import set_training_job_status
from support.sagemaker_shapes import training_request

from trainops.aws.clients import advisory_client
from trainops.backends.sagemaker.capacity import check_capacity
from trainops.backends.sagemaker.preflight import check_request, preflight
from trainops.errors import PreflightError

pytestmark = pytest.mark.system
P4D = "ml.p4d.24xlarge"
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p4d-plan"


@pytest.fixture
def quotas(moto_quotas):
    return moto_quotas


@pytest.fixture
def running(aws_clients, request):
    """Make InProgress training jobs in moto, each holding `count` instances of a type; set back afterwards."""
    made = []

    def start(count, instance_type=P4D, spot=False):
        name = f"cap-{len(made)}-{abs(hash(request.node.name)) % 10**8}"
        job = training_request(name, ResourceConfig={"InstanceType": instance_type, "InstanceCount": count,
                                                     "VolumeSizeInGB": 50})
        if spot:
            job["EnableManagedSpotTraining"] = True
            job["StoppingCondition"]["MaxWaitTimeInSeconds"] = job["StoppingCondition"]["MaxRuntimeInSeconds"]
        aws_clients("sagemaker").create_training_job(**job)
        set_training_job_status(name, "InProgress")
        made.append(name)
        return name

    yield start
    for name in made:
        set_training_job_status(name, "Completed")


def test_a_job_within_the_quota_passes(aws_clients, quotas, running):
    quotas(f"{P4D} for training job usage", 8)
    running(4)
    assert check_request(aws_clients, training_request("fits-1")) == []  # 4 running + 2 asked <= 8


def test_running_jobs_count_against_the_quota(aws_clients, quotas, running):
    quotas(f"{P4D} for training job usage", 4)
    holder = running(3)
    running(2, instance_type="ml.g5.12xlarge")  # another type: not counted
    with pytest.raises(PreflightError) as caught:
        preflight(aws_clients, training_request("too-many-1"))
    (problem,) = caught.value.problems
    assert problem.path == "instance_count"
    assert "quota 'ml.p4d.24xlarge for training job usage' is 4 and running training jobs hold 3" in problem.message
    assert holder in problem.message and "request-service-quota-increase" in problem.message
    assert "--desired-value 5" in problem.message


def test_spot_jobs_use_the_spot_quota(aws_clients, quotas, running):
    quotas(f"{P4D} for training job usage", 100)
    quotas(f"{P4D} for spot training job usage", 2)
    running(2, spot=True)
    request = training_request("spot-1", EnableManagedSpotTraining=True)
    problems = check_capacity(aws_clients, request).problems
    assert [problem.path for problem in problems] == ["instance_count"]
    assert "spot training job usage" in problems[0].message
    running(50)  # on-demand jobs do not use the spot quota
    assert check_capacity(aws_clients, training_request("on-demand-1")).problems == []


def test_a_quota_aws_does_not_list_is_a_note_not_a_refusal(aws_clients, quotas):
    report = check_capacity(aws_clients, training_request("unlisted-1"))
    assert report.problems == []
    assert any("no service quota named 'ml.p4d.24xlarge for training job usage'" in note for note in report.notes)


def test_without_service_quotas_the_check_is_a_note_after_one_retry(aws_clients):
    # A plain moto server has no SageMaker quotas (ListServiceQuotas answers 500), as a VPC endpoint that does not
    # reach Service Quotas would fail: the job is not refused, the note says what was not checked and why, and the
    # advisory client tried twice (one retry), not the eleven attempts of the adaptive clients.
    attempts = []
    advisory_client(aws_clients, "service-quotas").meta.events.register(
        "before-send.service-quotas.ListServiceQuotas", lambda request, **_: attempts.append(request.url))
    findings = preflight(aws_clients, training_request("no-quotas-1"))
    assert findings.problems == []
    assert findings.notes == ["the account's service quotas not checked: servicequotas:ListServiceQuotas failed (500: "
                              "500 Internal Server Error)"]
    assert len(attempts) == 2


def test_the_plans_zone_is_compared_with_moto_subnets(aws_clients):
    ec2 = aws_clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    east_b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.2.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    east_a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    sagemaker = aws_clients("sagemaker")
    now = datetime.now(timezone.utc)
    plan = {"TrainingPlanArn": PLAN, "TrainingPlanName": "p4d-plan", "Status": "Active",
            "StartTime": now - timedelta(days=1), "EndTime": now + timedelta(days=7), "TotalInstanceCount": 4,
            "AvailableInstanceCount": 4, "InUseInstanceCount": 0, "TargetResources": ["training-job"],
            "ReservedCapacitySummaries": [{"ReservedCapacityArn": PLAN.replace("training-plan", "reserved-capacity"),
                                           "InstanceType": P4D, "TotalInstanceCount": 4, "Status": "Active",
                                           "AvailabilityZone": "us-east-1a"}]}

    def factory(service):
        return sagemaker if service == "sagemaker" else aws_clients(service)

    def request(subnets):
        return training_request("plan-1", ResourceConfig={"InstanceType": P4D, "InstanceCount": 2,
                                                          "VolumeSizeInGB": 50, "TrainingPlanArn": PLAN},
                                VpcConfig={"Subnets": subnets, "SecurityGroupIds": ["sg-0123456789abcdef0"]})

    with Stubber(sagemaker) as stub:
        stub.add_response("describe_training_plan", plan, {"TrainingPlanName": PLAN})
        stub.add_response("describe_training_plan", plan, {"TrainingPlanName": PLAN})
        assert check_capacity(factory, request([east_b, east_a])).problems == []
        (problem,) = check_capacity(factory, request([east_b])).problems
    assert problem.path == "subnets"
    assert "capacity is in us-east-1a" in problem.message and f"{east_b} (us-east-1b)" in problem.message
