"""Staging training data from S3 into FSx for Lustre before a job reads it.

A Lustre file system sees an S3 prefix through a data repository association (DRA: file-system path <-> S3 prefix).
Staging here means: check the file system is usable and read its mount name; find the association for the prefix or
create it; run an ``IMPORT_METADATA_FROM_REPOSITORY`` task for the paths (file contents then load lazily on first
read); wait for it through the shared states table; report how many files were imported and fail, with the task's
report location, when any were not.

Older file systems (``SCRATCH_1``, ``PERSISTENT_1``) have no associations: they link one S3 ``ImportPath`` for the
whole file system, whose contents appear at the root. Those are used as they are when the prefix lies inside it.

The training channel then reads ``/<MountName><file system path>`` (``StagingReport.directory_path``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from trainops.aws.clients import ClientFactory, error_code, translate_client_error
from trainops.aws.s3 import join_uri, parse_s3_uri
from trainops.backends.api import StageReport
from trainops.backends.sagemaker.waiting import poll, stop_unless_ended
from trainops.backends.states import classify
from trainops.errors import JobFailed, PreflightError, Problem

#: The report format and scope FSx offers for data repository tasks (the only ones it has).
REPORT_FORMAT = "REPORT_CSV_20191124"
REPORT_SCOPE = "FAILED_FILES_ONLY"
#: Where failure reports go by default, under the imported prefix (FSx only writes them inside a linked repository).
DEFAULT_REPORT_FOLDER = "_trainops_fsx_reports"


@dataclass(frozen=True)
class FileSystemInfo:
    """What staging and the preflight need to know about a Lustre file system."""

    file_system_id: str
    file_system_type: str
    lifecycle: str | None
    mount_name: str | None
    subnet_ids: list[str] = field(default_factory=list)
    vpc_id: str | None = None
    deployment_type: str | None = None
    import_path: str | None = None  # the whole-file-system S3 link of SCRATCH_1 / PERSISTENT_1 file systems

    @property
    def usable(self) -> bool:
        """Whether the lifecycle lets jobs mount it (AVAILABLE, or UPDATING), from the states table."""
        return classify("fsx_file_system", self.lifecycle) == "success"


@dataclass(frozen=True)
class StagingReport(StageReport):
    """The result of `stage`: where the data is on the file system and how the import went."""

    file_system_id: str
    mount_name: str
    s3_uri: str
    file_system_path: str
    directory_path: str  # what a training channel's FileSystemDataSource.DirectoryPath should be
    association_id: str | None
    association_created: bool
    task_id: str
    task_lifecycle: str
    total: int
    succeeded: int
    failed: int
    report_path: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom and KFP outputs)."""
        return asdict(self)


def _info(record: dict[str, Any]) -> FileSystemInfo:
    lustre = record.get("LustreConfiguration") or {}
    repository = lustre.get("DataRepositoryConfiguration") or {}
    return FileSystemInfo(
        file_system_id=record["FileSystemId"],
        file_system_type=record.get("FileSystemType", ""),
        lifecycle=record.get("Lifecycle"),
        mount_name=lustre.get("MountName"),
        subnet_ids=list(record.get("SubnetIds") or []),
        vpc_id=record.get("VpcId"),
        deployment_type=lustre.get("DeploymentType"),
        import_path=repository.get("ImportPath"),
    )


def describe_file_system(factory: ClientFactory, file_system_id: str, field_name: str = "file_system_id"
                         ) -> FileSystemInfo:
    """Describe one file system. Raises `PreflightError` naming ``field_name`` when it does not exist or is not
    FSx for Lustre, and the translated AWS error when it cannot be read."""
    from botocore.exceptions import ClientError

    try:
        return read_file_system(factory("fsx"), file_system_id, field_name)
    except ClientError as error:
        raise translate_client_error(error, f"DescribeFileSystems {file_system_id}", field_name) from error


def read_file_system(client: Any, file_system_id: str, field_name: str = "file_system_id") -> FileSystemInfo:
    """`describe_file_system` with a client of FSx, whose errors other than "no such file system" are raised as
    they come (the preflight makes a note of them)."""
    from botocore.exceptions import ClientError, ParamValidationError

    try:
        response = client.describe_file_systems(FileSystemIds=[file_system_id])
    except ParamValidationError as error:
        raise PreflightError(
            Problem(field_name, f"{file_system_id!r} is not an FSx file system id; they look like fs-0123456789abcdef0")
        ) from error
    except ClientError as error:
        if error_code(error) in {"FileSystemNotFound", "ResourceNotFound", "BadRequest"}:
            raise PreflightError(
                Problem(field_name, f"FSx file system {file_system_id} does not exist in this region; check the id and "
                                    "the region")
            ) from error
        raise
    records = response.get("FileSystems") or []
    if not records:
        raise PreflightError(
            Problem(field_name, f"FSx file system {file_system_id} does not exist in this region; check the id and "
                                "the region")
        )
    info = _info(records[0])
    if info.file_system_type != "LUSTRE":
        raise PreflightError(
            Problem(field_name, f"{file_system_id} is an FSx for {info.file_system_type} file system; SageMaker FSx "
                    "channels need FSx for Lustre (or use FileSystemType EFS for EFS)")
        )
    return info


def require_usable(info: FileSystemInfo, field_name: str = "file_system_id") -> None:
    """Raise `PreflightError` unless the file system can be mounted now."""
    if not info.usable:
        raise PreflightError(
            Problem(field_name, f"FSx file system {info.file_system_id} is {info.lifecycle}, not AVAILABLE; wait "
                                "for it "
                    "to become AVAILABLE (or fix its configuration) before staging or training")
        )


def _same_prefix(left: str, right: str) -> bool:
    return left.rstrip("/") == right.rstrip("/")


def find_association(factory: ClientFactory, file_system_id: str, s3_uri: str) -> dict[str, Any] | None:
    """The data repository association of the file system whose S3 side is ``s3_uri``, or None."""
    client = factory("fsx")
    token: str | None = None
    while True:
        arguments: dict[str, Any] = {"Filters": [{"Name": "file-system-id", "Values": [file_system_id]}]}
        if token:
            arguments["NextToken"] = token
        response = client.describe_data_repository_associations(**arguments)
        for association in response.get("Associations", []):
            if _same_prefix(association.get("DataRepositoryPath", ""), s3_uri):
                return association
        token = response.get("NextToken")
        if not token:
            return None


def _wait_association(factory: ClientFactory, association_id: str, *, poll_seconds: float, bound_seconds: float,
                      clock: Callable[[], float], sleep: Callable[[float], None]) -> dict[str, Any]:
    client = factory("fsx")

    def describe() -> dict[str, Any]:
        found = client.describe_data_repository_associations(AssociationIds=[association_id])["Associations"]
        return found[0]

    association = poll(
        describe,
        resource="fsx_association",
        status_of=lambda record: record.get("Lifecycle"),
        bound_seconds=bound_seconds,
        poll_seconds=poll_seconds,
        what=f"data repository association {association_id}",
        clock=clock,
        sleep=sleep,
    )
    if classify("fsx_association", association.get("Lifecycle")) != "success":
        details = (association.get("FailureDetails") or {}).get("Message", "")
        raise JobFailed(
            f"data repository association {association_id} ended {association.get('Lifecycle')}: {details}; check "
            "that the file system's role can read the S3 prefix and that the prefix is in the same region"
        )
    return association


def ensure_association(
    factory: ClientFactory,
    info: FileSystemInfo,
    s3_uri: str,
    file_system_path: str,
    *,
    poll_seconds: float = 15.0,
    bound_seconds: float = 3600.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str | None, bool, str]:
    """Find or create the association linking ``file_system_path`` to ``s3_uri``; wait until it is AVAILABLE.

    Returns ``(association id or None, created, file system path)``. None is returned for file systems linked as a
    whole through an ``ImportPath`` that contains the prefix (the path is then where the prefix appears). Raises
    `PreflightError` when the prefix is linked to another path, or lies outside a whole-file-system link.
    """
    if info.import_path:
        if not s3_uri.rstrip("/").startswith(info.import_path.rstrip("/")):
            raise PreflightError(
                Problem("s3_uri", f"file system {info.file_system_id} is linked as a whole to {info.import_path} and "
                        f"cannot link {s3_uri}; stage under that prefix, or use a PERSISTENT_2 file system")
            )
        remainder = s3_uri.rstrip("/")[len(info.import_path.rstrip("/")) :]
        return None, False, "/" + remainder.strip("/") if remainder.strip("/") else "/"
    existing = find_association(factory, info.file_system_id, s3_uri)
    if existing is not None:
        if existing.get("FileSystemPath", "").rstrip("/") != file_system_path.rstrip("/"):
            raise PreflightError(
                Problem("file_system_path", f"{s3_uri} is already linked to {existing.get('FileSystemPath')} on "
                        f"{info.file_system_id} (association {existing.get('AssociationId')}); use that path, or "
                        "delete the association")
            )
        association = existing
        created = False
        if classify("fsx_association", existing.get("Lifecycle")) == "success":
            return existing["AssociationId"], created, file_system_path
    else:
        from botocore.exceptions import ClientError

        try:
            association = factory("fsx").create_data_repository_association(
                FileSystemId=info.file_system_id,
                FileSystemPath=file_system_path,
                DataRepositoryPath=s3_uri,
                # Metadata is imported by the explicit task below, which reports counts; doing it twice costs time.
                BatchImportMetaDataOnCreate=False,
            )["Association"]
        except ClientError as error:
            raise translate_client_error(error, f"CreateDataRepositoryAssociation {info.file_system_id}",
                                         "s3_uri") from error
        created = True
    association = _wait_association(
        factory, association["AssociationId"], poll_seconds=poll_seconds, bound_seconds=bound_seconds, clock=clock,
        sleep=sleep
    )
    return association["AssociationId"], created, file_system_path


def start_import(factory: ClientFactory, file_system_id: str, paths: list[str], report_uri: str) -> str:
    """Start an ``IMPORT_METADATA_FROM_REPOSITORY`` task for ``paths`` (relative to the file system root); return its
    id. Failed files are listed in a CSV report under ``report_uri``."""
    from botocore.exceptions import ClientError

    arguments: dict[str, Any] = {
        "Type": "IMPORT_METADATA_FROM_REPOSITORY",
        "FileSystemId": file_system_id,
        "Report": {"Enabled": True, "Path": report_uri, "Format": REPORT_FORMAT, "Scope": REPORT_SCOPE},
    }
    if paths:
        arguments["Paths"] = paths
    try:
        response = factory("fsx").create_data_repository_task(**arguments)
    except ClientError as error:
        raise translate_client_error(error, f"CreateDataRepositoryTask {file_system_id}", "paths") from error
    return response["DataRepositoryTask"]["TaskId"]


def wait_task(
    factory: ClientFactory,
    task_id: str,
    *,
    poll_seconds: float = 15.0,
    bound_seconds: float = 6 * 3600.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait for a data repository task to end (states table ``fsx_task``) and return its description."""
    client = factory("fsx")

    def describe() -> dict[str, Any]:
        return client.describe_data_repository_tasks(TaskIds=[task_id])["DataRepositoryTasks"][0]

    return poll(
        describe,
        resource="fsx_task",
        status_of=lambda task: task.get("Lifecycle"),
        bound_seconds=bound_seconds,
        poll_seconds=poll_seconds,
        what=f"FSx import task {task_id}",
        clock=clock,
        sleep=sleep,
    )


def _check_file_system_path(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/"):
        raise PreflightError(
            Problem("file_system_path", f"{path!r} is not an absolute path on the file system; write it like "
                                        "/data/train")
        )
    return "/" + path.strip("/") if path.strip("/") else "/"


@dataclass(frozen=True)
class StagingStart:
    """What `start_stage` set up and started: everything a report names except the import task's outcome (a deferred
    stage keeps it in its handle and makes the report when the task ended: `staging_report`)."""

    file_system_id: str
    mount_name: str
    s3_uri: str
    file_system_path: str
    association_id: str | None
    association_created: bool
    task_id: str
    report_path: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def start_stage(
    factory: ClientFactory,
    *,
    file_system_id: str,
    s3_uri: str,
    file_system_path: str,
    paths: list[str] | None = None,
    report_uri: str | None = None,
    poll_seconds: float = 15.0,
    timeout_seconds: float = 6 * 3600.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> StagingStart:
    """The first half of `stage`: check the file system, find or create the association (waiting for a new one to
    be AVAILABLE: minutes at most), start the import task; return without waiting for it."""
    parse_s3_uri(s3_uri, "s3_uri")
    file_system_path = _check_file_system_path(file_system_path)
    info = describe_file_system(factory, file_system_id)
    require_usable(info)
    if not info.mount_name:
        raise PreflightError(Problem("file_system_id", f"{file_system_id} reports no MountName; is it FSx for Lustre?"))
    association_id, created, file_system_path = ensure_association(
        factory, info, s3_uri, file_system_path, bound_seconds=timeout_seconds, poll_seconds=poll_seconds,
        clock=clock, sleep=sleep,
    )
    report_path = report_uri or join_uri(s3_uri, DEFAULT_REPORT_FOLDER)
    whole = [file_system_path.strip("/")] if file_system_path != "/" else []
    import_paths = list(paths) if paths is not None else whole
    task_id = start_import(factory, file_system_id, import_paths, report_path)
    return StagingStart(file_system_id=file_system_id, mount_name=info.mount_name, s3_uri=s3_uri,
                        file_system_path=file_system_path, association_id=association_id,
                        association_created=created, task_id=task_id, report_path=report_path)


def describe_task(factory: ClientFactory, task_id: str) -> dict[str, Any]:
    """One DescribeDataRepositoryTasks of one task (a deferred stage's look)."""
    from botocore.exceptions import ClientError

    try:
        found = factory("fsx").describe_data_repository_tasks(TaskIds=[task_id])["DataRepositoryTasks"]
    except ClientError as error:
        raise translate_client_error(error, f"DescribeDataRepositoryTasks {task_id}", "task_id") from error
    if not found:
        raise JobFailed(f"FSx task {task_id} does not exist in this region")
    return dict(found[0])


def cancel_task(factory: ClientFactory, task_id: str) -> str:
    """CancelDataRepositoryTask unless the task ended already (then not an error); the lifecycle it was in."""
    return stop_unless_ended(str(describe_task(factory, task_id).get("Lifecycle")), resource="fsx_task",
                             stopping="CANCELING",
                             call=lambda: factory("fsx").cancel_data_repository_task(TaskId=task_id),
                             action=f"CancelDataRepositoryTask {task_id}", field="task_id")


def staging_report(started: StagingStart, task: dict[str, Any]) -> StagingReport:
    """The report of an ended import task. Raises `JobFailed` when the task failed, was cancelled or left files
    not imported (naming the report location)."""
    report = report_of(started, task)
    if classify("fsx_task", report.task_lifecycle) != "success" or report.failed:
        raise JobFailed(task_failure(task, report))
    return report


def report_of(started: StagingStart, task: dict[str, Any]) -> StagingReport:
    """What an import task's description says, as a report (whatever its outcome)."""
    counts = task.get("Status") or {}
    lifecycle = task.get("Lifecycle", "")
    report = StagingReport(
        file_system_id=started.file_system_id,
        mount_name=started.mount_name,
        s3_uri=started.s3_uri,
        file_system_path=started.file_system_path,
        directory_path=f"/{started.mount_name}"
                       f"{'' if started.file_system_path == '/' else started.file_system_path}",
        association_id=started.association_id,
        association_created=started.association_created,
        task_id=started.task_id,
        task_lifecycle=lifecycle,
        total=int(counts.get("TotalCount") or 0),
        succeeded=int(counts.get("SucceededCount") or 0),
        failed=int(counts.get("FailedCount") or 0),
        report_path=(task.get("Report") or {}).get("Path") or started.report_path,
    )
    return report


def task_failure(task: dict[str, Any], report: StagingReport) -> str:
    """Why an import task did not stage everything, with where its list of failed files is."""
    details = (task.get("FailureDetails") or {}).get("Message")
    return (f"FSx import task {report.task_id} on {report.file_system_id} ended {report.task_lifecycle}: "
            f"{report.succeeded} of {report.total} files imported, {report.failed} failed"
            + (f" ({details})" if details else "") + f"; the list of failed files is under {report.report_path}")


def stage(
    factory: ClientFactory,
    *,
    file_system_id: str,
    s3_uri: str,
    file_system_path: str,
    paths: list[str] | None = None,
    report_uri: str | None = None,
    poll_seconds: float = 15.0,
    timeout_seconds: float = 6 * 3600.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> StagingReport:
    """Make the objects under ``s3_uri`` visible on the Lustre file system at ``file_system_path``: `start_stage`,
    the wait for the import task, `staging_report`.

    Args:
        file_system_id: the FSx for Lustre file system (``fs-...``).
        s3_uri: the S3 prefix to import (``s3://bucket/datasets/train``).
        file_system_path: where it appears on the file system (``/datasets/train``).
        paths: file-system paths (relative to the root) to import; default: the whole ``file_system_path``.
        report_uri: where FSx writes the CSV of failed files; default ``<s3_uri>/_trainops_fsx_reports``.
        poll_seconds, timeout_seconds, clock, sleep: the wait (injectable for tests).

    Raises `PreflightError` when the file system is missing, not Lustre, not AVAILABLE or linked elsewhere, and
    `JobFailed` when the import task fails, is cancelled or leaves files not imported (naming the report location).
    """
    started = start_stage(factory, file_system_id=file_system_id, s3_uri=s3_uri, file_system_path=file_system_path,
                          paths=paths, report_uri=report_uri, poll_seconds=poll_seconds,
                          timeout_seconds=timeout_seconds, clock=clock, sleep=sleep)
    task = wait_task(factory, started.task_id, bound_seconds=timeout_seconds, poll_seconds=poll_seconds, clock=clock,
                     sleep=sleep)
    return staging_report(started, task)
