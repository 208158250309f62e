"""The local backend's dry run is the request its job executes, rendered without writing anything."""

from __future__ import annotations

import os

import pytest

from trainops.backends import get_backend
from trainops.spec.job import JobSpec


def files_under(root):
    return sorted(os.path.relpath(os.path.join(folder, name), root)
                  for folder, _dirs, names in os.walk(root) for name in names) if root.exists() else []


@pytest.mark.parametrize("launcher", ["trainops", "toolkit"])
def test_the_dry_run_is_the_executed_request_and_writes_nothing(tmp_path, launcher):
    code = tmp_path / "code"
    (code / "lib").mkdir(parents=True)
    (code / "train.py").write_text("print('hi')\n")
    dependency = tmp_path / "helpers"
    dependency.mkdir()
    (dependency / "util.py").write_text("X = 1\n")
    spec = JobSpec.model_validate({
        "name": "dry", "entry_point": "train.py", "source_dir": str(code), "dependencies": [str(dependency)],
        "instance_type": "ml.m5.large", "instance_count": 2, "hyperparameters": {"epochs": 2}})
    workdir = tmp_path / "state"
    backend = get_backend("local", workdir=str(workdir))
    request = backend.dry_run(spec, "dry-job", backend.options(launcher=launcher))
    assert files_under(workdir) == []  # nothing laid out

    from trainops.backends.local.job_input import from_spec

    job_dir = workdir / "jobs" / "dry-job"
    executed = from_spec(spec, launcher=launcher).render("dry-job", job_dir)  # what the job renders, laying out
    assert request == executed
    assert request["TrainingJobName"] == "dry-job"
    assert request["ResourceConfig"]["InstanceCount"] == 2
    laid_out = files_under(job_dir)
    assert laid_out and all(not (workdir / "jobs" / "dry-job" / name).is_symlink() for name in laid_out)


def test_the_dry_run_refuses_what_a_local_run_refuses(tmp_path):
    from trainops.errors import SpecError

    spec = JobSpec.model_validate({"entry_point": "train.py", "source_dir": str(tmp_path / "missing"),
                                   "instance_type": "ml.m5.large"})
    backend = get_backend("local", workdir=str(tmp_path / "state"))
    with pytest.raises(SpecError, match="source_dir"):
        backend.dry_run(spec, "dry-job", backend.options())
