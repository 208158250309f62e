"""Configurations that work but are deprecated: `trainops validate` names them in one warning line (exit 0), so a
user learns it before paying for the job.

- SMP v1 (the model parallelism library launched by mpirun): AWS maintains SMP v2 (torch_distributed) only.
- An AWS framework image more than two years old: its framework release (the minor line's month, from the
  `framework_releases` table of image_tables.json) is more than two years before today.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from trainops.spec.images import _tables

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

MAX_IMAGE_AGE_MONTHS = 24


def _release_month(framework: str, version: str) -> tuple[int, int] | None:
    releases = _tables().get("framework_releases", {}).get(framework, {})
    minor = ".".join(str(version).split(".")[:2])
    month = releases.get(minor)
    if month is None:
        return None
    year, number = month.split("-")
    return int(year), int(number)


def deprecation_warnings(spec: JobSpec, today: date | None = None) -> list[str]:
    """The deprecation notes for a valid spec (empty when there are none)."""
    today = today or date.today()
    notes = []
    if spec.dist.type == "smp" and getattr(spec.dist, "version", 2) == 1:
        notes.append("SMP v1 (smdistributed.modelparallel with mpi) is deprecated: AWS maintains SMP v2, launched with "
                     "torch_distributed on PyTorch >= 2.0")
    if spec.framework_version and not spec.image_uri:
        released = _release_month(spec.framework, spec.framework_version)
        if released is not None:
            months = (today.year - released[0]) * 12 + today.month - released[1]
            if months > MAX_IMAGE_AGE_MONTHS:
                title = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}.get(spec.framework, spec.framework)
                notes.append(f"the {title} {spec.framework_version} image is more than two years old (released "
                             f"{released[0]}-{released[1]:02d}); AWS no longer patches it: pick a current "
                             "framework_version")
    return notes
