"""`trainops run --backend sagemaker`, `status`, `logs` and `stop` as a user runs them, against a plain moto server on
127.0.0.1 with the default settings (the preflight on), as the README says to try the SageMaker path: moto has no
SageMaker service quotas and describes no FSx Lifecycle or MountName, so those checks are notes the user sees, and
the checks it can answer (a subnet in another zone than the file system) refuse before anything is created. moto
creates training jobs already Completed; the InProgress walks are covered with Stubber elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pytest

BUCKET = "trainops-cli-test"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTrainingRole"


@pytest.fixture
def project(tmp_path, aws_environment):
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data/train/part-0", Body=b"x")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('training')\n")
    (source / "util.py").write_text("VALUE = 1\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: cli-moto\n"
        f"role: {ROLE}\nregion: us-east-1\nframework_version: '2.3.0'\npy_version: py311\n"
        "entry_point: train.py\nsource_dir: src\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {torch_distributed: {enabled: true}}\n"
        f"inputs: {{train: s3://{BUCKET}/data/train/}}\noutput_path: s3://{BUCKET}/out\n")
    return spec


QUOTA_NOTE = ("preflight: the account's service quotas not checked: servicequotas:ListServiceQuotas failed (500: "
              "500 Internal Server Error)")


def trainops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_run_status_logs_stop_against_moto(project):
    created = trainops("run", str(project), "--backend", "sagemaker", "--job-name", "cli-moto-1")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "created SageMaker training job cli-moto-1" in created.stdout
    assert QUOTA_NOTE in created.stdout
    assert "status:     Completed" in created.stdout
    keys = {item["Key"] for item in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/cli-moto-1/")
            .get("Contents", [])}
    assert "out/cli-moto-1/trainops/code/train.py" in keys and "out/cli-moto-1/trainops/code/util.py" in keys
    assert "out/cli-moto-1/trainops/runtime/trainops/runtime/__main__.py" in keys

    again = trainops("run", str(project), "--backend", "sagemaker", "--job-name", "cli-moto-1")
    assert again.returncode == 0 and "re-attached to SageMaker training job cli-moto-1" in again.stdout

    status = trainops("status", "cli-moto-1", "--backend", "sagemaker", "--json")
    assert status.returncode == 0, status.stderr
    described = json.loads(status.stdout)
    assert described["job_name"] == "cli-moto-1" and described["status"] == "Completed"
    assert described["instance_count"] == 2

    assert trainops("logs", "cli-moto-1", "--backend", "sagemaker").returncode == 0
    stopped = trainops("stop", "cli-moto-1", "--backend", "sagemaker")
    assert stopped.returncode == 0 and "Completed" in stopped.stdout  # stopping a finished job is not an error


def test_unknown_job_and_local_paths_are_input_errors(project, tmp_path):
    missing = trainops("status", "no-such-job", "--backend", "sagemaker")
    assert missing.returncode == 2, missing.stderr
    assert "no job 'no-such-job' on the sagemaker backend (looked in region us-east-1)" in missing.stderr
    assert "--backend NAME (local" in missing.stderr  # how to look elsewhere
    project.write_text(project.read_text().replace(f"s3://{BUCKET}/data/train/", str(tmp_path)))
    refused = trainops("run", str(project), "--backend", "sagemaker")
    assert refused.returncode == 2 and "inputs.train" in refused.stderr and "Traceback" not in refused.stderr


@pytest.fixture
def fsx_project(project):
    """An FSx for Lustre spec beside the S3 one: a file system in us-east-1a, a subnet there and one in us-east-1b,
    a security group that lets Lustre traffic in from itself. Returns (spec path, other zone's subnet)."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.50.0.0/16")["Vpc"]["VpcId"]
    here = ec2.create_subnet(VpcId=vpc, CidrBlock="10.50.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    there = ec2.create_subnet(VpcId=vpc, CidrBlock="10.50.2.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="lustre-cli", Description="lustre", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "UserIdGroupPairs": [{"GroupId": group}]},
        {"IpProtocol": "tcp", "FromPort": 1018, "ToPort": 1023, "UserIdGroupPairs": [{"GroupId": group}]}])
    file_system = boto3.client("fsx", region_name="us-east-1").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[here], SecurityGroupIds=[group],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125})["FileSystem"]
    spec = project.parent / "fsx.yaml"
    spec.write_text(project.read_text().replace("name: cli-moto", "name: cli-fsx").replace(
        f"inputs: {{train: s3://{BUCKET}/data/train/}}",
        f"inputs: {{train: {{file_system_id: {file_system['FileSystemId']}, directory_path: /fsx/train}}}}\n"
        f"subnets: [{here}]\nsecurity_group_ids: [{group}]"))
    return spec, there


def test_an_fsx_job_is_created_as_rendered_and_a_subnet_in_another_zone_is_refused_first(fsx_project):
    spec, other_zone = fsx_project
    shown = trainops("render", str(spec), "--job-name", "cli-fsx-1")
    assert shown.returncode == 0, shown.stderr
    rendered = json.loads(shown.stdout)
    created = trainops("run", str(spec), "--backend", "sagemaker", "--job-name", "cli-fsx-1", "--no-wait")
    assert created.returncode == 0, created.stdout + created.stderr
    out = created.stdout
    assert QUOTA_NOTE in out and "DescribeFileSystems gave no Lifecycle" in out and "mount name" in out
    assert "created SageMaker training job cli-fsx-1" in out
    stored = boto3.client("sagemaker").describe_training_job(TrainingJobName="cli-fsx-1")
    for key in ("RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig",
                "StoppingCondition"):
        assert stored[key] == rendered[key], key
    keys = {item["Key"] for item in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/cli-fsx-1/")
            .get("Contents", [])}
    assert "out/cli-fsx-1/trainops/code/train.py" in keys

    spec.write_text(spec.read_text().replace("subnets: [subnet-", f"subnets: [{other_zone}, subnet-", 1))
    refused = trainops("run", str(spec), "--backend", "sagemaker", "--job-name", "cli-fsx-2", "--no-wait")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"subnet {other_zone} is in us-east-1b but file system" in refused.stderr
    assert "Traceback" not in refused.stderr
    names = [job["TrainingJobName"] for job in boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    assert "cli-fsx-2" not in names
    assert not boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/cli-fsx-2/").get("Contents")

    # The preflight switched off for this run: nothing is read, nothing noted, and the same spec is submitted.
    unchecked = trainops("run", str(spec), "--backend", "sagemaker", "--job-name", "cli-fsx-3", "--no-wait",
                         "-o", "preflight=false")
    assert unchecked.returncode == 0, unchecked.stdout + unchecked.stderr
    assert "preflight:" not in unchecked.stdout and "created SageMaker training job cli-fsx-3" in unchecked.stdout


def test_a_pipeline_file_switches_the_preflight_off_with_backend_options(fsx_project):
    """The pipeline file's backend_options reach the SageMaker backend: the subnet in another zone is refused with
    the preflight on (the default) and submitted with preflight: false."""
    spec, other_zone = fsx_project
    spec.write_text(spec.read_text().replace("subnets: [subnet-", f"subnets: [{other_zone}, subnet-", 1))
    pipeline = spec.parent / "pipeline.yaml"

    def write(name: str, options: str) -> None:
        pipeline.write_text(f"name: {name}\nbackend: sagemaker\nworkdir: work\n{options}"
                            f"steps:\n  train:\n    spec: {spec.name}\n    job_name: {name}\n")

    write("cli-pipe-1", "")
    refused = trainops("run", str(pipeline))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"subnet {other_zone} is in us-east-1b" in refused.stderr
    write("cli-pipe-2", "backend_options: {preflight: false}\n")
    done = trainops("run", str(pipeline))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preflight:" not in done.stdout
    stored = boto3.client("sagemaker").describe_training_job(TrainingJobName="cli-pipe-2")
    assert stored["VpcConfig"]["Subnets"][0] == other_zone


def bucket_keys() -> list[str]:
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return sorted(item["Key"] for item in listed)


def job_names() -> list[str]:
    return [job["TrainingJobName"] for job in boto3.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]


@pytest.mark.parametrize(("field", "change", "words"), [
    ("entry_point", ("entry_point: train.py", "entry_point: trian.py"), "trian.py is not a file in"),
    ("source_dir", ("source_dir: src", "source_dir: sources"), "sources is not a directory"),
])
def test_a_missing_entry_point_or_source_dir_is_refused_before_anything_is_read_uploaded_or_created(
        project, field, change, words):
    """As the SDK refuses a script that is not a file in source_dir before any request: render and run (preflight on)
    exit 2 naming the field and what to do, with no CreateTrainingJob, nothing in the bucket and no preflight read."""
    project.write_text(project.read_text().replace(*change))
    name = f"cli-missing-{field.replace('_', '-')}"
    before = bucket_keys()
    shown = trainops("render", str(project), "--backend", "sagemaker", "--job-name", name)
    assert shown.returncode == 2 and shown.stdout == "", shown.stdout + shown.stderr
    assert f"  - {field}: " in shown.stderr and words in shown.stderr and "Traceback" not in shown.stderr
    for wait in ((), ("--no-wait",)):
        refused = trainops("run", str(project), "--backend", "sagemaker", "--job-name", name, *wait)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"  - {field}: " in refused.stderr and words in refused.stderr, refused.stderr
        assert "source_dir" in refused.stderr.split(words, 1)[1]  # the next step names where it is looked for
        assert "Traceback" not in refused.stderr and "internal error" not in refused.stderr
        assert "preflight:" not in refused.stdout  # refused before the preflight read anything
    assert name not in job_names()
    assert bucket_keys() == before


def test_a_v3_spec_s_local_channels_are_uploaded_before_the_job_is_created(project, tmp_path):
    """SDK v3's InputData with a local path (issue 46): `trainops run` uploads the directory (and a single file)
    under <output_path>/<job>/input/<channel>/ before CreateTrainingJob, whose channels name those places; a run again
    re-attaches and renders the same request."""
    (tmp_path / "data" / "nested").mkdir(parents=True)
    (tmp_path / "data" / "a.csv").write_text("1,2\n")
    (tmp_path / "data" / "nested" / "b.csv").write_text("3,4\n")
    (tmp_path / "labels.json").write_text('{"0": "cat"}')
    spec = tmp_path / "v3.yaml"
    spec.write_text(json.dumps({
        "training_image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311",
        "base_job_name": "v3-local", "role": ROLE, "region": "us-east-1",
        "source_code": {"source_dir": str(project.parent / "src"), "entry_script": "train.py"},
        "output_data_config": {"s3_output_path": f"s3://{BUCKET}/out"},
        "input_data_config": [{"channel_name": "train", "data_source": str(tmp_path / "data")},
                              {"channel_name": "labels", "data_source": str(tmp_path / "labels.json")}]}))
    created = trainops("run", str(spec), "--backend", "sagemaker", "--job-name", "v3-local-1")
    assert created.returncode == 0, created.stdout + created.stderr
    s3 = boto3.client("s3")
    keys = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="out/v3-local-1/input/")["Contents"]}
    assert keys == {"out/v3-local-1/input/train/a.csv", "out/v3-local-1/input/train/nested/b.csv",
                    "out/v3-local-1/input/labels/labels.json"}
    assert s3.get_object(Bucket=BUCKET, Key="out/v3-local-1/input/train/nested/b.csv")["Body"].read() == b"3,4\n"
    job = boto3.client("sagemaker").describe_training_job(TrainingJobName="v3-local-1")
    uris = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
            for channel in job["InputDataConfig"]}
    assert uris["train"] == f"s3://{BUCKET}/out/v3-local-1/input/train/"
    assert uris["labels"] == f"s3://{BUCKET}/out/v3-local-1/input/labels/labels.json"
    again = trainops("run", str(spec), "--backend", "sagemaker", "--job-name", "v3-local-1")
    assert again.returncode == 0 and "re-attached to SageMaker training job v3-local-1" in again.stdout
