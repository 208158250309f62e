"""The evaluation report: one self-contained HTML page, shown by the KFP UI (the evaluate component's HTML artifact)
and by Airflow's (the evaluate task's *Evaluation report* link, `trainops.operators.reports`).

The page carries the gate's verdict, every metric, the evaluation's plots (the loss curve...) embedded as base64
``data:`` images, and the evaluation script's own report (``report.md`` as text, an HTML report in a sandboxed
frame), so it needs nothing beside it: the KFP UI renders an HTML artifact as a single file.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}
#: Larger images are listed, not embedded: the UI loads the whole page at once.
MAX_EMBEDDED_BYTES = 5 * 1024 * 1024

STYLE = ("body{font-family:sans-serif;margin:1.5em;max-width:60em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:.3em .8em;text-align:left}.passed{color:#1a7f37}.failed{color:#cf222e}"
         "pre{background:#f6f8fa;padding:1em;white-space:pre-wrap}iframe{width:100%;height:30em;border:1px solid #ccc}")


def image_tag(path: str | Path) -> str:
    """An ``<img>`` with the file inlined as a data URI (or a line naming it when it is too large or unknown)."""
    path = Path(path)
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_file() or path.stat().st_size > MAX_EMBEDDED_BYTES:
        return f"<p>plot not embedded: {html.escape(str(path))}</p>"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(path.name)}" src="data:{kind};base64,{data}"><figcaption>' \
           f"{html.escape(path.name)}</figcaption></figure>"


def script_report(path: str | None) -> str:
    """The evaluation script's own report: Markdown as preformatted text, HTML inside a sandboxed frame."""
    if not path or not Path(path).is_file():
        return ""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if Path(path).suffix.lower() in (".html", ".htm"):
        # srcdoc + sandbox: the script's page shows as it is but runs no script and cannot restyle this page.
        return f'<h2>{html.escape(Path(path).name)}</h2><iframe sandbox srcdoc="{html.escape(text, quote=True)}">' \
               "</iframe>"
    return f"<h2>{html.escape(Path(path).name)}</h2><pre>{html.escape(text)}</pre>"


def render_report(evaluation: dict[str, Any], *, title: str) -> str:
    """The HTML page for an `EvaluationResult.to_dict()`."""
    passed = bool(evaluation.get("passed"))
    verdict = "passed" if passed else "failed"
    rows = "".join(f"<tr><td>{html.escape(str(name))}</td><td>{value:.6g}</td></tr>"
                   if isinstance(value, (int, float)) else
                   f"<tr><td>{html.escape(str(name))}</td><td>{html.escape(str(value))}</td></tr>"
                   for name, value in sorted((evaluation.get("metrics") or {}).items()))
    gates = "".join(f"<li class=\"{'passed' if gate.get('passed') else 'failed'}\">{html.escape(gate['message'])}</li>"
                    for gate in evaluation.get("gates") or [] if gate.get("message"))
    plots = "".join(image_tag(path) for path in evaluation.get("plots") or [])
    where = evaluation.get("output_dir") or ""
    return "".join([
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">",
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p class=\"{verdict}\"><strong>Quality gate {verdict}</strong></p>",
        f"<ul>{gates}</ul>" if gates else "<p>no gate</p>",
        f"<h2>Metrics</h2><table><tr><th>metric</th><th>value</th></tr>{rows}</table>",
        f"<h2>Plots</h2>{plots}" if plots else "",
        script_report(evaluation.get("report")),
        f"<p>Evaluation output: <code>{html.escape(where)}</code></p>" if where else "",
        "</body></html>\n",
    ])


def write_report(path: str, evaluation: dict[str, Any], *, title: str) -> str:
    """Write the page to ``path`` (creating its directory); return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report(evaluation, title=title), encoding="utf-8")
    return str(target)
