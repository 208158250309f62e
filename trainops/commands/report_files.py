"""Where `trainops report` and `trainops run` write a job's or a pipeline run's HTML page (`trainops.steps.report`):
a pipeline run's beside its ``last-run.json``, a training job's under ``reports/`` in trainops' state directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainops.backends.hostfs.safe_fs import open_destination, write_file_at
from trainops.errors import Problem, SpecError
from trainops.home import trainops_home
from trainops.steps.attempts import attempts_report, cost_line
from trainops.steps.pipeline import REPORT_FILE, pipeline_page
from trainops.steps.report import render_job_report

#: A pipeline's record larger than this was not written by trainops.
MAX_RECORD_BYTES = 64 * 1024 * 1024


def _read_record(path: str) -> dict[str, Any]:
    """A pipeline run's ``last-run.json``, read bounded; `SpecError` when it is not there or not a record."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError(f"larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB")
        record = json.loads(data)
        if not isinstance(record, dict) or not isinstance(record.get("steps", {}), dict):
            raise ValueError("not a pipeline run's record")
        return record
    except (OSError, ValueError) as error:
        raise SpecError(Problem("name", f"the pipeline's record {path} cannot be read ({error}): run the pipeline "
                                        "again")) from None


def pipeline_report(record_path: str) -> str:
    """Write the page of the pipeline run recorded at ``record_path`` beside it (from the record, so it is current
    whatever wrote the record) and return its path."""
    record = _read_record(record_path)
    directory = open_destination(Path(record_path).parent, create=False)
    try:
        write_file_at(directory, REPORT_FILE, pipeline_page(record).encode("utf-8"), 0o644)
    finally:
        os.close(directory)
    return str(Path(record_path).parent / REPORT_FILE)


def job_report(backend: Any, handle: Any, record: dict[str, Any] | None = None) -> str:
    """Write the page of a training job (its status record, attempts and cost) under ``reports/`` in trainops' state
    directory and return its path."""
    if record is None:
        record = backend.status_record(handle)
        record.update(attempts_report(backend, handle.job_name, record))
    shown = dict(record)
    if isinstance(shown.get("cost"), dict):
        shown["cost"] = cost_line(shown["cost"])
    try:
        links = backend.links("training", handle.job_name, handle.location)
    except Exception:  # noqa: BLE001 - links are a convenience of the page
        links = {}
    page = render_job_report(shown, title=f"Training job {handle.job_name} ({handle.backend})", links=links)
    directory = open_destination(trainops_home(), ["reports"])
    try:
        write_file_at(directory, f"{handle.job_name}.html", page.encode("utf-8"), 0o644)
    finally:
        os.close(directory)
    return str(trainops_home() / "reports" / f"{handle.job_name}.html")
