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


def test_the_scripts_report_is_included_markdown_rendered_escaped_html_sandboxed(tmp_path):
    markdown = tmp_path / "report.md"
    markdown.write_text("# Digits\n\n- accuracy **0.98** <tag>\n")
    page = render_report(evaluation(tmp_path, report=str(markdown)), title="t")
    assert "<h1>Digits</h1>" in page and "<li>accuracy <strong>0.98</strong> &lt;tag&gt;</li>" in page
    assert "<tag>" not in page and "# Digits" not in page
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


def test_the_reports_own_plot_is_inlined_where_it_stands_and_not_repeated(tmp_path):
    plot = tmp_path / "loss_curve.png"
    plot.write_bytes(PNG)
    (tmp_path / "report.md").write_text("# Eval\n\n![training loss](loss_curve.png)\n\n![outside](../secret.png)\n"
                                        "![remote](https://example.com/x.png)\n")
    (tmp_path.parent / "secret.png").write_bytes(PNG)
    page = render_report(evaluation(tmp_path, plots=[str(plot)], report=str(tmp_path / "report.md")), title="t")
    [encoded] = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)  # once: in the report, in place
    assert base64.b64decode(encoded) == PNG and '<img alt="training loss"' in page
    assert "<em>[image: outside]</em>" in page and "<em>[image: remote]</em>" in page  # named, never fetched
    assert "<h2>Plots</h2>" not in page  # the only plot is the report's


def test_without_embedding_the_images_are_named_only(tmp_path):
    plot = tmp_path / "loss_curve.png"
    plot.write_bytes(PNG)
    (tmp_path / "report.md").write_text("![training loss](loss_curve.png)\n")
    page = render_report(evaluation(tmp_path, plots=[str(plot)], report=str(tmp_path / "report.md")), title="t",
                         embed=False)
    assert "base64" not in page and "<em>[image: training loss]</em>" in page


def test_a_pipeline_runs_page_has_its_steps_training_and_evaluation(tmp_path):
    from trainops.steps.report import render_pipeline_report

    plot = tmp_path / "loss_curve.png"
    plot.write_bytes(PNG)
    run = {"name": "digits-retrain", "backend": "local", "status": "Succeeded", "message": "", "started": 1796612888.5,
           "ended": 1796612950.0, "duration_seconds": 61.5,
           "steps": {"train": {"status": "Succeeded", "job_name": "digits-1", "backend": "local",
                               "summary": "digits-1 Completed <b>", "seconds": 40.0,
                               "cost": {"total_usd": 0.02, "attempts": 1}},
                     "evaluate": {**evaluation(tmp_path, plots=[str(plot)]), "status": "Succeeded", "seconds": 3.0},
                     "register": {"status": "Succeeded", "summary": "digits version 1 (Approved)"}}}
    page = render_pipeline_report(run, title="Pipeline digits-retrain")
    assert "<h1>Pipeline digits-retrain</h1>" in page and "<td>train</td><td>Succeeded</td>" in page
    assert "digits-1 Completed &lt;b&gt;" in page and "<td>40.0 s</td>" in page
    assert "Quality gate passed" in page and "data:image/png;base64," in page
    assert "digits version 1 (Approved)" in page
    assert "1796612888" not in page  # times as dates


def test_a_jobs_page_is_its_record_in_human_terms_with_https_links_only(tmp_path):
    from trainops.steps.report import render_job_report

    page = render_job_report({"job_name": "j-1", "status": "Completed", "started": 1796612888.5, "hosts": ["a", "b"],
                              "spec": {"environment": {"TOKEN": "x"}}, "duration_seconds": 30.0},
                             title="Training job j-1", links={"job": "https://console.aws.amazon.com/x",
                                                              "bad": "javascript:alert(1)"})
    assert "<th>hosts</th><td>a, b</td>" in page and "<th>duration_seconds</th><td>30.0 s</td>" in page
    assert "1796612888" not in page and "TOKEN" not in page
    assert 'href="https://console.aws.amazon.com/x"' in page and "javascript" not in page
