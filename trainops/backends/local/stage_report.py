"""What a stage reports (`StageReport`) and how it shows progress on a terminal (`Progress`)."""

from __future__ import annotations

import time
from typing import Any, TextIO

from trainops.backends.local.stage_names import printable_name
from trainops.backends.local.stage_sources import Refusal
from trainops.errors import JobFailed

#: The most entries of each list (refused, failed, stale, deleted) that `StageReport.to_dict` carries; XCom values
#: and KFP outputs must stay small even when a hostile bucket holds a million bad keys. The counts are always exact.
LISTED_LIMIT = 100


class StageReport:
    """What a stage did. `to_dict` is JSON-able (an Airflow XCom value, a KFP output)."""

    def __init__(self, source: str, destination: str, files_found: int = 0, files_copied: int = 0,
                 bytes_copied: int = 0, files_skipped: int = 0, bytes_skipped: int = 0, seconds: float = 0.0,
                 refused: list[Refusal] | None = None, failed: list[Refusal] | None = None,
                 stale: list[str] | None = None, deleted: list[str] | None = None, notes: list[str] | None = None):
        self.source = source
        self.destination = destination
        self.files_found = files_found
        self.files_copied = files_copied
        self.bytes_copied = bytes_copied
        self.files_skipped = files_skipped
        self.bytes_skipped = bytes_skipped
        self.seconds = seconds
        self.refused: list[Refusal] = refused if refused is not None else []
        self.failed: list[Refusal] = failed if failed is not None else []  # the reason is the error
        self.stale: list[str] = stale if stale is not None else []  # staged earlier, gone from the source, left
        self.deleted: list[str] = deleted if deleted is not None else []  # ... removed (delete=True)
        self.notes: list[str] = notes if notes is not None else []

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"StageReport({fields})"

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other) if isinstance(other, StageReport) else NotImplemented

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

        def problems(items: list[Refusal]) -> list[dict[str, str]]:
            return [{"name": printable_name(item.name), "reason": item.reason} for item in items[:LISTED_LIMIT]]

        return {
            "source": self.source,
            "destination": self.destination,
            "ok": self.ok,
            "files_found": self.files_found,
            "files_copied": self.files_copied,
            "bytes_copied": self.bytes_copied,
            "files_skipped": self.files_skipped,
            "bytes_skipped": self.bytes_skipped,
            "seconds": round(self.seconds, 3),
            "megabytes_per_second": round(self.megabytes_per_second, 1),
            "refused_count": len(self.refused),
            "refused": problems(self.refused),
            "failed_count": len(self.failed),
            "failed": problems(self.failed),
            "stale_count": len(self.stale),
            "stale": [printable_name(name) for name in self.stale[:LISTED_LIMIT]],
            "deleted_count": len(self.deleted),
            "deleted": [printable_name(name) for name in self.deleted[:LISTED_LIMIT]],
            "notes": list(self.notes),
            "summary": self.summary(),
        }

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
        self.total_files, self.total_bytes = total_files, total_bytes
        self.stream, self.enabled = stream, enabled and total_files > 0
        self.files = self.bytes = 0
        self.started = time.monotonic()
        self.drawn = 0.0

    def advance(self, size: int) -> None:
        """One more file done (copied or failed); redraw when a tenth of a second has passed, or at the end."""
        self.files += 1
        self.bytes += size
        now = time.monotonic()
        if self.enabled and (now - self.drawn >= 0.1 or self.files == self.total_files):
            self.drawn = now
            fraction = self.bytes / self.total_bytes if self.total_bytes else self.files / self.total_files
            bar = "#" * int(fraction * 30)
            rate = self.bytes / 1e6 / max(now - self.started, 1e-9)
            self.stream.write(f"\r[{bar:<30}] {self.files}/{self.total_files} files "
                              f"{self.bytes / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB {rate:.1f} MB/s")
            self.stream.flush()

    def close(self) -> None:
        """End the line the bar was drawn on."""
        if self.enabled and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
