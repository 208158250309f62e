"""FSx for Lustre staging against botocore's Stubber: moto 5.2 implements no data repository associations or tasks
(checked: its FSx backend has file systems and backups only). The Stubber also checks every request against the FSx
API model."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from support.stubbed_aws import FakeClock, StubbedAWS

from trainops.backends.sagemaker import fsx
from trainops.errors import JobFailed, PreflightError

FS = "fs-0123456789abcdef0"
S3 = "s3://trainops-data/datasets/digits"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _file_system(aws, lifecycle="AVAILABLE", import_path=None):
    lustre = {"MountName": "abcdefgh", "DeploymentType": "PERSISTENT_2"}
    if import_path:
        lustre = {"MountName": "abcdefgh", "DeploymentType": "SCRATCH_2",
                  "DataRepositoryConfiguration": {"ImportPath": import_path}}
    aws.stub("fsx").add_response(
        "describe_file_systems",
        {"FileSystems": [{"FileSystemId": FS, "FileSystemType": "LUSTRE", "Lifecycle": lifecycle,
                          "SubnetIds": ["subnet-0123456789abcdef0"], "LustreConfiguration": lustre}]},
        {"FileSystemIds": [FS]},
    )


def _associations(aws, associations):
    aws.stub("fsx").add_response(
        "describe_data_repository_associations",
        {"Associations": associations},
        {"Filters": [{"Name": "file-system-id", "Values": [FS]}]},
    )


def _association(lifecycle, path="/datasets/digits", s3=S3):
    return {"AssociationId": "dra-0123456789abcdef0", "FileSystemId": FS, "Lifecycle": lifecycle,
            "FileSystemPath": path, "DataRepositoryPath": s3}


def _task_created(aws, paths, report):
    expected = {"Type": "IMPORT_METADATA_FROM_REPOSITORY", "FileSystemId": FS,
                "Report": {"Enabled": True, "Path": report, "Format": "REPORT_CSV_20191124", "Scope": "FAILED_FILES_ONLY"}}
    if paths:
        expected["Paths"] = paths
    aws.stub("fsx").add_response(
        "create_data_repository_task",
        {"DataRepositoryTask": {"TaskId": "task-0123456789abcdef0", "Lifecycle": "PENDING",
                                "Type": "IMPORT_METADATA_FROM_REPOSITORY", "CreationTime": NOW, "FileSystemId": FS}},
        expected,
    )


def _task_state(aws, lifecycle, total=0, succeeded=0, failed=0, report=None, failure=None):
    task = {"TaskId": "task-0123456789abcdef0", "Lifecycle": lifecycle, "Type": "IMPORT_METADATA_FROM_REPOSITORY",
            "CreationTime": NOW, "FileSystemId": FS,
            "Status": {"TotalCount": total, "SucceededCount": succeeded, "FailedCount": failed}}
    if report:
        task["Report"] = {"Enabled": True, "Path": report, "Format": "REPORT_CSV_20191124", "Scope": "FAILED_FILES_ONLY"}
    if failure:
        task["FailureDetails"] = {"Message": failure}
    aws.stub("fsx").add_response("describe_data_repository_tasks", {"DataRepositoryTasks": [task]},
                                 {"TaskIds": ["task-0123456789abcdef0"]})


def test_stage_creates_the_association_imports_and_reports_counts():
    aws = StubbedAWS()
    report = f"{S3}/_trainops_fsx_reports"
    _file_system(aws)
    _associations(aws, [])
    aws.stub("fsx").add_response(
        "create_data_repository_association",
        {"Association": _association("CREATING")},
        {"FileSystemId": FS, "FileSystemPath": "/datasets/digits", "DataRepositoryPath": S3,
         "BatchImportMetaDataOnCreate": False},
    )
    for lifecycle in ("CREATING", "AVAILABLE"):
        aws.stub("fsx").add_response(
            "describe_data_repository_associations", {"Associations": [_association(lifecycle)]},
            {"AssociationIds": ["dra-0123456789abcdef0"]},
        )
    _task_created(aws, ["datasets/digits"], report)
    _task_state(aws, "PENDING")
    _task_state(aws, "EXECUTING", total=10, succeeded=4)
    _task_state(aws, "SUCCEEDED", total=10, succeeded=10)
    clock = FakeClock()
    result = fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/datasets/digits", poll_seconds=7,
                       clock=clock, sleep=clock.sleep)
    aws.verify()
    assert result.association_created is True
    assert (result.total, result.succeeded, result.failed) == (10, 10, 0)
    assert result.directory_path == "/abcdefgh/datasets/digits"
    assert result.task_lifecycle == "SUCCEEDED"
    assert clock.sleeps == [7, 7, 7]


def test_an_existing_association_is_reused_and_failed_files_fail_with_the_report_location():
    aws = StubbedAWS()
    report = "s3://trainops-data/datasets/digits/reports"
    _file_system(aws)
    _associations(aws, [_association("AVAILABLE", s3=S3 + "/")])  # a trailing slash is the same prefix
    _task_created(aws, ["datasets/digits"], report)
    _task_state(aws, "SUCCEEDED", total=10, succeeded=8, failed=2, report=report)
    clock = FakeClock()
    with pytest.raises(JobFailed) as raised:
        fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/datasets/digits", report_uri=report,
                  clock=clock, sleep=clock.sleep)
    aws.verify()
    message = str(raised.value)
    assert "8 of 10 files imported, 2 failed" in message
    assert report in message


def test_a_failed_task_names_its_failure_and_report():
    aws = StubbedAWS()
    _file_system(aws)
    _associations(aws, [_association("AVAILABLE")])
    _task_created(aws, ["only/this"], f"{S3}/_trainops_fsx_reports")
    _task_state(aws, "FAILED", failure="access denied to the bucket", report=f"{S3}/_trainops_fsx_reports")
    clock = FakeClock()
    with pytest.raises(JobFailed) as raised:
        fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/datasets/digits", paths=["only/this"],
                  clock=clock, sleep=clock.sleep)
    assert "ended FAILED" in str(raised.value)
    assert "access denied to the bucket" in str(raised.value)


def test_a_file_system_that_is_not_available_stops_before_any_change():
    aws = StubbedAWS()
    _file_system(aws, lifecycle="CREATING")
    with pytest.raises(PreflightError) as raised:
        fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/datasets/digits")
    aws.verify()  # nothing else was called
    assert FS in str(raised.value) and "CREATING" in str(raised.value)


def test_a_prefix_linked_to_another_path_is_refused():
    aws = StubbedAWS()
    _file_system(aws)
    _associations(aws, [_association("AVAILABLE", path="/elsewhere")])
    with pytest.raises(PreflightError) as raised:
        fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/datasets/digits")
    assert "/elsewhere" in str(raised.value)
    assert raised.value.problems[0].path == "file_system_path"


def test_a_whole_file_system_link_needs_no_association():
    aws = StubbedAWS()
    _file_system(aws, import_path="s3://trainops-data/datasets")
    _task_created(aws, ["digits"], f"{S3}/_trainops_fsx_reports")
    _task_state(aws, "SUCCEEDED", total=3, succeeded=3)
    clock = FakeClock()
    result = fsx.stage(aws, file_system_id=FS, s3_uri=S3, file_system_path="/ignored", clock=clock, sleep=clock.sleep)
    aws.verify()
    assert result.association_id is None
    assert result.directory_path == "/abcdefgh/digits"


@pytest.mark.parametrize("path", ["datasets", "/a/../b", ""])
def test_bad_file_system_paths_are_refused(path):
    with pytest.raises(PreflightError) as raised:
        fsx.stage(StubbedAWS(), file_system_id=FS, s3_uri=S3, file_system_path=path)
    assert raised.value.problems[0].path == "file_system_path"


def test_both_backends_stage_returns_the_seams_stage_report(tmp_path):
    """The seam's one report type, `api.StageReport`: the FSx import's and the local copy's, as each backend's
    `stage` returns them; their ``to_dict()`` is what the stage step returns."""
    from trainops.backends import get_backend
    from trainops.backends.api import StageReport

    aws = StubbedAWS()
    _file_system(aws, import_path="s3://trainops-data/datasets")
    _task_created(aws, ["digits"], f"{S3}/_trainops_fsx_reports")
    _task_state(aws, "SUCCEEDED", total=3, succeeded=3)
    remote = get_backend("sagemaker", client_factory=aws).stage(S3, f"fsx://{FS}/ignored", poll_seconds=0.01)
    aws.verify()
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a.bin").write_bytes(b"a")
    local = get_backend("local").stage(str(tmp_path / "source"), str(tmp_path / "staged"))
    assert isinstance(remote, StageReport) and isinstance(local, StageReport)
    assert remote.to_dict()["directory_path"] == "/abcdefgh/digits" and local.to_dict()["files_copied"] == 1
