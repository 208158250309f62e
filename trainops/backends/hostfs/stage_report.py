"""What a stage reports (`StageReport`) and how it shows progress on a terminal (`Progress`)."""

from __future__ import annotations

import time
from typing import Any, TextIO

from trainops.backends import api
from trainops.backends.hostfs.stage_names import printable_name
from trainops.backends.hostfs.stage_sources import Refusal
from trainops.errors import JobFailed

#: The most entries of each list (refused, failed, stale, deleted) that `StageReport.to_dict` carries; XCom values
#: and KFP outputs must stay small even when a hostile bucket holds a million bad keys. The counts are always exact.
LISTED_LIMIT = 100


class StageReport(api.StageReport):
    """What a local stage did (the seam's report type). `to_dict` is JSON-able (an Airflow XCom value, a KFP
    output)."""

    def __init__(self, source: str, destination: str):
        self.source, self.destination = source, destination
        self.files_found = self.files_copied = self.bytes_copied = self.files_skipped = self.bytes_skipped = 0
        self.seconds = 0.0
        self.refused: list[Refusal] = []
        self.failed: list[Refusal] = []  # the reason is the error
        self.stale: list[str] = []  # staged earlier, gone from the source, left in place
        self.deleted: list[str] = []  # ... removed (delete=True)
        self.changed: list[str] = []  # changed at the source while staged: looked up and copied again
        self.vanished: list[str] = []  # listed, then deleted at the source before it was copied: not staged
        self.notes: list[str] = []

    def __repr__(self) -> str:
        return f"StageReport({', '.join(f'{name}={value!r}' for name, value in vars(self).items())})"

    @property
    def ok(self) -> bool:
        """True when nothing was refused and nothing failed."""
        return not self.refused and not self.failed

    @property
    def megabytes_per_second(self) -> float:
        """Copy throughput in MB/s (10^6 bytes), over the whole run."""
        return self.bytes_copied / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; lists are cut at `LISTED_LIMIT` entries (the ``*_count`` fields stay exact)."""
        document: dict[str, Any] = {name: getattr(self, name) for name in (
            "source", "destination", "ok", "files_found", "files_copied", "bytes_copied", "files_skipped",
            "bytes_skipped")}
        document.update(seconds=round(self.seconds, 3), megabytes_per_second=round(self.megabytes_per_second, 1))
        for name in ("refused", "failed", "stale", "deleted", "changed", "vanished"):
            items = getattr(self, name)
            document[f"{name}_count"] = len(items)
            document[name] = [{"name": printable_name(item.name), "reason": item.reason} if isinstance(item, Refusal)
                              else printable_name(item) for item in items[:LISTED_LIMIT]]
        document.update(notes=list(self.notes), summary=self.summary())
        return document

    def summary(self) -> str:
        """One line: files copied, bytes, skipped, refused, failed, seconds, MB/s."""
        line = (f"staged {self.source} -> {self.destination}: {self.files_copied} files copied "
                f"({self.bytes_copied / 1e6:.1f} MB), {self.files_skipped} unchanged skipped, "
                f"{len(self.refused)} refused, {len(self.failed)} failed in {self.seconds:.2f} s "
                f"({self.megabytes_per_second:.1f} MB/s)")
        if self.stale:
            line += f"; {len(self.stale)} files gone from the source were left in place (--delete removes them)"
        if self.deleted:
            line += f"; {len(self.deleted)} files gone from the source were deleted"
        if self.changed:
            line += f"; {len(self.changed)} changed at the source while staged and were copied again"
        if self.vanished:
            line += (f"; {len(self.vanished)} vanished from the source while staged (deleted after the listing: "
                     f"{', '.join(printable_name(name) for name in self.vanished[:5])}"
                     f"{' ...' if len(self.vanished) > 5 else ''})")
        return line

    def problem_lines(self) -> list[str]:
        """One line per refused or failed file, names escaped so they print on one line."""
        return ([f"refused {printable_name(item.name)}: {item.reason}" for item in self.refused]
                + [f"failed {printable_name(item.name)}: {item.reason}" for item in self.failed])

    def raise_for_problems(self) -> None:
        """Raise `JobFailed` (listing the first problems) when anything was refused or failed."""
        if self.ok:
            return
        lines = self.problem_lines()
        shown = "\n".join(f"  - {line}" for line in lines[:20])
        more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
        raise JobFailed(f"{self.summary()}\n{shown}{more}")


class Progress:
    """A one-line progress bar on a terminal (redrawn at most ten times a second); silent when disabled."""

    def __init__(self, total_files: int, total_bytes: int, stream: TextIO, enabled: bool):
        self.total_files, self.total_bytes, self.stream, self.enabled = total_files, total_bytes, stream, enabled
        self.files = self.bytes = 0
        self.started, self.drawn = time.monotonic(), 0.0

    def advance(self, size: int, files: int = 1) -> None:
        """More files done (copied or failed); redraw when a tenth of a second has passed, or at the end."""
        self.files, self.bytes, now = self.files + files, self.bytes + size, time.monotonic()
        if self.enabled and (now - self.drawn >= 0.1 or self.files == self.total_files):
            self.drawn = now
            bar = "#" * int(30 * (self.bytes / self.total_bytes if self.total_bytes else self.files / self.total_files))
            rate = self.bytes / 1e6 / max(now - self.started, 1e-9)
            self.stream.write(f"\r[{bar:<30}] {self.files}/{self.total_files} files {self.bytes / 1e6:.1f}/"
                              f"{self.total_bytes / 1e6:.1f} MB {rate:.1f} MB/s")
            self.stream.flush()

    def close(self) -> None:
        """End the line the bar was drawn on."""
        if self.enabled and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
