"""The FSx preflight against EC2 and FSx on a moto server: it passes a good request and reports each mistake with
the resource and the fix. moto's file systems get a Lifecycle and a MountName (the `moto_fsx_details` fixture,
tests/support/moto_server.py) for the checks that read them; on a plain moto server, which describes neither, those
two checks are notes and the others still refuse."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from support.sagemaker_shapes import training_request

from trainops.backends.sagemaker.preflight import check_request, preflight
from trainops.errors import PreflightError

pytestmark = pytest.mark.system


@dataclass
class Network:
    subnet_a: str  # in the file system's zone
    subnet_b: str  # another zone
    good_group: str  # self-referencing rules for 988 and 1018-1023
    partial_group: str  # 988 only
    open_group: str  # all traffic from itself
    cidr_group: str  # TCP ports from the VPC's CIDR
    file_system: str
    mount_name: str


def _group(ec2, vpc, name, rules):
    group = ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)["GroupId"]
    permissions = [rule(group) for rule in rules]
    if permissions:
        ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=permissions)
    return group


def _self_tcp(low, high):
    return lambda group: {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "UserIdGroupPairs": [{"GroupId": group}]}


def _cidr_tcp(low, high):
    return lambda group: {"IpProtocol": "tcp", "FromPort": low, "ToPort": high, "IpRanges": [{"CidrIp": "10.20.0.0/16"}]}


@pytest.fixture
def network(plain_network, moto_fsx_details):
    moto_fsx_details(plain_network.file_system, mount_name=plain_network.mount_name)
    return plain_network


@pytest.fixture
def plain_network(aws_clients, request):
    ec2 = aws_clients("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet_a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24", AvailabilityZone="us-east-1a")["Subnet"]["SubnetId"]
    subnet_b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.2.0/24", AvailabilityZone="us-east-1b")["Subnet"]["SubnetId"]
    tag = request.node.name[-40:]
    good = _group(ec2, vpc, f"good-{tag}", [_self_tcp(988, 988), _self_tcp(1018, 1023)])
    partial = _group(ec2, vpc, f"partial-{tag}", [_self_tcp(988, 988)])
    everything = _group(ec2, vpc, f"open-{tag}", [lambda group: {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}])
    cidr = _group(ec2, vpc, f"cidr-{tag}", [_cidr_tcp(988, 988), _cidr_tcp(1018, 1023)])
    file_system = aws_clients("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet_a], SecurityGroupIds=[good],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]
    return Network(subnet_a, subnet_b, good, partial, everything, cidr, file_system["FileSystemId"], "fsxmount")


def _request(network, *, subnets=None, groups=None, directory="/fsxmount/datasets/digits", file_system=None, vpc=True):
    request = training_request(
        "digits-fsx-1",
        InputDataConfig=[{
            "ChannelName": "train",
            "DataSource": {"FileSystemDataSource": {
                "FileSystemId": file_system or network.file_system, "FileSystemType": "FSxLustre",
                "DirectoryPath": directory, "FileSystemAccessMode": "ro"}},
        }],
    )
    if vpc:
        request["VpcConfig"] = {"Subnets": subnets or [network.subnet_a], "SecurityGroupIds": groups or [network.good_group]}
    return request


def test_a_good_request_passes(aws_clients, network):
    preflight(aws_clients, _request(network))


@pytest.mark.parametrize("group", ["open_group", "cidr_group"])
def test_all_traffic_or_a_covering_cidr_also_pass(aws_clients, network, group):
    assert check_request(aws_clients, _request(network, groups=[getattr(network, group)])) == []


def test_requests_without_file_system_channels_need_nothing(aws_clients):
    assert check_request(aws_clients, training_request("digits-s3-1")) == []


def test_missing_vpc_config(aws_clients, network):
    problems = check_request(aws_clients, _request(network, vpc=False))
    assert [problem.path for problem in problems] == ["VpcConfig"]
    assert "InputDataConfig[train]" in problems[0].message
    assert "subnets and security_group_ids" in problems[0].message


def test_subnet_in_another_zone(aws_clients, network):
    problems = check_request(aws_clients, _request(network, subnets=[network.subnet_a, network.subnet_b]))
    assert len(problems) == 1
    assert problems[0].path == "VpcConfig.Subnets"
    assert network.subnet_b in problems[0].message
    assert "us-east-1b" in problems[0].message and "use a subnet in us-east-1a" in problems[0].message


def test_subnet_that_does_not_exist(aws_clients, network):
    problems = check_request(aws_clients, _request(network, subnets=["subnet-0000000000000dead"]))
    assert any("subnet-0000000000000dead does not exist" in problem.message for problem in problems)


def test_security_group_without_the_lustre_range(aws_clients, network):
    problems = check_request(aws_clients, _request(network, groups=[network.partial_group]))
    assert len(problems) == 1
    assert problems[0].path == "VpcConfig.SecurityGroupIds"
    assert network.partial_group in problems[0].message
    assert "1018-1023" in problems[0].message
    assert f"--group-id {network.partial_group} --protocol tcp --port 1018-1023" in problems[0].message


def test_security_group_that_does_not_exist(aws_clients, network):
    problems = check_request(aws_clients, _request(network, groups=["sg-0000000000000dead"]))
    assert [problem.path for problem in problems] == ["VpcConfig.SecurityGroupIds"]
    assert "sg-0000000000000dead does not exist" in problems[0].message


def test_directory_path_without_the_mount_name(aws_clients, network):
    problems = check_request(aws_clients, _request(network, directory="/datasets/digits"))
    assert [problem.path for problem in problems] == [
        "InputDataConfig[train].DataSource.FileSystemDataSource.DirectoryPath"
    ]
    assert "/fsxmount/" in problems[0].message


def test_file_system_not_available(aws_clients, network, moto_fsx_details):
    moto_fsx_details(network.file_system, lifecycle="CREATING")
    problems = check_request(aws_clients, _request(network))
    assert [problem.path for problem in problems] == ["InputDataConfig[train].DataSource.FileSystemDataSource.FileSystemId"]
    assert "CREATING" in problems[0].message


def test_file_system_that_does_not_exist(aws_clients, network):
    problems = check_request(aws_clients, _request(network, file_system="fs-0000000000000dead"))
    assert any("fs-0000000000000dead does not exist" in problem.message for problem in problems)


def test_every_problem_is_reported_at_once_with_exit_code_2(aws_clients, network):
    with pytest.raises(PreflightError) as raised:
        preflight(aws_clients, _request(network, subnets=[network.subnet_b], groups=[network.partial_group],
                                        directory="/wrong/path"))
    paths = sorted(problem.path for problem in raised.value.problems)
    assert paths == [
        "InputDataConfig[train].DataSource.FileSystemDataSource.DirectoryPath",
        "VpcConfig.SecurityGroupIds",
        "VpcConfig.Subnets",
    ]
    assert raised.value.exit_code == 2


def test_on_a_plain_moto_server_what_is_not_described_is_a_note_and_the_zone_still_refuses(aws_clients, plain_network):
    findings = preflight(aws_clients, _request(plain_network))
    assert findings.problems == []
    assert findings.notes[:2] == [
        f"whether file system {plain_network.file_system} is AVAILABLE not checked: DescribeFileSystems gave no "
        "Lifecycle",
        "InputDataConfig[train].DataSource.FileSystemDataSource.DirectoryPath '/fsxmount/datasets/digits' not checked "
        f"against the mount name: DescribeFileSystems gave {plain_network.file_system} none"]
    with pytest.raises(PreflightError) as raised:
        preflight(aws_clients, _request(plain_network, subnets=[plain_network.subnet_b]))
    assert [problem.path for problem in raised.value.problems] == ["VpcConfig.Subnets"]
    assert "use a subnet in us-east-1a" in raised.value.problems[0].message
