"""One host's base directory (its /opt/ml): where a backend finds what the container left.

The directory is filled from the job's CreateTrainingJob request by `trainops.backends.hostfs.contract_dir`; this is
only the handle on it that the job, the archives and the failure report read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class HostLayout:
    """One simulated host's base directory (what the container sees as /opt/ml)."""

    name: str
    base_dir: Path
    #: Channels mounted into the container (in its own mount namespace), as (source directory, path under /opt/ml,
    #: read-only): the data is seen where it lies, as an FSx mount is, never copied and, unless the channel's access
    #: mode is rw, never written.
    mounts: tuple[tuple[str, str, bool], ...] = field(default=())

    @property
    def model_dir(self) -> Path:
        return self.base_dir / "model"

    @property
    def output_dir(self) -> Path:
        return self.base_dir / "output"

    @property
    def failure_file(self) -> Path:
        return self.base_dir / "output" / "failure"
