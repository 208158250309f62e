"""What both backends write into a job's contract: the hyperparameters the trainops runtime reads.

The encoding is the SageMaker SDK's script-mode one (every value `json.dumps`-ed), so one runtime reads jobs from
either backend, and the toolkit launcher reads the same values (docs/contracts.md, section 2).
"""

from __future__ import annotations

import json
from typing import Any

from trainops.runtime.hyperparameters import COMMAND_KEY
from trainops.spec.job import JobSpec


def encode_hyperparameters(values: dict[str, Any]) -> dict[str, str]:
    """The SDK's script-mode encoding: every value `json.dumps`-ed (strings gain quotes, booleans become true)."""
    return {str(key): json.dumps(value) for key, value in values.items()}


def runtime_hyperparameters(spec: JobSpec, job_name: str, region: str | None) -> dict[str, Any]:
    """User hyperparameters plus the keys the trainops runtime needs (before encoding)."""
    values = dict(spec.hyperparameters)
    if spec.command is not None:  # SDK v3's SourceCode.command, run by the runtime's shell (runtime.config)
        values[COMMAND_KEY] = spec.command
    else:
        values["sagemaker_program"] = spec.entry_point
    values["sagemaker_job_name"] = job_name
    if region:
        values["sagemaker_region"] = region
    values["trainops_distribution"] = spec.dist.to_canonical()
    return values
