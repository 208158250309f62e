"""The one Markdown renderer of the reports (`trainops.steps.markdown`): the subset it reads, and nothing of the
input emitted unescaped, whatever the evaluation script wrote."""

from __future__ import annotations

import re

import pytest

from trainops.steps.markdown import render_markdown

DIGITS_REPORT = """# Digits classifier evaluation

- test accuracy: **0.9806** on 360 images
- test loss: 0.0612
- trained for 12 epochs on 4 ranks

![training loss](loss_curve.png)

| digit | accuracy |
| --- | --- |
| 0 | 1.000 |
| 1 | 0.972 |
"""


def test_the_digits_report_renders_as_html():
    html = render_markdown(DIGITS_REPORT, lambda source, alt: f'<img alt="{alt}" src="inlined:{source}">')
    assert "<h1>Digits classifier evaluation</h1>" in html
    assert "<li>test accuracy: <strong>0.9806</strong> on 360 images</li>" in html
    assert '<p><img alt="training loss" src="inlined:loss_curve.png"></p>' in html
    assert ("<table><thead><tr><th>digit</th><th>accuracy</th></tr></thead><tbody><tr><td>0</td><td>1.000</td></tr>"
            "<tr><td>1</td><td>0.972</td></tr></tbody></table>") in html


def test_the_rest_of_the_subset():
    html = render_markdown("## Notes\n\nsome *emphasis*, _this too_, `a < b` and [docs](https://example.com/x?a=1&b=2)"
                           "\nwrapped line\n\n1. one\n2. two\n\n> quoted **bold**\n\n---\n\n```python\nif a < b:\n"
                           "    pass\n```\n")
    assert "<h2>Notes</h2>" in html
    assert ("<p>some <em>emphasis</em>, <em>this too</em>, <code>a &lt; b</code> and "
            '<a href="https://example.com/x?a=1&amp;b=2" rel="noopener noreferrer">docs</a> wrapped line</p>') in html
    assert "<ol><li>one</li><li>two</li></ol>" in html
    assert "<blockquote><p>quoted <strong>bold</strong></p></blockquote>" in html
    assert "<hr>" in html and "<pre><code>if a &lt; b:\n    pass</code></pre>" in html


HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '[click](javascript:alert(1))',
    "[click](JaVaScRiPt:alert(1))",
    '[x](https://a" onmouseover="alert(1))',
    "![x](https://tracker.example/pixel.png)",
    "| <b>h</b> |\n| --- |\n| <i onclick=x>c</i> |",
    "```\n</code></pre><script>x()</script>\n```",
    "# <style>body{display:none}</style>",
    "**" * 5000 + "x" + "**" * 5000,
    "*" * 20000,
    "> " * 200 + "<iframe src=//evil>",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_nothing_of_the_input_passes_unescaped(text):
    html = render_markdown(text)
    # every tag in the output is one the renderer makes, with no attribute but a checked href
    tags = re.findall(r"<(/?)([a-zA-Z0-9]+)([^>]*)>", html)
    made = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "strong", "em", "code", "pre", "blockquote",
            "hr", "table", "thead", "tbody", "tr", "th", "td", "a"}
    for _closing, name, attributes in tags:
        assert name in made, html
        if name == "a":
            assert re.fullmatch(r' href="https?://[^"<>]*" rel="noopener noreferrer"', attributes), html
        else:
            assert attributes == "", html
    assert "javascript:" not in html.lower() or "<a " not in html
    assert "tracker.example" not in html or "<img" not in html  # an image only where the caller inlines it
