"""A small Markdown subset rendered to HTML, every character of the input escaped: the evaluation script's
``report.md`` as the local report, KFP's HTML artifact and Airflow's report page show it.

The report is the output of a user's script, so it is untrusted text: no raw HTML passes through (``<b>`` shows as
``<b>``), a link keeps only an http, https or mailto target, and an image is shown only when the caller's
``image`` function turns its source into a tag (the report inlines a file of the evaluation's own output as a
``data:`` URI; anything else shows its alt text). What it reads: ATX headings, paragraphs, ``-``/``*``/``+`` and
``1.`` lists, fenced code blocks, block quotes, horizontal rules, pipe tables with a separator row, and inline code,
strong, emphasis, links and images. Anything else is shown as the text it is. Written here (about 150 lines) rather
than depending on a Markdown library: the KFP and Airflow images, and `make run`'s venv, carry none.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

Image = Callable[[str, str], "str | None"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}\d{1,9}[.)]\s+(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
_INLINE = re.compile(
    r"(?P<tick>`+)(?P<code>.+?)(?P=tick)"
    r"|!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)(?:\s+\"[^\"]*\")?\)"
    r"|\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)(?:\s+\"[^\"]*\")?\)"
    r"|\*\*(?P<strong>.+?)\*\*|__(?P<strong2>.+?)__"
    r"|\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*|(?<![A-Za-z0-9_])_(?P<em2>[^_\s](?:[^_]*[^_\s])?)_(?![A-Za-z0-9_])")
SAFE_SCHEMES = ("http://", "https://", "mailto:")
#: Inline nesting deeper than this is shown as text (a hostile report cannot recurse without end).
MAX_DEPTH = 8


def _no_image(_source: str, _alt: str) -> str | None:
    return None


def inline(text: str, image: Image = _no_image, depth: int = 0) -> str:
    """One line (or paragraph) of inline Markdown as HTML; every piece of the text escaped."""
    if depth > MAX_DEPTH:
        return html.escape(text)
    out: list[str] = []
    position = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[position:match.start()]))
        position = match.end()
        group = match.lastgroup
        if match.group("code") is not None:
            out.append(f"<code>{html.escape(match.group('code').strip())}</code>")
        elif match.group("src") is not None:
            alt = match.group("alt")
            out.append(image(match.group("src"), alt) or f"<em>[image: {html.escape(alt or match.group('src'))}]</em>")
        elif match.group("href") is not None:
            label = inline(match.group("text"), image, depth + 1)
            href = match.group("href")
            if href.lower().startswith(SAFE_SCHEMES):
                out.append(f'<a href="{html.escape(href, quote=True)}" rel="noopener noreferrer">{label}</a>')
            else:  # a relative or script link leads nowhere from a self-contained page: its text only
                out.append(label)
        elif group in ("strong", "strong2"):
            out.append(f"<strong>{inline(match.group(group), image, depth + 1)}</strong>")
        elif group in ("em", "em2"):
            out.append(f"<em>{inline(match.group(group), image, depth + 1)}</em>")
    out.append(html.escape(text[position:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def _table(lines: list[str], image: Image) -> str:
    header, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    head = "".join(f"<th>{inline(cell, image)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{inline(cell, image)}</td>" for cell in row[:len(header)]) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_markdown(text: str, image: Image = _no_image) -> str:
    """``text`` (the Markdown subset above) as an HTML fragment; nothing of the text is emitted unescaped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    index = 0

    def block_ends(line: str) -> bool:
        return (not line.strip() or bool(_HEADING.match(line) or _FENCE.match(line) or _RULE.match(line))
                or line.lstrip().startswith(">") or bool(_BULLET.match(line) or _NUMBERED.match(line)))

    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker, code = fence.group(1), []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith(marker):
                code.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end of the text)
            out.append(f"<pre><code>{html.escape(chr(10).join(code))}</code></pre>")
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2), image)}</h{level}>")
            index += 1
            continue
        if _RULE.match(line):
            out.append("<hr>")
            index += 1
            continue
        if line.lstrip().startswith(">"):
            quoted = []
            while index < len(lines) and lines[index].lstrip().startswith(">"):
                quoted.append(lines[index].lstrip()[1:].removeprefix(" "))
                index += 1
            out.append(f"<blockquote>{render_markdown(chr(10).join(quoted), image)}</blockquote>")
            continue
        if "|" in line and index + 1 < len(lines) and _TABLE_SEPARATOR.match(lines[index + 1]):
            rows = [line, lines[index + 1]]
            index += 2
            while index < len(lines) and "|" in lines[index] and lines[index].strip():
                rows.append(lines[index])
                index += 1
            out.append(_table(rows, image))
            continue
        for pattern, tag in ((_BULLET, "ul"), (_NUMBERED, "ol")):
            if pattern.match(line):
                items: list[str] = []
                while index < len(lines) and lines[index].strip():
                    item = pattern.match(lines[index])
                    if item:
                        items.append(item.group(1))
                    elif items and lines[index].startswith((" ", "\t")):
                        items[-1] += " " + lines[index].strip()  # a wrapped item goes on
                    else:
                        break
                    index += 1
                out.append(f"<{tag}>" + "".join(f"<li>{inline(item, image)}</li>" for item in items) + f"</{tag}>")
                break
        else:
            paragraph = [line.strip()]
            index += 1
            while index < len(lines) and not block_ends(lines[index]):
                paragraph.append(lines[index].strip())
                index += 1
            out.append(f"<p>{inline(' '.join(paragraph), image)}</p>")
    return "\n".join(out)
