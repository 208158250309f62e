"""The backend seam: get_backend, the JobStatus table, the one re-attach policy, the job-name rule, and that no
module outside get_backend() compares backend names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainops.backends.api import (
    Backend,
    JobHandle,
    JobResult,
    RegisteredVersion,
    get_backend,
    place_job,
)
from trainops.backends.local.backend import LocalBackend
from trainops.backends.sagemaker.backend import SageMakerBackend
from trainops.backends.states import TABLES, JobStatus
from trainops.errors import JobFailed, SpecError
from trainops.spec.names import check_job_name, valid_job_name

PACKAGE = Path(__file__).resolve().parents[3] / "trainops"


# --- get_backend ----------------------------------------------------------------------------------------------------

def test_get_backend_maps_the_two_names_and_binds_their_context(tmp_path):
    local = get_backend("local", workdir=str(tmp_path), poll_seconds=5)  # poll_seconds: the other backend's, ignored
    assert isinstance(local, LocalBackend) and local.workdir == str(tmp_path)
    remote = get_backend("sagemaker", region="eu-west-1", workdir=str(tmp_path), poll_seconds=0)
    assert isinstance(remote, SageMakerBackend) and remote.region == "eu-west-1" and remote.poll_seconds == 0
    assert isinstance(local, Backend) and isinstance(remote, Backend)


@pytest.mark.parametrize("name", ["Local", "aws", "", "sagemaker ", "../local"])
def test_get_backend_refuses_anything_else_naming_the_field_and_the_choices(name):
    with pytest.raises(SpecError) as raised:
        get_backend(name)
    assert raised.value.problems[0].path == "backend"
    assert "local, sagemaker" in str(raised.value)


def test_get_backend_refuses_an_unknown_setting_by_name():
    with pytest.raises(SpecError) as raised:
        get_backend("local", wrokdir="/tmp")
    assert raised.value.problems[0].path == "wrokdir"


# --- JobStatus ------------------------------------------------------------------------------------------------------

def test_job_status_follows_the_tables():
    assert JobStatus.parse("Completed").outcome == "success"
    for failed in ("Failed", "Stopped", "Deleting"):
        assert JobStatus.parse(failed).outcome == "failure" and JobStatus.parse(failed).terminal
        assert not JobStatus.parse(failed).reattachable
    for running in ("InProgress", "Stopping"):
        assert not JobStatus.parse(running).terminal and JobStatus.parse(running).reattachable
    assert JobStatus.parse(None) is JobStatus.IN_PROGRESS
    assert JobStatus.parse("SomethingNew") is JobStatus.IN_PROGRESS  # unknown: waiting, bounded by the deadline
    assert JobStatus.COMPLETED == "Completed" and json.dumps({"s": JobStatus.FAILED}) == '{"s": "Failed"}'


def test_every_local_and_training_status_has_a_member():
    for resource in ("training_job", "local_job"):
        for status, outcome in TABLES[resource].items():
            assert JobStatus.parse(status, resource).value == status
            assert JobStatus(status).outcome == outcome


def test_a_result_raises_for_failure_with_its_dict_attached():
    result = JobResult("local", "a-1", JobStatus.STOPPED, failure_reason="Stopped: SIGTERM", details={"hosts": []})
    with pytest.raises(JobFailed) as raised:
        result.raise_for_status()
    assert raised.value.result["status"] == "Stopped" and raised.value.result["hosts"] == []
    running = JobResult("sagemaker", "a-1", JobStatus.IN_PROGRESS)
    assert running.raise_for_status() is running
    assert json.loads(json.dumps(running.to_dict()))["status"] == "InProgress"


def test_handles_and_registered_versions_are_small_json():
    handle = JobHandle("local", "job-1", workdir="/tmp/w")
    assert JobHandle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle
    version = RegisteredVersion("local", "g", 1, "Approved", "/m.tar.gz", {"accuracy": 0.9}, "/r/g/1")
    assert json.loads(json.dumps(version.to_dict()))["metrics"] == {"accuracy": 0.9}


# --- the re-attach policy -------------------------------------------------------------------------------------------

def lookup_of(jobs: dict[str, str]):
    return lambda name: JobStatus(jobs[name]) if name in jobs else None


def test_a_new_name_is_created():
    assert place_job("job", "reattach", lookup_of({})) == place_job("job", "new", lookup_of({}))
    assert not place_job("job", "reattach", lookup_of({})).reattach


@pytest.mark.parametrize("status", ["InProgress", "Completed", "Stopping"])
def test_reattach_follows_a_running_or_completed_job(status):
    placement = place_job("job", "reattach", lookup_of({"job": status}))
    assert placement.job_name == "job" and placement.existing == JobStatus(status)


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_a_failed_job_is_retried_under_the_first_free_suffix(status):
    placement = place_job("job", "reattach", lookup_of({"job": status}))
    assert (placement.job_name, placement.reattach) == ("job-2", False)
    # ...and a retry that already ran is followed, not retried again; a failed retry moves on.
    assert place_job("job", "reattach", lookup_of({"job": status, "job-2": "Completed"})).job_name == "job-2"
    assert place_job("job", "reattach", lookup_of({"job": status, "job-2": "Completed"})).reattach
    moved_on = place_job("job", "reattach", lookup_of({"job": status, "job-2": "Failed"}))
    assert (moved_on.job_name, moved_on.reattach) == ("job-3", False)


def test_new_always_creates_and_fail_refuses_a_taken_name():
    assert place_job("job", "new", lookup_of({"job": "Completed", "job-2": "InProgress"})).job_name == "job-3"
    with pytest.raises(SpecError) as raised:
        place_job("job", "fail", lookup_of({"job": "Completed"}))
    assert raised.value.problems[0].path == "job_name" and "Completed" in str(raised.value)
    with pytest.raises(SpecError):
        place_job("job", "sometimes", lookup_of({}))


# --- the job-name rule ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../x", "/etc/passwd", ".", "..", "a;rm -rf /", "job\n", "job\nx", "a/b", "a b",
                                  "", "-a", "a-", "a_b", "x" * 64, "$(id)"])
def test_names_outside_the_sagemaker_pattern_are_refused_naming_the_field(name):
    assert not valid_job_name(name)
    with pytest.raises(SpecError) as raised:
        check_job_name(name, field="--job-name")
    assert raised.value.problems[0].path == "--job-name"
    assert "letters, digits and hyphens" in str(raised.value)


def test_a_path_like_name_is_called_a_path():
    with pytest.raises(SpecError, match="looks like a path"):
        check_job_name("../x")


@pytest.mark.parametrize("name", ["a", "digits-train-2", "a--b", "x" * 63])
def test_valid_names_pass_unchanged(name):
    assert check_job_name(name) == name


def test_a_handle_cannot_carry_a_bad_name_or_backend():
    with pytest.raises(SpecError):
        JobHandle("local", "../../etc")
    with pytest.raises(SpecError):
        JobHandle("docker", "job")


def test_every_local_entry_point_refuses_a_bad_name_before_creating_anything(tmp_path):
    from trainops.steps.train import train

    with pytest.raises(SpecError) as raised:
        train({"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.m5.large"},
              backend="local", job_name="../escape", workdir=str(tmp_path / "work"))
    assert raised.value.problems[0].path == "job_name"
    assert not (tmp_path / "work").exists() and not (tmp_path / "escape").exists()


# --- one place maps backend names -----------------------------------------------------------------------------------

BRANCH = re.compile(r"""(backend|service)\s*[!=]=\s*["'](local|sagemaker)["']|["'](local|sagemaker)["']\s*[!=]=""")


#: Files whose branches have not moved behind the seam yet (each must still hold one: the list only shrinks).
NOT_MOVED_YET: frozenset[str] = frozenset()


def test_no_backend_string_branch_outside_get_backend():
    """A comparison of a backend name with "local" or "sagemaker" anywhere in the package but get_backend() is a
    second seam: every backend-specific choice belongs to the backend objects."""
    found, waiting = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parts[-2] == "runtime" or "runtime" in path.relative_to(PACKAGE).parts:
            continue  # the in-container runtime never sees a backend name
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BRANCH.search(line) and "service ==" not in line:
                relative = path.relative_to(PACKAGE.parent).as_posix()
                if relative in NOT_MOVED_YET:
                    waiting.add(relative)
                else:
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)
    assert waiting == NOT_MOVED_YET, f"no branch left in {sorted(NOT_MOVED_YET - waiting)}: take it off the list"


@pytest.mark.parametrize("command", [["status", "../x"], ["logs", "/etc"], ["stop", ".."],
                                     ["run", "{spec}", "--job-name", "a;rm -rf"]])
def test_the_command_line_refuses_a_bad_job_name_with_exit_2(tmp_path, command):
    import subprocess
    import sys

    spec = tmp_path / "spec.yaml"
    spec.write_text("entry_point: train.py\nsource_dir: .\ninstance_type: ml.m5.large\n")
    (tmp_path / "train.py").write_text("print('never runs')\n")
    arguments = [part.format(spec=spec) for part in command]
    done = subprocess.run([sys.executable, "-m", "trainops.cli", *arguments, "--workdir", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "job_name" in done.stderr and "letters, digits and hyphens" in done.stderr
    assert not (tmp_path / "work").exists()  # nothing created
