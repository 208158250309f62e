"""Job names moved next to the spec (`trainops.spec.names`); this module re-exports them for existing imports."""

from trainops.spec.names import (  # noqa: F401 - re-exported
    DEFAULT_BASE,
    HASH_LENGTH,
    MAX_LENGTH,
    check_job_name,
    deterministic_job_name,
    sanitize_base,
    stable_hash,
    timestamped_job_name,
    valid_job_name,
    with_suffix,
)
