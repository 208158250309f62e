"""Training, evaluation and registration against SageMaker on a moto server.

moto creates jobs as already Completed and runs nothing: these tests check what is sent and read back (the request
SageMaker stored, re-attach, metrics read from S3, packages and the champion). State walks are in the unit tests.
"""

from __future__ import annotations

import json
import uuid

import pytest
from support.sagemaker_shapes import ROLE_ARN, training_request

from trainops.backends.api import JobHandle
from trainops.backends.sagemaker import processing, registry, training
from trainops.backends.sagemaker.backend import SageMakerBackend
from trainops.backends.sagemaker.preflight import preflight
from trainops.backends.sagemaker.uploads import upload_runtime, upload_source_dir

pytestmark = pytest.mark.system


@pytest.fixture
def bucket(aws_clients):
    name = f"trainops-{uuid.uuid4().hex[:12]}"
    aws_clients("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def fsx_network(aws_clients):
    ec2 = aws_clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"lustre-{uuid.uuid4().hex[:6]}", Description="lustre", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "UserIdGroupPairs": [{"GroupId": group}]},
        {"IpProtocol": "tcp", "FromPort": 1018, "ToPort": 1023, "UserIdGroupPairs": [{"GroupId": group}]},
    ])
    file_system = aws_clients("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet], SecurityGroupIds=[group],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]["FileSystemId"]
    return subnet, group, file_system


def test_submit_with_fsx_input_sends_exactly_the_request_and_reattaches(aws_clients, bucket, fsx_network, tmp_path):
    subnet, group, file_system = fsx_network
    name = f"digits-{uuid.uuid4().hex[:10]}"
    (tmp_path / "train.py").write_text("print('hello')\n")
    base = f"s3://{bucket}/output/{name}"
    upload_source_dir(aws_clients, tmp_path, f"{base}/trainops/code/")
    upload_runtime(aws_clients, f"{base}/trainops/runtime/")
    request = training_request(
        name,
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/output"},
        InputDataConfig=[
            {"ChannelName": "train", "DataSource": {"FileSystemDataSource": {
                "FileSystemId": file_system, "FileSystemType": "FSxLustre", "DirectoryPath": "/trainfs/digits",
                "FileSystemAccessMode": "ro"}}},
            {"ChannelName": "trainops_code", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"{base}/trainops/code/", "S3DataDistributionType": "FullyReplicated"}}},
        ],
        VpcConfig={"Subnets": [subnet], "SecurityGroupIds": [group]},
    )
    sent = json.loads(json.dumps(request))
    notes = preflight(aws_clients, request).notes  # a plain moto server describes no Lifecycle, MountName, quotas
    assert any("not checked against the mount name" in note for note in notes)
    first = training.submit(aws_clients, request)
    assert first.created is True
    stored = aws_clients("sagemaker").describe_training_job(TrainingJobName=name)
    for key in ("HyperParameters", "InputDataConfig", "VpcConfig", "ResourceConfig", "StoppingCondition", "RoleArn"):
        assert stored[key] == sent[key], key
    assert request == sent  # submit did not modify the caller's request

    again = training.submit(aws_clients, request)  # a retried task
    assert (again.created, again.job_name, again.status) == (False, name, "Completed")
    listed = aws_clients("sagemaker").list_training_jobs(NameContains=name)["TrainingJobSummaries"]
    assert len(listed) == 1

    backend, handle = SageMakerBackend(client_factory=aws_clients, poll_seconds=0), JobHandle("sagemaker", name)
    summary = backend.wait(handle)  # the kit's wait over the backend's look
    assert summary.status.value == "Completed"
    assert summary.model_artifact == f"s3://{bucket}/output/{name}/output/model.tar.gz"
    assert backend.status_record(handle)["instance_count"] == 2


def test_evaluation_reads_metrics_back_from_the_output_prefix(aws_clients, bucket):
    name = f"digits-eval-{uuid.uuid4().hex[:8]}"
    output = f"s3://{bucket}/output/digits/evaluation/"
    request = processing.build_evaluation_request(
        job_name=name, role_arn=ROLE_ARN, image_uri="image:1", model_uri=f"s3://{bucket}/output/digits/model.tar.gz",
        test_data_uri=f"s3://{bucket}/data/test/", code_uri=f"s3://{bucket}/code/", script="evaluate.py",
        output_uri=output,
    )
    # moto runs no container: write what the evaluation script would have written.
    aws_clients("s3").put_object(Bucket=bucket, Key="output/digits/evaluation/metrics.json",
                                 Body=json.dumps({"accuracy": 0.97, "loss": 0.1}).encode())
    result = processing.evaluate(aws_clients, request, poll_seconds=0, sleep=lambda seconds: None)
    assert result.created is True
    assert result.metrics == {"accuracy": 0.97, "loss": 0.1}
    assert result.metrics_uri == f"s3://{bucket}/output/digits/evaluation/metrics.json"
    stored = aws_clients("sagemaker").describe_processing_job(ProcessingJobName=name)
    assert stored["ProcessingInputs"] == request["ProcessingInputs"]
    # A second run re-attaches.
    assert processing.evaluate(aws_clients, request, poll_seconds=0, sleep=lambda seconds: None).created is False


def test_missing_metrics_file_fails_naming_it(aws_clients, bucket):
    from trainops.errors import JobFailed

    with pytest.raises(JobFailed) as raised:
        processing.read_metrics(aws_clients, f"s3://{bucket}/nothing-here/")
    assert f"s3://{bucket}/nothing-here/metrics.json" in str(raised.value)


def test_register_and_find_the_champion(aws_clients, bucket):
    group = f"digits-{uuid.uuid4().hex[:8]}"
    assert registry.champion(aws_clients, group) is None

    def register(accuracy, approval, run):
        return registry.register(
            aws_clients, group=group, image_uri="image:1", model_artifact_uri=f"s3://{bucket}/{run}/model.tar.gz",
            metrics={"accuracy": accuracy}, metrics_uri=f"s3://{bucket}/{run}/metrics.json", approval=approval,
        )

    first = register(0.90, "Approved", "run-1")
    second = register(0.95, "Approved", "run-2")
    rejected = register(0.50, "Rejected", "run-3")
    assert (first.version, second.version, rejected.version) == (1, 2, 3)
    assert rejected.approval_status == "Rejected"
    stored = json.loads(aws_clients("s3").get_object(Bucket=bucket, Key="run-2/metrics.json")["Body"].read())
    assert stored == {"accuracy": 0.95}
    described = aws_clients("sagemaker").describe_model_package(ModelPackageName=second.arn)
    assert described["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"] == f"s3://{bucket}/run-2/metrics.json"

    best = registry.champion(aws_clients, group)
    assert best.arn == second.arn
    assert best.metrics == {"accuracy": 0.95}
    assert best.model_artifact_uri == f"s3://{bucket}/run-2/model.tar.gz"


def test_an_evaluation_whose_script_is_not_in_source_dir_is_refused_before_any_upload_or_job(aws_environment,
                                                                                              aws_clients, bucket,
                                                                                              tmp_path):
    """The SageMaker evaluation checks its script with the local evaluation's check (hostfs.inputs.evaluation_script)
    before it uploads source_dir or creates the processing job: a misspelt script costs no job. The backend as a
    user has it: its defaults (preflight on), boto3 pointed at a plain moto server by AWS_ENDPOINT_URL."""
    from trainops.backends import get_backend
    from trainops.errors import SpecError

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "evaluate.py").write_text("print('evaluating')\n")
    (tmp_path / "secret.py").write_text("")
    s3, sagemaker = aws_clients("s3"), aws_clients("sagemaker")
    s3.put_object(Bucket=bucket, Key="out/digits/output/model.tar.gz", Body=b"model")
    s3.put_object(Bucket=bucket, Key="data/test/t1.csv", Body=b"1,2\n")

    def keys():
        return sorted(item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", []))

    def processing_jobs():
        return [job["ProcessingJobName"] for job in sagemaker.list_processing_jobs()["ProcessingJobSummaries"]]

    before, jobs_before = keys(), processing_jobs()
    backend = get_backend("sagemaker")
    given = {"source_dir": str(tmp_path / "code"), "model_artifact": f"s3://{bucket}/out/digits/output/model.tar.gz",
             "channels": {"test": f"s3://{bucket}/data/test/"}, "output_dir": "", "role": ROLE_ARN,
             "image_uri": "image:1"}
    cases = [({"entry_point": "evaluat.py"}, ["entry_point"],
              f"{tmp_path / 'code' / 'evaluat.py'} does not exist; give the evaluation script's file name (relative "
              "to source_dir)"),
             ({"entry_point": "../secret.py"}, ["entry_point"], "'../secret.py' points outside source_dir"),
             ({"entry_point": "evaluate.py", "source_dir": str(tmp_path / "nowhere")}, ["source_dir"],
              f"{tmp_path / 'nowhere'} is not a directory; give the directory holding the evaluation script"),
             ({"entry_point": "evaluat.py", "role": None}, ["role", "entry_point"], "does not exist")]
    for change, fields, words in cases:
        for call in (backend.evaluate, backend.start_evaluation):
            with pytest.raises(SpecError) as caught:
                call(**{**given, **change})
            assert [problem.path for problem in caught.value.problems] == fields, change
            assert words in caught.value.problems[-1].message
            assert caught.value.source == "evaluation"
    assert keys() == before and processing_jobs() == jobs_before  # nothing uploaded, no processing job

    handle = backend.start_evaluation(entry_point="evaluate.py", **given)  # the script there: uploaded, job created
    assert sorted(processing_jobs()) == sorted(jobs_before + [handle.job_name])
    assert "out/digits/evaluation/code/evaluate.py" in keys()
