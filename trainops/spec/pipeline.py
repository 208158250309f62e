"""The pipeline file: stage -> train -> evaluate (with its gate) -> register, as one typed document.

`trainops run pipeline.yaml` runs it step by step; `trainops kfp compile` turns it into a Kubeflow pipeline and the
Airflow retraining DAG reads it too, so the three share one description. String values may use `${workdir}` (the
pipeline's local state directory) and `${pipeline_dir}` (the file's directory); relative paths resolve against the
file's directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from trainops.errors import Problem, SpecError
from trainops.home import state_root, trainops_home
from trainops.spec.base import JOB_NAME, CoreModel
from trainops.spec.loader import problems_from_validation_error, read_document
from trainops.spec.retries import RetryBudgets


class PrepareStep(CoreModel):
    """A local script that produces the raw data (e.g. export a table, or the digits example's data set)."""

    script: str = Field(description="Python script, relative to the pipeline file.")
    args: list[str] = Field(default_factory=list, description="Arguments of the script (no shell).")
    timeout: int = Field(default=3600, ge=1, le=86400, description="Seconds before it is stopped.")


class StageStep(CoreModel):
    """Copy the data to where training reads it: a local directory (standing for FSx) or FSx for Lustre."""

    source: str = Field(description="Local path, file:// or s3://bucket/prefix.")
    destination: str = Field(description="Local directory, or fsx://fs-.../path with s3_prefix for FSx for Lustre.")
    s3_prefix: str | None = Field(default=None, description="FSx staging: the S3 prefix linked to the file system.")
    workers: int | None = Field(default=None, ge=1, le=256,
                                description="Parallel copies (default: one per CPU for local sources, 8 for S3).")


class TrainStep(CoreModel):
    """The job spec to run, and how its channels map to the staged data on this machine."""

    spec: str | dict[str, Any] = Field(description="Job spec file (relative to the pipeline file) or inline mapping.")
    channels: dict[str, str] = Field(default_factory=dict,
                                     description="Local backend: channel -> local path (e.g. the staged data).")
    processes_per_host: int | None = Field(default=None, ge=1, le=1024)
    job_name: str | None = Field(default=None, description="Default: <spec name>-<hash of the inputs>.")
    retries: dict[str, float] = Field(
        default_factory=lambda: dict[str, float](infrastructure=2, user=0),
        description="Retry budgets per failure class: infrastructure, user, timeout, unknown (attempts), and "
        "backoff_seconds, backoff_factor, max_backoff_seconds. An infrastructure failure (lost host, capacity, spot "
        "interruption, failed health check, NCCL/EFA error) starts a fresh attempt from the last checkpoint; a "
        "user failure stops at once.")

    @field_validator("retries")
    @classmethod
    def _retries(cls, value: dict[str, float]) -> dict[str, float]:
        RetryBudgets.parse(value, "retries")  # a ValueError names the key and the valid ones
        return value

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        if value is not None and not JOB_NAME.match(value):
            raise ValueError(f"{value!r} is not a valid job name (1-63 letters, digits and hyphens)")
        return value


class EvaluateStep(CoreModel):
    """The evaluation script (docs/contracts.md, section 6) and the quality gate the model must pass."""

    entry_point: str
    source_dir: str | None = None
    channels: dict[str, str] = Field(default_factory=dict, description="channel -> data (e.g. test: staged dir).")
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    gate: str | dict[str, Any] | list[str | dict[str, Any]] | None = Field(
        default=None, description='e.g. "accuracy >= 0.95", "loss <= 0.3" or "accuracy > champion".')
    on_gate_failure: Literal["fail", "skip_register"] = Field(
        default="fail", description="fail the pipeline, or stop before register and report success.")
    timeout: int = Field(default=3600, ge=1, le=86400)


class RegisterStep(CoreModel):
    """Where the model goes when it passed the gate."""

    group: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$",
                       description="Model group (SageMaker: model package group).")
    approval: Literal["Approved", "PendingManualApproval", "Rejected"] = "Approved"
    registry_dir: str | None = Field(default=None, description="Local registry directory (default under workdir).")
    description: str | None = Field(default=None, max_length=1024)


class Steps(CoreModel):
    prepare: PrepareStep | None = None
    stage: StageStep | None = None
    train: TrainStep
    evaluate: EvaluateStep | None = None
    # `register` is an attribute of every pydantic model (ABCMeta.register), hence the alias.
    register_step: RegisterStep | None = Field(default=None, alias="register")


class PipelineSpec(CoreModel):
    """A retraining pipeline: optional prepare and stage, train, optional evaluate with a gate, optional register."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
    backend: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,62}$",
                                description="A registered backend (`local`, `sagemaker`, or one an installed "
                                            "package adds) or a named one; checked against the registry when the "
                                            "pipeline is resolved. Default: the registry's default backend.")
    backend_options: dict[str, Any] = Field(
        default_factory=dict,
        description="The backend's settings, one mapping: how it is reached (e.g. region, workdir) and its jobs' "
                    "options (e.g. processes_per_host, preflight); the backend checks them and refuses one it does "
                    "not take. They apply to the file's backend: a run on another (--backend) leaves them out.")
    workdir: str | None = Field(default=None, description="Local state (jobs, checkpoints, registry).")
    region: str | None = None
    steps: Steps



VARIABLE = re.compile(r"\$\{([a-z_]+)\}")


def substitute(value: Any, variables: dict[str, str], path: str = "") -> Any:
    """Replace `${name}` in every string of a document; an unknown name is an error at its field path."""
    if isinstance(value, str):
        def replace(match: re.Match) -> str:
            name = match.group(1)
            if name not in variables:
                raise SpecError(Problem(path, f"unknown variable ${{{name}}}: known are "
                                              + ", ".join(f"${{{known}}}" for known in sorted(variables))))
            return variables[name]

        return VARIABLE.sub(replace, value)
    if isinstance(value, dict):
        return {key: substitute(item, variables, f"{path}.{key}" if path else str(key)) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, variables, f"{path}.{index}") for index, item in enumerate(value)]
    return value


def parse_pipeline(data: Any, source: str, pipeline_dir: Path, workdir_override: str | None = None) -> PipelineSpec:
    """Validate a pipeline document, after substituting `${workdir}` and `${pipeline_dir}`."""
    if not isinstance(data, dict):
        raise SpecError("a pipeline file is a mapping with name and steps", source)
    raw_workdir = workdir_override or data.get("workdir")
    if raw_workdir is not None and not isinstance(raw_workdir, str):
        raise SpecError(Problem("workdir", "must be a path"), source)
    workdir = _absolute(raw_workdir, pipeline_dir) if raw_workdir else None
    variables = {"pipeline_dir": str(pipeline_dir)}
    if workdir:
        variables["workdir"] = str(workdir)
    else:
        variables["workdir"] = str(trainops_home())

    try:
        state_root(variables["workdir"], "workdir")  # a file or /proc refused before any step runs
    except SpecError as error:
        raise SpecError(error.problems, source) from None
    try:
        document = substitute({key: value for key, value in data.items() if key != "workdir"}, variables)
        document["workdir"] = variables["workdir"]
        return PipelineSpec.model_validate(document)
    except SpecError as error:
        raise SpecError(error.problems, source) from None
    except ValidationError as error:
        raise SpecError(problems_from_validation_error(error, PipelineSpec), source) from None


def _absolute(path: str, base: Path) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else (base / candidate).resolve()


def load_pipeline(path: str | Path, workdir_override: str | None = None) -> PipelineSpec:
    """Read and validate a pipeline file."""
    path = Path(path)
    return parse_pipeline(read_document(path), str(path), path.resolve().parent, workdir_override)


def resolve(path: str, pipeline_dir: Path) -> str:
    """A path from the pipeline file, absolute (URIs are left as they are)."""
    if "://" in path:
        return path
    return str(_absolute(path, pipeline_dir))
