"""The reports: self-contained HTML pages, the same wherever they are shown. The evaluation's page is the KFP UI's
(the evaluate component's HTML artifact) and Airflow's (the evaluate task's *Evaluation report* link,
`trainops.operators.reports`); a pipeline run's page (written beside its ``last-run.json``) and a job's page are what
`trainops report NAME` shows.

A page carries the gate's verdict, every metric, the evaluation's plots (the loss curve...) embedded as base64
``data:`` images, and the evaluation script's own report (``report.md`` rendered by `trainops.steps.markdown`, which
escapes every character and inlines only images of the report's own directory; an HTML report in a sandboxed frame),
so it needs nothing beside it: the KFP UI renders an HTML artifact as a single file.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.steps.attempts import cost_line
from trainops.steps.human import duration, rows
from trainops.steps.markdown import render_markdown

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}
#: Larger images are listed, not embedded: the UI loads the whole page at once.
MAX_EMBEDDED_BYTES = 5 * 1024 * 1024

STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:60em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:.3em .8em;text-align:left}.passed{color:#1a7f37}.failed{color:#cf222e}"
         "pre{background:#f6f8fa;padding:1em;white-space:pre-wrap}iframe{width:100%;height:30em;border:1px solid #ccc}"
         "img{max-width:100%}.script-report{border-top:1px solid #ccc;margin-top:1em}.source{color:#666}"
         "blockquote{border-left:3px solid #ccc;margin-left:0;padding-left:1em}")


def image_tag(path: str | Path) -> str:
    """An ``<img>`` with the file inlined as a data URI (or a line naming it when it is too large or unknown)."""
    path = Path(path)
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_file() or path.stat().st_size > MAX_EMBEDDED_BYTES:
        return f"<p>plot not embedded: {html.escape(str(path))}</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.name)}" src="data:{kind};base64,{data}"><figcaption>' \
           f"{html.escape(path.name)}</figcaption></figure>"


def _inline_image(directory: Path, used: set[str], embed: bool = True) -> Callable[[str, str], str | None]:
    """The report's ``![alt](file)``: a file of the report's own directory (links followed only when they stay
    inside it) inlined as a data URI; anything else (a URL, a path outside, a large or unknown file) is not shown."""
    root = directory.resolve()

    def tag(source: str, alt: str) -> str | None:
        if "://" in source or source.startswith(("/", "data:")):
            return None
        path = (root / source).resolve()
        kind = IMAGE_TYPES.get(path.suffix.lower())
        if (not embed or root not in path.parents or kind is None or not path.is_file()
                or path.stat().st_size > MAX_EMBEDDED_BYTES):
            return None
        used.add(str(path))
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img alt="{html.escape(alt, quote=True)}" src="data:{kind};base64,{data}">'

    return tag


def script_report(path: str | None, used: set[str] | None = None, *, embed: bool = True) -> str:
    """The evaluation script's own report: Markdown rendered (`trainops.steps.markdown`: escaped, its images of the
    report's directory inlined, unless not ``embed``, and added to ``used``), HTML inside a sandboxed frame."""
    if not path or not Path(path).is_file():
        return ""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if Path(path).suffix.lower() in (".html", ".htm"):
        # srcdoc + sandbox: the script's page shows as it is but runs no script and cannot restyle this page.
        return f'<h2>{html.escape(Path(path).name)}</h2><iframe sandbox srcdoc="{html.escape(text, quote=True)}">' \
               "</iframe>"

    body = render_markdown(text, _inline_image(Path(path).parent, used if used is not None else set(), embed))
    return f'<section class="script-report"><p class="source">{html.escape(Path(path).name)}</p>{body}</section>'


def evaluation_section(evaluation: dict[str, Any], *, embed: bool = True) -> str:
    """The evaluation's part of a page: the gate's verdict, every metric, the script's report and the plots it did
    not show already (``embed``: images inlined; else named)."""
    passed = bool(evaluation.get("passed"))
    verdict = "passed" if passed else "failed"
    rows = "".join(f"<tr><td>{html.escape(str(name))}</td><td>{value:.6g}</td></tr>"
                   if isinstance(value, (int, float)) else
                   f"<tr><td>{html.escape(str(name))}</td><td>{html.escape(str(value))}</td></tr>"
                   for name, value in sorted((evaluation.get("metrics") or {}).items()))
    gates = "".join(f"<li class=\"{'passed' if gate.get('passed') else 'failed'}\">{html.escape(gate['message'])}</li>"
                    for gate in evaluation.get("gates") or [] if gate.get("message"))
    used: set[str] = set()
    script = script_report(evaluation.get("report"), used, embed=embed)
    plots = "".join(image_tag(path) for path in (evaluation.get("plots") or [] if embed else [])
                    if str(Path(path).resolve()) not in used)
    where = evaluation.get("output_dir") or ""
    return "".join([
        f"<p class=\"{verdict}\"><strong>Quality gate {verdict}</strong></p>",
        f"<ul>{gates}</ul>" if gates else "<p>no gate</p>",
        f"<h2>Metrics</h2><table><tr><th>metric</th><th>value</th></tr>{rows}</table>",
        f"<h2>Plots</h2>{plots}" if plots else "",
        script,
        f"<p>Evaluation output: <code>{html.escape(where)}</code></p>" if where else "",
    ])


def page(title: str, body: str) -> str:
    """A whole page around ``body`` (HTML already escaped by its maker)."""
    return "".join(["<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
                    f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
                    f"<h1>{html.escape(title)}</h1>", body, "</body></html>\n"])


def render_report(evaluation: dict[str, Any], *, title: str, embed: bool = True) -> str:
    """The HTML page for an `EvaluationResult.to_dict()` (``embed``: its images inlined)."""
    return page(title, evaluation_section(evaluation, embed=embed))


def _table(record: dict[str, Any]) -> str:
    return "<table>" + "".join(f"<tr><th>{html.escape(key)}</th><td>{html.escape(value)}</td></tr>"
                               for key, value in rows(record)) + "</table>"


#: What a job's page leaves out of its record: the whole spec and describe history are for `status --json`.
JOB_PAGE_SKIPS = frozenset({"spec", "secondary_status_history", "secondary_statuses"})


def render_job_report(record: dict[str, Any], *, title: str, links: dict[str, str] | None = None) -> str:
    """A training job's page: its status record as a table of human values, and the pages that follow it."""
    shown = {key: value for key, value in record.items() if key not in JOB_PAGE_SKIPS}
    follow = "".join(f'<li><a href="{html.escape(url, quote=True)}" rel="noopener noreferrer">{html.escape(name)}</a>'
                     "</li>" for name, url in sorted((links or {}).items()) if url.startswith("https://"))
    return page(title, _table(shown) + (f"<h2>Follow it</h2><ul>{follow}</ul>" if follow else ""))


def render_pipeline_report(run: dict[str, Any], *, title: str) -> str:
    """A pipeline run's page (its ``last-run.json``): the run, each step, the training job, the evaluation."""
    steps = run.get("steps") or {}

    def took(step: dict[str, Any]) -> str:
        return duration(float(step["seconds"])) if isinstance(step.get("seconds"), (int, float)) else ""

    step_rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{html.escape(str(step.get('status', '')))}</td>"
        f"<td>{html.escape(str(step.get('summary') or step.get('error') or ''))}</td>"
        f"<td>{html.escape(took(step))}</td></tr>" for name, step in steps.items() if isinstance(step, dict))
    overview = {key: run.get(key) for key in ("status", "message", "backend", "started", "ended", "duration_seconds")}
    train: dict[str, Any] = steps["train"] if isinstance(steps.get("train"), dict) else {}
    training = {key: train.get(key) for key in ("job_name", "backend", "status", "model_artifact", "job_dir",
                                                  "duration_seconds", "failure_reason")}

    if isinstance(train.get("cost"), dict):
        training["cost"] = cost_line(train["cost"])
    evaluation = steps.get("evaluate") if isinstance(steps.get("evaluate"), dict) else None
    register = steps.get("register") if isinstance(steps.get("register"), dict) else None
    return page(title, "".join([
        _table(overview),
        "<h2>Steps</h2><table><tr><th>step</th><th>status</th><th>summary</th><th>time</th></tr>"
        f"{step_rows}</table>",
        f"<h2>Training</h2>{_table(training)}" if train else "",
        f"<h2>Evaluation</h2>{evaluation_section(evaluation)}" if evaluation and "metrics" in evaluation else "",
        f"<h2>Registration</h2><p>{html.escape(str(register.get('summary') or ''))}</p>" if register else "",
    ]))


def write_report(path: str, evaluation: dict[str, Any], *, title: str) -> str:
    """Write the page to ``path`` (creating its directory); return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(evaluation, title=title), encoding="utf-8")
    return str(target)
