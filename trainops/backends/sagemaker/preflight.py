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

A read that fails, or an answer without the field a check needs (a file system described without its lifecycle or
mount name), proves nothing: it is a note naming what was not checked and why, printed before the job is submitted
(`trainops.backends.sagemaker.advisory`). Only what was read can refuse a job.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from trainops.aws.clients import ClientFactory, advisory_client
from trainops.backends.sagemaker.advisory import Findings, read
from trainops.backends.sagemaker.capacity import check_capacity
from trainops.backends.sagemaker.fsx import FileSystemInfo, read_file_system
from trainops.errors import PreflightError, Problem

LOG = logging.getLogger("trainops.backends.sagemaker.preflight")

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


def _missing(prefix: str, problem: Problem | None) -> Any:
    """A `read` ``proves`` callback: error codes starting with ``prefix`` (InvalidSubnetID.NotFound, ...) are
    ``problem`` (None: the resource is only absent, which the caller judges)."""
    return lambda code: problem if code.startswith(prefix) else None


def _describe_subnet(client: Any, subnet_id: str, findings: Findings, what: str,
                     absent: Problem | None) -> dict[str, Any] | None:
    """The subnet, or None: not readable (a note about ``what``), or absent (``absent``, when given, a problem)."""
    answer = read(findings, what, "ec2:DescribeSubnets", lambda: client.describe_subnets(SubnetIds=[subnet_id]),
                  _missing("InvalidSubnet", absent))
    subnets = (answer or {}).get("Subnets") or []
    if answer is not None and not subnets and absent is not None:
        findings.problems.append(absent)
    return subnets[0] if subnets else None


def _describe_group(client: Any, group_id: str, findings: Findings) -> dict[str, Any] | None:
    absent = Problem("VpcConfig.SecurityGroupIds", f"security group {group_id} does not exist in this region; check "
                                                   "the id (security_group_ids in the spec)")
    answer = read(findings, f"the Lustre ports of security group {group_id}", "ec2:DescribeSecurityGroups",
                  lambda: client.describe_security_groups(GroupIds=[group_id]), _missing("InvalidGroup", absent))
    groups = (answer or {}).get("SecurityGroups") or []
    if answer is not None and not groups:
        findings.problems.append(absent)
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


def _check_security_groups(ec2: Any, group_ids: list[str], subnets: list[dict[str, Any]],
                           findings: Findings) -> list[Problem]:
    problems: list[Problem] = []
    groups = [group for group in (_describe_group(ec2, group_id, findings) for group_id in group_ids) if group]
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


def _check_subnets(ec2: Any, subnet_ids: list[str], info: FileSystemInfo,
                   findings: Findings) -> tuple[list[Problem], list[dict[str, Any]]]:
    problems: list[Problem] = []
    zone_of = f"the Availability Zone of file system {info.file_system_id}"
    file_system_subnet = _describe_subnet(ec2, info.subnet_ids[0], findings, zone_of, None) \
        if info.subnet_ids else None
    zone = file_system_subnet.get("AvailabilityZone") if file_system_subnet else None
    vpc = info.vpc_id or (file_system_subnet.get("VpcId") if file_system_subnet else None)
    found = []
    for subnet_id in subnet_ids:
        subnet = _describe_subnet(ec2, subnet_id, findings, f"subnet {subnet_id} against {info.file_system_id}",
                                  Problem("VpcConfig.Subnets", f"subnet {subnet_id} does not exist in this region; "
                                                               "check the id (subnets in the spec)"))
        if subnet is None:
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


def _check_directory(label: str, source: dict[str, Any], info: FileSystemInfo, findings: Findings) -> list[Problem]:
    label = _source_label(label)
    path = str(source.get("DirectoryPath") or "")
    mount = info.mount_name
    if not mount:
        findings.notes.append(f"{label}.DirectoryPath {path!r} not checked against the mount name: DescribeFileSystems "
                              f"gave {info.file_system_id} none")
        return []
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


def check(factory: ClientFactory, request: dict[str, Any]) -> Findings:
    """Every problem the preflight finds in a rendered ``create_training_job`` request, and a note for each check it
    could not make: the file systems' (below) and the capacity's (`trainops.backends.sagemaker.capacity`: training
    plan, quota, EFA)."""
    findings = Findings()
    findings.problems += file_system_problems(factory, request, findings)
    capacity = check_capacity(factory, request)
    findings.problems += capacity.problems
    findings.notes += capacity.notes
    return findings


def check_request(factory: ClientFactory, request: dict[str, Any]) -> list[Problem]:
    """The problems of `check` (empty when the request passes)."""
    return check(factory, request).problems


def file_system_problems(factory: ClientFactory, request: dict[str, Any],
                         findings: Findings | None = None) -> list[Problem]:
    """The FSx/EFS channels' problems (what could not be checked: notes in ``findings``). Requests without FSx or EFS
    channels have nothing to check and make no call."""
    channels = _file_system_channels(request)
    if not channels:
        return []
    found = Findings()  # what the reads prove lands in found.problems, in the order of the checks
    problems = found.problems
    vpc = request.get("VpcConfig") or {}
    subnet_ids = list(vpc.get("Subnets") or [])
    group_ids = list(vpc.get("SecurityGroupIds") or [])
    if not subnet_ids or not group_ids:
        names = ", ".join(label for label, _, _ in channels)
        problems.append(
            Problem("VpcConfig", f"{names} read from a file system, which SageMaker reaches only inside a VPC; set "
                    "subnets and security_group_ids in the spec (VpcConfig.Subnets and VpcConfig.SecurityGroupIds)")
        )
    ec2 = advisory_client(factory, "ec2") if subnet_ids or group_ids else None
    checked_subnets: set[str] = set()
    subnets_found: list[dict[str, Any]] = []
    lustre = [(label, source) for label, _, source in channels if source.get("FileSystemType") == "FSxLustre"]
    for label, source in lustre:  # EFS: only the VpcConfig rule above applies
        info = _read_file_system(factory, label, source, found)
        if info is None:
            continue
        if info.lifecycle is None:
            found.notes.append(f"whether file system {info.file_system_id} is AVAILABLE not checked: "
                               "DescribeFileSystems gave no Lifecycle")
        elif not info.usable:
            problems.append(Problem(f"{_source_label(label)}.FileSystemId",
                                    f"file system {info.file_system_id} is {info.lifecycle}, not "
                                    "AVAILABLE; wait for it, or fix it, before training"))
        problems += _check_directory(label, source, info, found)
        if ec2 is not None and subnet_ids and info.file_system_id not in checked_subnets:
            checked_subnets.add(info.file_system_id)
            subnet_problems, subnets = _check_subnets(ec2, subnet_ids, info, found)
            problems += subnet_problems
            subnets_found += [subnet for subnet in subnets if subnet not in subnets_found]
    if ec2 is not None and group_ids and lustre:
        problems += _check_security_groups(ec2, group_ids, subnets_found, found)
    if findings is not None:
        findings.notes += [note for note in found.notes if note not in findings.notes]
    return list(dict.fromkeys(problems))  # a subnet two file systems share is reported once


def _read_file_system(factory: ClientFactory, label: str, source: dict[str, Any],
                      found: Findings) -> FileSystemInfo | None:
    """The channel's file system, or None: absent or not Lustre (a problem), or not readable (a note)."""
    file_system_id = str(source.get("FileSystemId") or "")
    field = f"{_source_label(label)}.FileSystemId"
    try:
        return read(found, f"{label}'s file system {file_system_id}", "fsx:DescribeFileSystems",
                    lambda: read_file_system(advisory_client(factory, "fsx"), file_system_id, field))
    except PreflightError as error:
        found.problems += error.problems
        return None


def preflight(factory: ClientFactory, request: dict[str, Any]) -> Findings:
    """Run `check`: raise `PreflightError` (exit code 2) listing every problem, if there is any; else log each note
    (what was not checked and why: the command line prints them) and return the findings."""
    findings = check(factory, request)
    if findings.problems:
        raise PreflightError(findings.problems, source=f"training job {request.get('TrainingJobName', '')}".strip())
    for note in findings.notes:
        LOG.warning("preflight: %s", note)
    return findings
