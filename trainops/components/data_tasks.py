"""What the prepare and stage components do inside their containers.

Prepare runs the pipeline file's script (as `trainops run` does: the current Python, no shell, its own process
group, stopped at its timeout). Stage calls the typed stage step and returns a small summary of its report.
"""

from __future__ import annotations

import json
import os
from typing import Any

from trainops.components.paths import backend_options as parse_options
from trainops.components.paths import parse_json, places
from trainops.errors import Problem, SpecError
from trainops.steps.prepare import run_script
from trainops.steps.stage import stage

#: Report keys worth a KFP output (the whole report may list thousands of files).
STAGE_SUMMARY_KEYS = ("files_copied", "files_skipped", "bytes_copied", "copied", "skipped", "refused", "failed",
                      "seconds", "directory_path", "task_id")


def run_prepare(*, script: str, args_json: str, timeout: int, workdir: str, pipeline_dir: str) -> str:
    """Run the prepare script with its arguments (variables substituted); return a one-line summary."""
    where = places(pipeline_dir, workdir)
    arguments = parse_json(args_json, "args_json", list) or []
    path = where.path(script, "script")
    if not os.path.isfile(path):
        raise SpecError(Problem("script", f"{path} does not exist"), source="prepare step")

    expanded = [where.expand(str(item), f"args.{index}") for index, item in enumerate(arguments)]
    print(f"[prepare] {path} {' '.join(map(str, expanded))}", flush=True)
    return run_script(path, expanded, cwd=str(where.pipeline_dir), timeout=timeout)


def stage_summary(report: dict[str, Any]) -> dict[str, Any]:
    """The small part of a stage report: counts and timings (lists become their lengths)."""
    summary = {}
    for key in STAGE_SUMMARY_KEYS:
        if key in report:
            value = report[key]
            summary[key] = len(value) if isinstance(value, (list, tuple)) else value
    return summary


def run_stage(*, source: str, destination: str, backend: str, workdir: str, pipeline_dir: str, s3_prefix: str,
              workers: int, region: str, backend_options: str = "") -> tuple[str, str]:
    """Stage the data with the typed step; return (destination, summary JSON)."""
    where = places(pipeline_dir, workdir)
    options: dict[str, Any] = {"workers": workers or None}  # 0: one per CPU (local) or 8 (S3)
    if s3_prefix:
        options["s3_prefix"] = where.expand(s3_prefix, "s3_prefix")
    if region:
        options["region"] = region  # the backend's: FSx on SageMaker, s3:// sources locally
    target = where.path(destination, "destination")
    report = stage(where.path(source, "source"), target, backend=backend or None,
                   backend_options=parse_options(backend_options), **options)
    summary = stage_summary(report)
    print(f"[stage] {target}: " + ", ".join(f"{key} {value}" for key, value in summary.items()), flush=True)
    return target, json.dumps(summary, sort_keys=True, default=str)
