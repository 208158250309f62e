"""What `trainops render` shows is what SageMaker receives: render the FSx example spec, pass the preflight, upload
the code and the runtime, submit, and compare the job SageMaker stored with the rendered request (moto server)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml

from trainops.backends.request.render import artifact_locations, render
from trainops.backends.sagemaker import training
from trainops.backends.sagemaker.preflight import preflight
from trainops.backends.sagemaker.uploads import upload_runtime, upload_source_dir

pytestmark = pytest.mark.system

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "specs" / "smddp-p4de-fsx.yaml"


def test_the_rendered_fsx_request_is_exactly_what_sagemaker_stores(aws_clients, moto_fsx_details, tmp_path):
    from trainops.spec.loader import parse_job_spec

    ec2 = aws_clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.40.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=f"lustre-{uuid.uuid4().hex[:6]}", Description="lustre", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]},
    ])
    file_system = aws_clients("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]["FileSystemId"]
    moto_fsx_details(file_system, mount_name="fsx1a2b3c")  # the mount name check runs too
    bucket = f"trainops-{uuid.uuid4().hex[:12]}"
    aws_clients("s3").create_bucket(Bucket=bucket)

    document = yaml.safe_load(EXAMPLE.read_text())
    document["inputs"]["train"]["file_system_id"] = file_system
    document["subnets"] = [subnet]
    document["security_group_ids"] = [group]
    document["output_path"] = f"s3://{bucket}/smddp-fsx"
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('train')\n")
    document["source_dir"] = str(source)
    spec = parse_job_spec(document)
    name = f"smddp-fsx-{uuid.uuid4().hex[:8]}"
    request = render(spec, job_name=name)
    shown = json.loads(json.dumps(request))

    preflight(aws_clients, request)
    locations = artifact_locations(spec.output_path, name)
    upload_source_dir(aws_clients, source, locations.code_prefix)
    upload_runtime(aws_clients, locations.runtime_prefix)
    assert training.submit(aws_clients, request).created is True

    stored = aws_clients("sagemaker").describe_training_job(TrainingJobName=name)
    for key in ("RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig",
                "StoppingCondition", "EnableInterContainerTrafficEncryption"):
        assert stored[key] == shown[key], key
    # moto adds its own MetricDefinitions to the algorithm specification; everything rendered must be there as sent.
    for key, value in shown["AlgorithmSpecification"].items():
        assert stored["AlgorithmSpecification"][key] == value, key
