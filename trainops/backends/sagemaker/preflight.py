"""Checks of a rendered training request against the account, before anything is created.

FSx for Lustre mistakes show only after minutes of instance provisioning on SageMaker (or as a job stuck in
``Starting``). These checks read the account instead (FSx, EC2) and report every problem at once, each naming the
resource and the fix:

- a channel reads from FSx or EFS but the request has no ``VpcConfig`` (subnets and security groups);
- the file system exists, is FSx for Lustre, and is AVAILABLE;
- every training subnet exists and lies in the file system's Availability Zone (and VPC);
- the security groups allow Lustre traffic (TCP 988 and 1018-1023) from themselves: an inbound rule whose source is
  one of the job's groups, or a CIDR that covers the training subnets, for TCP on those ports or for all traffic;
- the channel's ``DirectoryPath`` starts with ``/<MountName>`` of the file system.

Then the capacity (`trainops.backends.sagemaker.capacity`): the training plan (Active, for training jobs, the
instance type and count, its zone against the subnets', its end against ``max_run``), the account's quota for the
instance type minus the running jobs' use, and EFA support of the instance type.

Only what the request says is checked. The file system's own network interfaces may carry other security groups
(DescribeFileSystems does not list them); the usual setup shares one group, which is what is checked here.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.backends.sagemaker.fsx import FileSystemInfo, describe_file_system
from trainops.errors import PreflightError, Problem

#: The TCP port ranges Lustre clients and servers use (FSx for Lustre networking requirements).
LUSTRE_PORT_RANGES: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))


def _channel_label(channel: dict[str, Any], index: int) -> str:
    return f"InputDataConfig[{channel.get('ChannelName') or index}]"


def _source_label(label: str) -> str:
    # Problems point at the field of the request: InputDataConfig[train].DataSource.FileSystemDataSource.<Field>
    return f"{label}.DataSource.FileSystemDataSource"


def _file_system_channels(request: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = []
    for index, channel in enumerate(request.get("InputDataConfig") or []):
        source = (channel.get("DataSource") or {}).get("FileSystemDataSource")
        if source:
            found.append((_channel_label(channel, index), channel, source))
    return found


def _describe_subnet(client: Any, subnet_id: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        subnets = client.describe_subnets(SubnetIds=[subnet_id]).get("Subnets") or []
    except ClientError as error:
        if error_code(error).startswith("InvalidSubnet"):
            return None
        raise translate_client_error(error, f"DescribeSubnets {subnet_id}", "VpcConfig.Subnets") from error
    return subnets[0] if subnets else None


def _describe_group(client: Any, group_id: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        groups = client.describe_security_groups(GroupIds=[group_id]).get("SecurityGroups") or []
    except ClientError as error:
        if error_code(error).startswith("InvalidGroup"):
            return None
        raise translate_client_error(error, f"DescribeSecurityGroups {group_id}",
                                     "VpcConfig.SecurityGroupIds") from error
    return groups[0] if groups else None


def _covers_ports(permission: dict[str, Any], low: int, high: int) -> bool:
    protocol = str(permission.get("IpProtocol", ""))
    if protocol == "-1":
        return True
    if protocol not in {"tcp", "6"}:
        return False
    from_port, to_port = permission.get("FromPort"), permission.get("ToPort")
    return from_port is not None and to_port is not None and from_port <= low and to_port >= high


def _source_is_the_job(permission: dict[str, Any], group_ids: set[str], subnet_networks: list[Any]) -> bool:
    if any(pair.get("GroupId") in group_ids for pair in permission.get("UserIdGroupPairs") or []):
        return True
    if not subnet_networks:
        return False
    for ip_range in permission.get("IpRanges") or []:
        try:
            network = ipaddress.ip_network(ip_range.get("CidrIp", ""), strict=False)
        except ValueError:
            continue
        if all(subnet.subnet_of(network) for subnet in subnet_networks if subnet.version == network.version):
            return True
    return False


def _check_security_groups(ec2: Any, group_ids: list[str], subnets: list[dict[str, Any]]) -> list[Problem]:
    problems: list[Problem] = []
    groups = []
    for group_id in group_ids:
        group = _describe_group(ec2, group_id)
        if group is None:
            problems.append(Problem("VpcConfig.SecurityGroupIds", f"security group {group_id} does not exist in this "
                                    "region; check the id (security_group_ids in the spec)"))
        else:
            groups.append(group)
    if not groups:
        return problems
    networks = []
    for subnet in subnets:
        try:
            networks.append(ipaddress.ip_network(subnet.get("CidrBlock", ""), strict=False))
        except ValueError:
            continue
    known_ids = {group["GroupId"] for group in groups}
    first = groups[0]["GroupId"]
    for low, high in LUSTRE_PORT_RANGES:
        allowed = any(
            _covers_ports(permission, low, high) and _source_is_the_job(permission, known_ids, networks)
            for group in groups
            for permission in group.get("IpPermissions") or []
        )
        if not allowed:
            ports = str(low) if low == high else f"{low}-{high}"
            problems.append(
                Problem(
                    "VpcConfig.SecurityGroupIds",
                    f"security group {', '.join(sorted(known_ids))} allows no inbound TCP {ports} from itself, which "
                    f"Lustre needs; add: aws ec2 authorize-security-group-ingress --group-id {first} --protocol tcp "
                    f"--port {ports} --source-group {first}",
                )
            )
    return problems


def _check_subnets(ec2: Any, subnet_ids: list[str], info: FileSystemInfo) -> tuple[list[Problem], list[dict[str, Any]]]:
    problems: list[Problem] = []
    file_system_subnets = [subnet for subnet in (_describe_subnet(ec2, sid) for sid in info.subnet_ids[:1]) if subnet]
    zone = file_system_subnets[0].get("AvailabilityZone") if file_system_subnets else None
    vpc = info.vpc_id or (file_system_subnets[0].get("VpcId") if file_system_subnets else None)
    found = []
    for subnet_id in subnet_ids:
        subnet = _describe_subnet(ec2, subnet_id)
        if subnet is None:
            problems.append(Problem("VpcConfig.Subnets", f"subnet {subnet_id} does not exist in this region; check the "
                                    "id (subnets in the spec)"))
            continue
        found.append(subnet)
        if zone and subnet.get("AvailabilityZone") != zone:
            problems.append(
                Problem(
                    "VpcConfig.Subnets",
                    f"subnet {subnet_id} is in {subnet.get('AvailabilityZone')} but file system {info.file_system_id} "
                    f"is in {zone}; use a subnet in {zone} (same zone: no cross-zone traffic or cost)",
                )
            )
        elif vpc and subnet.get("VpcId") and subnet.get("VpcId") != vpc:
            problems.append(
                Problem("VpcConfig.Subnets", f"subnet {subnet_id} is in VPC {subnet.get('VpcId')} but file system "
                        f"{info.file_system_id} is in VPC {vpc}; use a subnet of {vpc}")
            )
    return problems, found


def _check_directory(label: str, source: dict[str, Any], info: FileSystemInfo) -> list[Problem]:
    label = _source_label(label)
    path = str(source.get("DirectoryPath") or "")
    mount = info.mount_name
    if not mount:
        return [Problem(f"{label}.FileSystemId", f"file system {info.file_system_id} reports no MountName")]
    prefix = f"/{mount}"
    if path != prefix and not path.startswith(prefix + "/"):
        return [
            Problem(
                f"{label}.DirectoryPath",
                f"channel reads {path!r}, which is not under the mount name of {info.file_system_id}; FSx for Lustre "
                f"paths start with {prefix}/ (for example {prefix}/datasets/train)",
            )
        ]
    return []


def check_request(factory: ClientFactory, request: dict[str, Any]) -> list[Problem]:
    """Every problem the preflight finds in a rendered ``create_training_job`` request (empty when it passes): the
    file systems' (below) and the capacity's (`trainops.backends.sagemaker.capacity`: training plan, quota, EFA)."""
    from trainops.backends.sagemaker.capacity import check_capacity

    return file_system_problems(factory, request) + check_capacity(factory, request).problems


def file_system_problems(factory: ClientFactory, request: dict[str, Any]) -> list[Problem]:
    """The FSx/EFS channels' problems. Requests without FSx or EFS channels have nothing to check and make no call."""
    channels = _file_system_channels(request)
    if not channels:
        return []
    problems: list[Problem] = []
    vpc = request.get("VpcConfig") or {}
    subnet_ids = list(vpc.get("Subnets") or [])
    group_ids = list(vpc.get("SecurityGroupIds") or [])
    if not subnet_ids or not group_ids:
        names = ", ".join(label for label, _, _ in channels)
        problems.append(
            Problem("VpcConfig", f"{names} read from a file system, which SageMaker reaches only inside a VPC; set "
                    "subnets and security_group_ids in the spec (VpcConfig.Subnets and VpcConfig.SecurityGroupIds)")
        )
    ec2 = factory("ec2") if subnet_ids or group_ids else None
    checked_subnets: set[str] = set()
    subnets_found: list[dict[str, Any]] = []
    for label, _, source in channels:
        if source.get("FileSystemType") != "FSxLustre":
            continue  # EFS: only the VpcConfig rule above applies
        file_system_id = str(source.get("FileSystemId") or "")
        try:
            info = describe_file_system(factory, file_system_id, f"{_source_label(label)}.FileSystemId")
        except PreflightError as error:
            problems += error.problems
            continue
        if not info.usable:
            problems.append(Problem(f"{_source_label(label)}.FileSystemId",
                                    f"file system {file_system_id} is {info.lifecycle}, not "
                                    "AVAILABLE; wait for it, or fix it, before training"))
        problems += _check_directory(label, source, info)
        if ec2 is not None and subnet_ids and info.file_system_id not in checked_subnets:
            checked_subnets.add(info.file_system_id)
            subnet_problems, found = _check_subnets(ec2, subnet_ids, info)
            problems += [problem for problem in subnet_problems if problem not in problems]
            subnets_found += [subnet for subnet in found if subnet not in subnets_found]
    if ec2 is not None and group_ids and any(source.get("FileSystemType") == "FSxLustre" for _, _, source in channels):
        problems += _check_security_groups(ec2, group_ids, subnets_found)
    return problems


def preflight(factory: ClientFactory, request: dict[str, Any]) -> None:
    """Run `check_request` and raise `PreflightError` (exit code 2) listing every problem, if there is any."""
    problems = check_request(factory, request)
    if problems:
        raise PreflightError(problems, source=f"training job {request.get('TrainingJobName', '')}".strip())
