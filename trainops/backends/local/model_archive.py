"""Extracting a ``model.tar.gz`` without trusting it, for the local backend's evaluation.

The extraction itself is `trainops.backends.model_extract` (no link is ever followed or extracted, sizes are
checked against ``TRAINOPS_MAX_MODEL_BYTES`` and the free space before anything is written; its docstring has the
rules). That module is self-contained because the SageMaker evaluation bootstrap runs the same text in the
processing job; here its errors become trainops' own: `SpecError` (field ``model_artifact``, or the limit's
variable) for an archive that is refused, `JobFailed` when the disk has no room.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainops.backends.model_extract import LIMIT_VARIABLE, ArchiveRefused, NoRoom, extract
from trainops.errors import JobFailed, Problem, SpecError

__all__ = ["LIMIT_VARIABLE", "extract_model"]


def extract_model(archive: str | os.PathLike[str], destination: str | os.PathLike[str]) -> Path:
    """Extract a ``model.tar.gz`` into ``destination`` (created), following no link; return the directory.

    Raises `SpecError` (field ``model_artifact``) for a file that is not a tar archive, a member that is a link,
    a device, absolute or has ``..``, or an archive larger than the limit (field ``TRAINOPS_MAX_MODEL_BYTES`` when
    that variable is not a number); `JobFailed` when the disk has no room. Nothing is left behind when it raises.
    """
    try:
        return extract(archive, destination,
                       room_hint="free some space (or point the scratch directory elsewhere) and try again")
    except ArchiveRefused as error:
        raise SpecError(Problem(error.field, str(error)), source="evaluation") from error
    except NoRoom as error:
        raise JobFailed(str(error)) from error
