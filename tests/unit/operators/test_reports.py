"""The evaluate task's report for Airflow's UI: the page kept as an XCom (bounded), the *Evaluation report* link
(empty until there is a page). The API server serving it to a signed-in user, sandboxed, is tested with the real
components in tests/system/test_airflow_scheduler.py."""

from __future__ import annotations

from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

from trainops.operators.links import REPORT_ATTRIBUTE, EvaluationReportLink  # noqa: E402
from trainops.operators.reports import MAX_REPORT_BYTES, report_page, report_path  # noqa: E402


def evaluation(tmp_path, plot_bytes: int) -> dict:
    plot = tmp_path / "loss_curve.png"
    plot.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * plot_bytes)
    return {"passed": True, "metrics": {"accuracy": 0.97}, "gates": [], "plots": [str(plot)], "report": None,
            "output_dir": str(tmp_path)}


def test_the_page_inlines_the_plots_within_its_bound_and_drops_them_beyond(tmp_path):
    small = report_page(evaluation(tmp_path, 1000), "Evaluation of evaluate")
    assert "data:image/png;base64," in small and "Quality gate passed" in small
    large = report_page(evaluation(tmp_path, MAX_REPORT_BYTES), "Evaluation of evaluate")
    assert "data:image/png" not in large and "plots not embedded" in large and "accuracy" in large
    assert len(large.encode()) < MAX_REPORT_BYTES


def test_the_link_points_at_the_api_servers_page_once_there_is_one():
    key = SimpleNamespace(dag_id="retrain pipeline", run_id="manual__2026-01-05T03:00:00+00:00", task_id="evaluate",
                          map_index=-1)
    operator = SimpleNamespace()
    assert EvaluationReportLink().get_link(operator, ti_key=key) == ""  # the evaluation has not ended
    setattr(operator, REPORT_ATTRIBUTE, True)
    link = EvaluationReportLink().get_link(operator, ti_key=key)
    assert link.endswith(report_path(key.dag_id, key.run_id, key.task_id))
    assert link.endswith("/trainops/reports/retrain%20pipeline/manual__2026-01-05T03%3A00%3A00%2B00%3A00/evaluate"
                         "?map_index=-1")


def test_the_scripts_report_md_is_rendered_and_nothing_of_it_passes_raw(tmp_path):
    (tmp_path / "report.md").write_text("# Digits <script>alert(1)</script>\n\n- accuracy **0.98**\n\n"
                                        "<img src=x onerror=alert(1)>\n\n[x](javascript:alert(1))\n")
    page = report_page({**evaluation(tmp_path, 10), "report": str(tmp_path / "report.md")}, "Evaluation of evaluate")
    assert "<h1>Digits &lt;script&gt;alert(1)&lt;/script&gt;</h1>" in page
    assert "<li>accuracy <strong>0.98</strong></li>" in page
    assert "<script" not in page and "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "javascript" not in page  # a link to anything but http(s)/mailto keeps only its text
