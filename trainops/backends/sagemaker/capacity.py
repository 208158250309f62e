"""Capacity checks of a rendered training request, before anything is created: is there room for this job?

Large jobs fail first on capacity, and on SageMaker only after submission (a job that waits in ``Starting``, or
fails with ResourceLimitExceeded). Three checks, every problem reported at once, each naming the spec field and
what to do:

- **a training plan** (``ResourceConfig.TrainingPlanArn``; DescribeTrainingPlan): the plan is Active, or Scheduled
  to start within the 2 days a job may wait Pending for it (AWS: a plan must be Scheduled or Active to be used); it
  is for training jobs, reserves the job's instance type with enough instances available, has its Availability Zone
  among the job's subnets' (DescribeSubnets), and its capacity lasts past the job's start + ``max_run`` + the 30
  minutes before its end from which SageMaker reclaims the instances;
- **the account's quota** for the instance type in training jobs, on-demand or spot (Service Quotas: the quota
  named "<type> for training job usage" found with ListServiceQuotas, its applied value read with GetServiceQuota),
  minus what the account's InProgress training jobs use (ListTrainingJobs, DescribeTrainingJob). A job on a
  training plan draws on the plan's reservation, which the first check covers, so the quota is not checked then;
- **EFA** from the instance catalog (trainops/runtime/instances.json): ``FI_PROVIDER=efa`` on a type without EFA is
  an error (libfabric finds no device); a multi-host accelerator job on such a type is noted (its collectives run
  over TCP).

What cannot be read (no permission, an endpoint without the API, a throttled or failing service, a timeout) or is
not there to read (a quota AWS does not list) is a note naming what was not checked and why
(`trainops.backends.sagemaker.advisory`): the preflight refuses a job only for what it read.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from trainops.aws.clients import ClientFactory, advisory_client
from trainops.backends.sagemaker.advisory import Findings, read
from trainops.errors import Problem
from trainops.runtime import catalog

TARGET = "training-job"
#: AWS, "Training plans utilization for SageMaker training jobs": a job waits Pending for a plan's capacity at most
#: 2 days (then InsufficientCapacityError), and the instances are reclaimed from 30 minutes before a reserved
#: capacity ends.
PENDING_LIMIT = 2 * 24 * 3600
RECLAIM_SECONDS = 30 * 60
QUOTA_NAME = "{instance_type} for training job usage"
SPOT_QUOTA_NAME = "{instance_type} for spot training job usage"
#: The problems (the job must not be submitted) and notes (worth saying, not blocking) of the capacity checks.
CapacityReport = Findings


def wanted_instances(request: dict[str, Any]) -> dict[str, int]:
    """Instance type -> count the request asks for (the instance groups summed by type)."""
    resources = request.get("ResourceConfig") or {}
    wanted: dict[str, int] = {}
    groups = resources.get("InstanceGroups") or [
        {"InstanceType": resources.get("InstanceType"), "InstanceCount": resources.get("InstanceCount", 1)}]
    for group in groups:
        if group.get("InstanceType"):
            wanted[group["InstanceType"]] = wanted.get(group["InstanceType"], 0) + int(group.get("InstanceCount", 1))
    return wanted


def _type_field(request: dict[str, Any]) -> str:
    return "instance_groups" if (request.get("ResourceConfig") or {}).get("InstanceGroups") else "instance_type"


def _count_field(request: dict[str, Any]) -> str:
    return "instance_groups" if (request.get("ResourceConfig") or {}).get("InstanceGroups") else "instance_count"


def check_capacity(factory: ClientFactory, request: dict[str, Any], *, now: float | None = None) -> CapacityReport:
    """Every capacity problem of `request`, and notes on what was not checked (the caller shows them)."""
    report = CapacityReport()
    wanted = wanted_instances(request)
    plan = (request.get("ResourceConfig") or {}).get("TrainingPlanArn")
    if plan:
        _check_training_plan(factory, request, plan, wanted, time.time() if now is None else now, report)
    elif wanted:
        _check_quotas(factory, request, wanted, report)
    _check_efa(request, wanted, report)
    return report


# --- training plans -----------------------------------------------------------------------------------------------

def _timestamp(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _describe_plan(factory: ClientFactory, plan: str, report: CapacityReport) -> dict[str, Any] | None:
    def missing(code: str) -> Problem | None:
        if code in ("ResourceNotFound", "ValidationException"):
            return Problem("training_plan", f"{plan} does not exist in this region: check the ARN and the region (aws "
                                            "sagemaker list-training-plans)")
        return None

    return read(report, f"training plan {plan}", "sagemaker:DescribeTrainingPlan",
                lambda: advisory_client(factory, "sagemaker").describe_training_plan(TrainingPlanName=plan), missing)


def _check_training_plan(factory: ClientFactory, request: dict[str, Any], plan: str, wanted: dict[str, int],
                         now: float, report: CapacityReport) -> None:
    described = _describe_plan(factory, plan, report)
    if described is None:
        return
    status = described.get("Status")
    start = _timestamp(described.get("StartTime"))
    if status == "Scheduled" and start is not None and start - now > PENDING_LIMIT:
        report.problems.append(Problem("training_plan", (
            f"{plan} is Scheduled and its capacity starts at {_when(start)}, more than 2 days from now: a job waits "
            "Pending for a plan's capacity at most 2 days, then ends with InsufficientCapacityError; submit after "
            f"{_when(start - PENDING_LIMIT)}, or remove training_plan to run on on-demand capacity")))
    elif status == "Scheduled":
        report.notes.append(f"training plan {plan} is Scheduled: the job waits Pending until its capacity starts"
                            + (f" at {_when(start)}" if start else ""))
    elif status != "Active":
        advice = ("its purchase is still being processed; wait until it is Scheduled or Active" if status == "Pending"
                  else "its reservation is over or was never made; buy a new plan (aws sagemaker "
                  "create-training-plan)")
        report.problems.append(Problem("training_plan", f"{plan} is {status}, not Active or Scheduled: {advice}, or "
                                       "remove training_plan to run on on-demand capacity"))
    targets = list(described.get("TargetResources") or [])
    if TARGET not in targets:
        shown = ", ".join(targets) or "nothing"
        report.problems.append(Problem("training_plan", f"{plan} reserves capacity for {shown}, not training jobs: "
                                       "use a plan bought with --target-resources training-job"))
    summaries = list(described.get("ReservedCapacitySummaries") or [])
    reserved = {summary.get("InstanceType") for summary in summaries}
    for instance_type in wanted:
        if instance_type not in reserved:
            shown = ", ".join(sorted(str(item) for item in reserved if item)) or "no instances"
            report.problems.append(Problem(_type_field(request), f"the training plan reserves {shown}, not "
                                           f"{instance_type}: use the plan's instance type or another plan"))
    available = described.get("AvailableInstanceCount")
    needed = sum(wanted.values())
    if isinstance(available, int) and needed > available:
        total, in_use = described.get("TotalInstanceCount"), described.get("InUseInstanceCount")
        report.problems.append(Problem(_count_field(request), f"the job needs {needed} instances but the training "
                                       f"plan has {available} available (of {total}, {in_use} in use): lower "
                                       "instance_count or wait for the plan's other jobs"))
    zones = {summary.get("AvailabilityZone") for summary in summaries
             if summary.get("InstanceType") in wanted and summary.get("AvailabilityZone")}
    subnets = list((request.get("VpcConfig") or {}).get("Subnets") or [])
    if zones and subnets:
        _check_plan_zone(factory, subnets, zones, report)
    _check_plan_end(request, described, summaries, wanted, now, report)


def _capacity_window(described: dict[str, Any], summaries: list[dict[str, Any]], wanted: dict[str, int],
                     now: float) -> tuple[float | None, float | None]:
    """(start, end) of the reserved capacity the job would run in: the first of the job's instance type that has
    not ended (a plan may hold several, one after another), else the plan's own."""
    windows = sorted((_timestamp(summary.get("StartTime")) or 0.0, _timestamp(summary.get("EndTime")))
                     for summary in summaries if summary.get("InstanceType") in wanted)
    for start, end in windows:
        if end is not None and end > now:
            return start or None, end
    return _timestamp(described.get("StartTime")), _timestamp(described.get("EndTime"))


def _check_plan_end(request: dict[str, Any], described: dict[str, Any], summaries: list[dict[str, Any]],
                    wanted: dict[str, int], now: float, report: CapacityReport) -> None:
    start, end = _capacity_window(described, summaries, wanted, now)
    if end is None:
        return
    begin = max(now, start or now)
    usable = end - RECLAIM_SECONDS
    max_run = int((request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds") or 0)
    if begin + max_run > usable:
        left = max(0, int(usable - begin))
        report.problems.append(Problem("max_run", (
            f"the job may run until {_when(begin + max_run)} ({'its start' if begin > now else 'now'} + max_run "
            f"{max_run} s), but the training plan's capacity ends at {_when(end)} and SageMaker reclaims its "
            f"instances 30 minutes before: lower max_run to at most {left} s (and checkpoint), or use a plan that "
            "lasts longer")))


def _check_plan_zone(factory: ClientFactory, subnets: list[str], zones: set[str], report: CapacityReport) -> None:
    def missing(code: str) -> Problem | None:
        if code.startswith("InvalidSubnet"):
            return Problem("subnets", f"{', '.join(subnets)}: not every subnet exists in this region; check the ids")
        return None

    answer = read(report, "the training plan's Availability Zone against the subnets'", "ec2:DescribeSubnets",
                  lambda: advisory_client(factory, "ec2").describe_subnets(SubnetIds=subnets), missing)
    if answer is None:
        return
    described = answer.get("Subnets") or []
    theirs = {subnet["SubnetId"]: subnet.get("AvailabilityZone") for subnet in described}
    if not zones & set(theirs.values()):
        shown = ", ".join(f"{subnet} ({zone})" for subnet, zone in sorted(theirs.items()))
        report.problems.append(Problem("subnets", f"the training plan's capacity is in {', '.join(sorted(zones))} but "
                                       f"the subnets are {shown}: add a subnet in {sorted(zones)[0]}"))


# --- quotas ---------------------------------------------------------------------------------------------------------

def _quota_codes(client: Any, names: set[str]) -> dict[str, str]:
    """Quota name -> code for the SageMaker quotas named, from ListServiceQuotas."""
    found: dict[str, str] = {}
    token = None
    while True:
        page = client.list_service_quotas(ServiceCode="sagemaker", MaxResults=100,
                                          **({"NextToken": token} if token else {}))
        for quota in page.get("Quotas") or []:
            if quota.get("QuotaName") in names:
                found[quota["QuotaName"]] = quota["QuotaCode"]
        token = page.get("NextToken")
        if not token or len(found) == len(names):
            return found


def _running_usage(client: Any) -> tuple[dict[tuple[str, bool], int], dict[tuple[str, bool], list[str]]]:
    """(instance type, spot) -> instances the account's InProgress training jobs hold outside training plans, and
    those jobs' names."""
    usage: dict[tuple[str, bool], int] = {}
    names: dict[tuple[str, bool], list[str]] = {}
    for summary in _in_progress(client):
        job = client.describe_training_job(TrainingJobName=summary["TrainingJobName"])
        if (job.get("ResourceConfig") or {}).get("TrainingPlanArn"):
            continue  # its instances are a plan's reservation, not the account's quota
        spot = bool(job.get("EnableManagedSpotTraining"))
        for instance_type, count in wanted_instances(job).items():
            usage[(instance_type, spot)] = usage.get((instance_type, spot), 0) + count
            names.setdefault((instance_type, spot), []).append(summary["TrainingJobName"])
    return usage, names


def _in_progress(client: Any) -> Iterator[dict[str, Any]]:
    token = None
    while True:
        page = client.list_training_jobs(StatusEquals="InProgress", MaxResults=100,
                                         **({"NextToken": token} if token else {}))
        yield from page.get("TrainingJobSummaries") or []
        token = page.get("NextToken")
        if not token:
            return


def _check_quotas(factory: ClientFactory, request: dict[str, Any], wanted: dict[str, int],
                  report: CapacityReport) -> None:
    spot = bool(request.get("EnableManagedSpotTraining"))
    template = SPOT_QUOTA_NAME if spot else QUOTA_NAME
    names = {instance_type: template.format(instance_type=instance_type) for instance_type in wanted}
    quotas = advisory_client(factory, "service-quotas")
    codes = read(report, "the account's service quotas", "servicequotas:ListServiceQuotas",
                 lambda: _quota_codes(quotas, set(names.values())))
    if codes is None:
        return
    limits: dict[str, tuple[float, str]] = {}
    for instance_type, name in names.items():
        code = codes.get(name)
        if code is None:
            report.notes.append(f"no service quota named {name!r}; the account's limit for {instance_type} was not "
                                "checked")
            continue
        quota = read(report, f"the service quota {name!r}", "servicequotas:GetServiceQuota",
                     functools.partial(quotas.get_service_quota, ServiceCode="sagemaker", QuotaCode=code))
        if quota is not None:
            limits[instance_type] = (float(quota["Quota"]["Value"]), code)
    if not limits:
        return
    running = read(report, "the running training jobs' use of the quota",
                   "sagemaker:ListTrainingJobs / sagemaker:DescribeTrainingJob",
                   lambda: _running_usage(advisory_client(factory, "sagemaker")))
    usage, holders_of = running if running is not None else ({}, {})
    for instance_type, (limit, code) in limits.items():
        used = usage.get((instance_type, spot), 0)
        needed = wanted[instance_type]
        if used + needed > limit:
            jobs = holders_of.get((instance_type, spot), [])
            holders = f" ({', '.join(jobs[:3])}{', ...' if len(jobs) > 3 else ''})" if used else ""
            report.problems.append(Problem(_count_field(request), (
                f"the job needs {needed} {instance_type} but the account's quota {names[instance_type]!r} is "
                f"{limit:g} and running training jobs hold {used}{holders}: request an increase (aws service-quotas "
                f"request-service-quota-increase --service-code sagemaker --quota-code {code} --desired-value "
                f"{used + needed}), wait for those jobs, or lower instance_count")))


# --- EFA ------------------------------------------------------------------------------------------------------------

def _check_efa(request: dict[str, Any], wanted: dict[str, int], report: CapacityReport) -> None:
    environment = request.get("Environment") or {}
    hosts = sum(wanted.values())
    for instance_type in wanted:
        info = catalog.lookup(instance_type)
        if info is None:
            report.notes.append(f"{instance_type} is not in trainops' instance catalog: EFA support not checked")
            continue
        if info.efa:
            continue
        if str(environment.get("FI_PROVIDER", "")).lower() == "efa":
            report.problems.append(Problem("environment.FI_PROVIDER", f"is efa but {instance_type} has no EFA "
                                           "device, so libfabric fails to start: remove FI_PROVIDER or choose an EFA "
                                           "instance type (ml.p4d.24xlarge, ml.p5.48xlarge, ml.trn1.32xlarge, ...)"))
        elif hosts > 1 and info.accelerators:
            report.notes.append(f"{instance_type} has no EFA: the {hosts} hosts' collectives run over TCP sockets, "
                                "much slower than on an EFA instance type")
