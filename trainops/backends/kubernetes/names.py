"""A TrainJob's name as Kubernetes accepts it.

Trainer names the JobSet, its replicated jobs and their pods after the TrainJob, and the JobSet's headless service
(how the nodes reach node 0) must be a DNS label (RFC 1035: a lower-case letter first, then lower-case letters,
digits and ``-``, not ending in ``-``, at most 63 characters). A name the API server or Trainer's webhook would
refuse is refused here, before anything is made, so a job is never half-created under a name that cannot be.
"""

from __future__ import annotations

import re

from trainops.backends.kit import Problem, SpecError

#: The longest name: a DNS label.
MAX_NAME = 63
_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")


def check_name(name: str, field: str = "job_name") -> str:
    """``name`` when Kubernetes accepts it as a TrainJob's name; else a `SpecError` naming ``field``."""
    if not isinstance(name, str) or not name:
        raise SpecError(Problem(field, "is empty; a TrainJob needs a name"), "kubernetes job")
    if len(name) > MAX_NAME:
        raise SpecError(Problem(field, f"{name!r} is {len(name)} characters; a TrainJob's name is at most "
                                       f"{MAX_NAME} (a DNS label): give a shorter name"), "kubernetes job")
    if not _LABEL.match(name):
        raise SpecError(Problem(field, f"{name!r} is not a DNS label, which Kubernetes requires of a TrainJob's "
                                       "name: lower-case letters, digits and '-', starting with a letter and not "
                                       "ending with '-' (e.g. " f"{suggest(name)!r})"), "kubernetes job")
    return name


def suggest(name: str) -> str:
    """A DNS label close to ``name`` (for the message that refuses it)."""
    text = re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")
    text = re.sub(r"^[^a-z]+", "", text)[:MAX_NAME].rstrip("-")
    return text or "job"
