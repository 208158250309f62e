"""The registry and the seam's types: a third party adds a backend through the `trainops.backends` entry-point group
without editing trainops; options a backend does not know are errors naming them; capabilities are declared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from trainops.backends import BUILTIN, backend_class, check_backend_name, get_backend, registered
from trainops.backends.api import Backend, JobHandle, Unsupported
from trainops.backends.options import LocalOptions, SageMakerOptions
from trainops.errors import SpecError

TOY_BACKEND = '''
from dataclasses import dataclass
from typing import ClassVar

from trainops.backends.api import Backend, JobHandle, JobResult
from trainops.backends.options import BackendOptions
from trainops.backends.states import JobStatus

JOBS = {}


@dataclass(frozen=True)
class ToyOptions(BackendOptions):
    backend: ClassVar[str] = "toy"
    colour: str | None = None


class ToyBackend(Backend):
    """A backend of an installed package: jobs complete as soon as they are created, in this process."""

    name = "toy"
    Options = ToyOptions

    def dry_run(self, spec, name, options):
        return {"TrainingJobName": name, "colour": options.colour}

    def create(self, spec, name, options, *, detached, log):
        JOBS[name] = options.colour
        log(f"toy job {name} created")
        return self.handle(name, created=True)

    def status_of(self, name):
        return JobStatus.COMPLETED if name in JOBS else None

    def describe(self, handle):
        return JobResult("toy", handle.job_name, JobStatus.COMPLETED, reattached=not handle.created,
                         details={"colour": JOBS.get(handle.job_name)})

    def wait(self, handle, *, log=None, guards=None):  # a job that completes at once trips no guard
        return self.describe(handle)

    def stop(self, handle, reason="Stopped by the user"):
        return f"{handle.job_name}: already completed"

    def logs(self, handle, *, follow=False):
        return iter([f"[toy] {handle.job_name}"])

    def log_lines(self, handle, cursor=None, *, limit=1000):
        return [], {}

    def render_request(self, spec, job_name, *, launcher=None, region=None):
        return {"TrainingJobName": job_name}
'''


@pytest.fixture
def toy_package(tmp_path):
    """A package on a path, installed the way pip leaves one: a module and a dist-info with its entry point."""
    (tmp_path / "toy_backend.py").write_text(TOY_BACKEND)
    info = tmp_path / "toy_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[trainops.backends]\ntoy = toy_backend:ToyBackend\n"
                                           "local = toy_backend:ToyBackend\n"  # may not take over a built-in
                                           "broken = toy_backend_missing:Nothing\n"
                                           "notabackend = json:dumps\n")
    (tmp_path / "train.py").write_text("print('never run by the toy backend')\n")
    return tmp_path


def _python(code: str, path) -> dict:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=environment, cwd=path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_installed_package_adds_a_backend_that_the_train_step_uses(toy_package):
    found = _python("""
        import json, trainops
        from trainops.backends import registered
        spec = {"entry_point": "train.py", "source_dir": ".", "instance_type": "ml.m5.large"}
        first = trainops.train(spec, backend="toy", job_name="toy-1", colour="blue")
        again = trainops.train(spec, backend="toy", job_name="toy-1")
        try:
            trainops.train(spec, backend="toy", job_name="toy-2", processes_per_host=2)
            refused = None
        except trainops.SpecError as error:
            refused = str(error)
        print(json.dumps({"names": sorted(registered()), "first": first, "again": again, "refused": refused,
                          "local": trainops.get_backend("local").__class__.__name__}))
    """, toy_package)
    assert {"local", "sagemaker", "toy"} <= set(found["names"])
    assert found["first"]["status"] == "Completed" and found["first"]["colour"] == "blue"
    assert found["first"]["reattached"] is False and found["again"]["reattached"] is True  # never duplicated
    assert "processes_per_host" in found["refused"] and "toy backend" in found["refused"]
    assert found["local"] == "LocalBackend"  # an entry point cannot take over a built-in name


def test_a_registered_backend_that_does_not_import_or_is_no_backend_is_a_clear_error(toy_package):
    found = _python("""
        import json
        from trainops.backends import get_backend
        from trainops.errors import SpecError
        said = {}
        for name in ("broken", "notabackend"):
            try:
                get_backend(name)
            except SpecError as error:
                said[name] = str(error)
        print(json.dumps(said))
    """, toy_package)
    assert "cannot be imported" in found["broken"] and "install the package" in found["broken"]
    assert "is not a trainops.backends.api.Backend" in found["notabackend"]


def test_the_built_in_backends_are_registered_by_dotted_path():
    assert set(BUILTIN) <= set(registered())
    assert backend_class("local").__name__ == "LocalBackend"
    with pytest.raises(SpecError) as raised:
        check_backend_name("docker")
    assert raised.value.problems[0].path == "backend" and "local, sagemaker" in str(raised.value)


def test_each_backend_declares_its_options_and_refuses_the_others():
    assert LocalOptions.parse({"processes_per_host": 2, "launcher": None}).processes_per_host == 2
    with pytest.raises(SpecError) as raised:
        SageMakerOptions.parse({"processes_per_host": 2, "channel_overrides": {"train": "/x"}})
    assert [problem.path for problem in raised.value.problems] == ["channel_overrides", "processes_per_host"]
    assert "sagemaker backend" in str(raised.value) and "launcher, preflight" in str(raised.value)
    with pytest.raises(SpecError, match="processes_per_host"):
        LocalOptions(processes_per_host=0)
    with pytest.raises(SpecError, match="launcher"):
        SageMakerOptions(launcher="slurm")
    with pytest.raises(SpecError, match="holds options of the local backend"):
        SageMakerOptions.parse(LocalOptions())
    assert SageMakerOptions.parse({"channel_overrides": {}}) == SageMakerOptions()  # empty: not given


def test_submit_refuses_an_option_of_the_other_backend_before_anything_is_created(tmp_path):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    spec = {"entry_point": "train.py", "source_dir": str(tmp_path), "instance_type": "ml.m5.large",
            "role": "arn:aws:iam::111122223333:role/x", "output_path": "s3://my-bucket/out", "region": "eu-west-1",
            "framework_version": "2.3", "py_version": "py311"}
    from trainops.steps.train import load_spec

    backend = get_backend("sagemaker", region="eu-west-1", client_factory=lambda service: None)
    with pytest.raises(SpecError) as raised:
        backend.submit(load_spec(spec), "job-1", processes_per_host=2)  # no client is ever asked
    assert raised.value.problems[0].path == "processes_per_host"


def test_a_job_kind_a_backend_lacks_is_declared_and_refused_by_name(tmp_path):
    """What a backend does beside training is the job-kind objects it hands out (None: it has none); a front end
    that needs one it lacks is refused, naming the backend and what it can do."""
    from trainops.backends.job_kinds import kinds_of, needed

    local = get_backend("local", workdir=str(tmp_path))
    assert "metrics" not in kinds_of(local)
    with pytest.raises(Unsupported) as raised:
        needed(None, local, "metrics")
    assert "the local backend cannot report a job's metrics (it can: " in str(raised.value)
    assert issubclass(Unsupported, SpecError)
    sagemaker = get_backend("sagemaker", region="eu-west-1", client_factory=lambda service: None)
    assert sagemaker.registry() is not None and sagemaker.registry().browse() is None  # no registry to browse
    with pytest.raises(Unsupported, match="the sagemaker backend cannot browse a model registry"):
        needed(sagemaker.registry().browse(), sagemaker, "browse")
    for backend in (local, sagemaker):
        for kind in ("evaluations", "staging", "registry"):
            assert getattr(backend, kind)() is not None, (backend.name, kind)
    assert Backend.evaluations(local) is None and Backend.staging(local) is None and Backend.registry(local) is None


def test_evaluation_settings_of_another_backend_are_refused(tmp_path):
    local = get_backend("local", workdir=str(tmp_path))
    with pytest.raises(SpecError) as raised:
        local.evaluate(entry_point="e.py", source_dir=tmp_path, model_artifact=tmp_path / "m.tar.gz", channels={},
                       output_dir=tmp_path / "out", role="arn:aws:iam::1:role/x", image_uri=None)
    assert [problem.path for problem in raised.value.problems] == ["role"]


def test_a_handle_carries_a_location_mapping_and_round_trips():
    handle = JobHandle("sagemaker", "job-1", region="eu-west-1", created=False)
    assert handle.location == {"region": "eu-west-1"} and handle.region == "eu-west-1" and handle.workdir is None
    assert JobHandle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle
    other = JobHandle("local", "job-1", location={"workdir": "/w", "namespace": "team-a"})
    assert JobHandle.from_dict(other.to_dict()).location == {"namespace": "team-a", "workdir": "/w"}
