"""Job names: the one rule every name obeys, wherever it enters (CLI, Python API, Airflow, KFP, pipeline files).

SageMaker's rule (docs/contracts.md section 5) is 1-63 characters matching ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}``,
unique per account and region for ever. The local backend keeps each job in ``<workdir>/jobs/<name>``, so the same
rule is what keeps a name from being a path (``../x``, ``/etc``, ``.``) or from smuggling a command separator or a
line break into logs and status files: one rule, checked by `check_job_name` before anything is created.

Also here: deterministic names (``<base>-<hash>``, so a retried task finds the job its first attempt created) and
timestamped names (the SageMaker Python SDK's style). Standard library only: DAG files import this.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone

from trainops.errors import Problem, SpecError

MAX_LENGTH = 63
# \Z, not $: "$" also matches before a trailing newline, which would let "job\n" through.
_VALID = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")
_INVALID_CHARACTERS = re.compile(r"[^a-zA-Z0-9-]+")
_HYPHEN_RUNS = re.compile(r"-{2,}")
HASH_LENGTH = 10
DEFAULT_BASE = "job"
RULE = "1-63 letters, digits and hyphens, starting and ending with a letter or digit"


def valid_job_name(name: object) -> bool:
    """Whether a name is a valid job name (SageMaker's pattern and length)."""
    return isinstance(name, str) and len(name) <= MAX_LENGTH and _VALID.match(name) is not None


def _why_invalid(name: object) -> str:
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    if not name:
        return "is empty"
    if len(name) > MAX_LENGTH:
        return f"is {len(name)} characters long (at most {MAX_LENGTH})"
    if name in (".", "..") or "/" in name or "\\" in name:
        return "looks like a path; a job name is a plain name, never a directory"
    if any(character in name for character in "\n\r\x00"):
        return "contains a line break or a NUL character"
    if any(character in name for character in ";&|`$<>(){}*?!\"' "):
        return "contains a shell character or a space"
    if name.startswith("-") or name.endswith("-"):
        return "starts or ends with a hyphen"
    return "contains characters other than letters, digits and hyphens"


def check_job_name(name: object, field: str = "job_name", source: str | None = None) -> str:
    """Return ``name`` when it is a valid job name; else raise `SpecError` naming ``field``, what is wrong with it and
    the rule (exit code 2). Call it where a name enters, before anything is created."""
    if valid_job_name(name):
        return name  # type: ignore[return-value]
    raise SpecError(Problem(field, f"{name!r} {_why_invalid(name)}: a job name is {RULE} (e.g. digits-train-1)"),
                    source)


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
