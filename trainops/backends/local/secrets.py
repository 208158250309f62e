"""The secrets of a local job: which `environment` values are masked, and the spec as it may be shown.

A value of the spec's `environment` that is secret by the rule of `trainops.spec.secrets` (HF_TOKEN, DB_PASSWORD,
OPENAI_KEY, a URL with credentials) reaches the training script unchanged, but never the logs, the status record, the
failure file or a step's result: the launchers get `TRAINOPS_MASK_VARIABLES` naming those variables (the runtime's
output relay and failure file mask their values, `trainops.runtime.output_relay`), and what the backend itself
writes or returns is masked here.
"""

from __future__ import annotations

from trainops.runtime.output_relay import MASK, MASK_VARIABLES, mask, secret_values
from trainops.spec.job import JobSpec
from trainops.spec.secrets import public_spec

__all__ = ["MASK", "mask", "mask_variables", "job_secrets", "public_spec"]


def mask_variables(spec: JobSpec, inherited: str | None = None) -> str:
    """The `TRAINOPS_MASK_VARIABLES` value for the job's launchers: its secret names plus any already set."""
    given = {name.strip() for name in (inherited or "").split(",") if name.strip()}
    names = set(spec.secret_environment_names()) | given
    return ",".join(sorted(names))


def job_secrets(spec: JobSpec, environ: dict[str, str] | None = None) -> list[str]:
    """The values to mask in what the backend writes: the spec's secret values and the inherited ones."""
    environ = dict(environ or {})
    combined = {**environ, **spec.environment}
    combined[MASK_VARIABLES] = mask_variables(spec, environ.get(MASK_VARIABLES))
    return secret_values(combined)
