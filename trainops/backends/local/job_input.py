"""What a local job executes: always a CreateTrainingJob request, and what its records may show of it.

Two ways in, one way on. A job spec is rendered into the request SageMaker would get, with this machine's paths where
SageMaker has S3 (`from_spec`: the code channel is the source directory, the runtime channel a copy of exactly what
is uploaded to S3, the toolkit's source a sourcedir.tar.gz built the same way); a request recorded from a SageMaker
client is taken as it was sent (`from_request`). `LocalJob` runs the request and never asks which way it came:
rendering happens inside the job's lock, because it lays files out in the job's directory.
"""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.artifacts import default_output_path
from trainops.backends.hostfs.inputs import resolve_code_dir
from trainops.backends.local import container, estimator_options
from trainops.backends.local.secrets import job_secrets, public_spec
from trainops.backends.request import code as uploads
from trainops.backends.request.render import is_s3_source, masked, render_local
from trainops.spec.job import JobSpec


@dataclass(frozen=True)
class JobInput:
    """A local job's input. ``render(job_name, job_dir)`` gives the request and lays out the files it names (the
    code channel with its dependencies, the toolkit's tarball, the runtime channel); ``render(..., lay_out=False)``
    gives the same request and writes nothing (the dry run); ``public(request)`` what the status record shows of it
    (secrets masked); ``secrets`` the values never written as they are. Its checkpoints are keyed by the caller's
    ``checkpoint_key`` or the job's name (`LocalJob._checkpoint_dir`), never by what it was made from."""

    render: Callable[..., dict[str, Any]]
    public: Callable[[dict[str, Any]], dict[str, Any]]
    secrets: list[str]


def from_spec(spec: JobSpec, launcher: str | None = None) -> JobInput:
    """A job spec, rendered with this machine's locations (``launcher``: the spec's unless given)."""
    chosen = launcher or spec.launcher

    def render(job_name: str, job_dir: Path, lay_out: bool = True) -> dict[str, Any]:
        if spec.source_dir is not None and is_s3_source(spec.source_dir):
            code = submit = spec.source_dir  # downloaded as the code channel / by the toolkit, as on SageMaker
        else:
            code_dir = resolve_code_dir(spec)
            assert code_dir is not None  # None only for an s3:// source, handled above
            code = submit = str(code_dir)
            if chosen == "toolkit":
                tarball = job_dir / "source" / uploads.SOURCE_TARBALL_NAME
                if lay_out:
                    tarball.parent.mkdir(parents=True, exist_ok=True)
                    tarball.write_bytes(uploads.source_tarball_bytes(code_dir, spec.dependencies))
                submit = str(tarball)
            elif lay_out:  # the trainops launcher's code channel, with the spec's dependencies beside the code
                code = submit = str(estimator_options.code_with_dependencies(code_dir, spec.dependencies, job_dir,
                                                                             spec.ignore_patterns))
            elif spec.dependencies or spec.ignore_patterns is not None:
                code = submit = str(estimator_options.code_with_dependencies_path(job_dir))
        runtime = job_dir / "runtime"
        if lay_out:
            if runtime.exists():
                shutil.rmtree(runtime)
            for path, name in uploads.runtime_files():
                (runtime / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, runtime / name)
        output_path = spec.output_path or default_output_path(job_dir)
        return render_local(spec, job_name=job_name, launcher=chosen, code=code, runtime=str(runtime),
                            submit=submit, output_path=output_path, known_instance_types=True)

    return JobInput(render=render, public=lambda _request: public_spec(spec),
                    secrets=job_secrets(spec, dict(os.environ)))


def from_request(request: dict[str, Any]) -> JobInput:
    """A CreateTrainingJob request as it was sent (its keyword arguments); a copy is run, the caller's is kept."""
    sent = copy.deepcopy(request)
    return JobInput(render=lambda _name, _job_dir, lay_out=True: copy.deepcopy(sent),
                    public=lambda rendered: {"request": masked(rendered)},
                    secrets=container.request_secrets(sent, dict(os.environ)))
