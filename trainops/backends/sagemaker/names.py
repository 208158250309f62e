"""SageMaker resource names (training and processing jobs): valid, deterministic, or timestamped.

The rule (docs/contracts.md section 5): 1-63 characters matching ``^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$``, unique per
account and region for ever. Deterministic names (``<base>-<hash>``) let a retried Airflow task or KFP component find
the job its first attempt created instead of starting a duplicate.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone

MAX_LENGTH = 63
_VALID = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_INVALID_CHARACTERS = re.compile(r"[^a-zA-Z0-9-]+")
_HYPHEN_RUNS = re.compile(r"-{2,}")
HASH_LENGTH = 10
DEFAULT_BASE = "job"


def valid_job_name(name: object) -> bool:
    """Whether a name is a valid SageMaker job name (pattern and length)."""
    return isinstance(name, str) and len(name) <= MAX_LENGTH and _VALID.match(name) is not None


def sanitize_base(base: str) -> str:
    """Turn any text into something usable as the start of a job name.

    Characters outside ``[a-zA-Z0-9-]`` become hyphens, runs of hyphens become one, leading and trailing hyphens go;
    an empty result becomes ``"job"``.
    """
    text = _INVALID_CHARACTERS.sub("-", str(base))
    text = _HYPHEN_RUNS.sub("-", text).strip("-")
    return text or DEFAULT_BASE


def with_suffix(base: str, suffix: str) -> str:
    """``<base>-<suffix>``, with the base cut so that the whole is at most 63 characters and still valid."""
    suffix = sanitize_base(suffix)
    room = MAX_LENGTH - len(suffix) - 1
    if room < 1:
        raise ValueError(f"suffix {suffix!r} leaves no room for a base in a {MAX_LENGTH}-character name")
    head = sanitize_base(base)[:room].rstrip("-") or DEFAULT_BASE[:room]
    return f"{head}-{suffix}"


def stable_hash(*parts: object, length: int = HASH_LENGTH) -> str:
    """A short hexadecimal hash of the parts that stays the same across processes and machines."""
    # JSON of the string forms keeps ("a-b", "c") and ("a", "b-c") apart, which plain joining would not.
    encoded = json.dumps([str(part) for part in parts], ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()[:length]


def deterministic_job_name(base: str, *parts: object) -> str:
    """A job name that is the same every time for the same base and parts: ``<sanitized base>-<hash>``.

    The hash covers the base and every part (for example the DAG id, run id and task id, or a spec hash), so two runs
    differ in name exactly when they differ in what makes them unique. The base is cut to fit 63 characters.
    """
    return with_suffix(base, stable_hash(base, *parts))


def timestamped_job_name(base: str, now: datetime | None = None) -> str:
    """``<base>-YYYY-MM-DD-HH-MM-SS-mmm`` in UTC, the SageMaker Python SDK's style, cut to 63 characters."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = moment.strftime("%Y-%m-%d-%H-%M-%S-") + f"{moment.microsecond // 1000:03d}"
    return with_suffix(base, stamp)
