"""The evaluation report page: self-contained (plots inlined), escaped, with the script's own report."""

from __future__ import annotations

import base64
import re

from trainops.steps.report import MAX_EMBEDDED_BYTES, render_report, write_report

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
                       "RU5ErkJggg==")


def evaluation(tmp_path, **fields):
    data = {"passed": True, "metrics": {"accuracy": 0.9812345, "loss": 0.04}, "message": "gate passed: ok",
            "gates": [{"passed": True, "message": "gate passed: accuracy = 0.98 >= 0.95"}],
            "plots": [], "report": None, "output_dir": str(tmp_path)}
    data.update(fields)
    return data


def test_the_loss_curve_is_embedded_as_base64_and_decodes_to_the_file(tmp_path):
    plot = tmp_path / "loss_curve.png"
    plot.write_bytes(PNG)
    page = render_report(evaluation(tmp_path, plots=[str(plot)]), title="Evaluation of job-1")
    [encoded] = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert base64.b64decode(encoded) == PNG
    assert "<td>accuracy</td><td>0.981235</td>" in page and "Quality gate passed" in page


def test_a_failed_gate_shows_and_user_text_is_escaped(tmp_path):
    page = render_report(evaluation(tmp_path, passed=False, metrics={"<b>odd</b>": 1.0},
                                    gates=[{"passed": False, "message": "gate failed: x = 1 is not > 2 <script>"}]),
                         title="t")
    assert 'class="failed"' in page and "Quality gate failed" in page
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;odd&lt;/b&gt;" in page


def test_the_scripts_report_is_included_markdown_as_text_html_sandboxed(tmp_path):
    markdown = tmp_path / "report.md"
    markdown.write_text("# Digits\n\n- accuracy **0.98** <tag>\n")
    page = render_report(evaluation(tmp_path, report=str(markdown)), title="t")
    assert "<pre># Digits" in page and "&lt;tag&gt;" in page
    html_report = tmp_path / "report.html"
    html_report.write_text('<h1 onclick="x()">Hi</h1>')
    page = render_report(evaluation(tmp_path, report=str(html_report)), title="t")
    assert '<iframe sandbox srcdoc="&lt;h1 onclick=&quot;x()&quot;&gt;Hi&lt;/h1&gt;">' in page


def test_images_too_large_or_missing_are_named_not_embedded(tmp_path):
    large = tmp_path / "huge.png"
    large.write_bytes(b"\0" * (MAX_EMBEDDED_BYTES + 1))
    page = render_report(evaluation(tmp_path, plots=[str(large), str(tmp_path / "gone.png")]), title="t")
    assert "base64" not in page
    assert "plot not embedded" in page and "huge.png" in page and "gone.png" in page


def test_write_report_creates_the_directory(tmp_path):
    target = tmp_path / "kfp" / "evaluate" / "report"
    assert write_report(str(target), evaluation(tmp_path), title="t") == str(target)
    assert target.read_text().startswith("<!DOCTYPE html>")
