"""Where a job's code and model live in S3 once the SDK estimator options are applied (issue 25).

`render.artifact_locations` is the layout under the output path; `job_locations` moves the code under the spec's
`code_location` (the SDK's ``<code_location>/<job>/source/sourcedir.tar.gz``, and the trainops launcher's code and
runtime beside it) and, with `disable_output_compression`, names the model as the prefix SageMaker writes its files
to. The backend uploads the code to these locations; the rendered request points at the same ones
(`render_options`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from trainops.backends.request.render import ArtifactLocations, artifact_locations

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec


def uncompressed_model_prefix(output_path: str, job_name: str) -> str:
    """Where SageMaker puts the model files with CompressionType NONE: ``<output_path>/<job>/output/model/``."""
    return f"{output_path.rstrip('/')}/{job_name}/output/model/"


def job_locations(spec: JobSpec, job_name: str) -> ArtifactLocations:
    """`artifact_locations` with the code under `code_location` and the uncompressed model's prefix."""
    locations = artifact_locations(spec.output_path or "", job_name)
    if spec.code_location:
        code = artifact_locations(spec.code_location, job_name)
        locations = replace(locations, code_prefix=code.code_prefix, runtime_prefix=code.runtime_prefix,
                            source_tarball=code.source_tarball)
    if spec.disable_output_compression:
        locations = replace(locations, model_artifact=uncompressed_model_prefix(spec.output_path or "", job_name))
    return locations
