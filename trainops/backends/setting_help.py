"""What each setting of a backend means and what applies when it is not given, as torchx's ``runopts`` say it: the
lines of `trainops backends` (the "did you mean" of a setting a backend does not take, and what a user may give as
text at all, live beside the options: `trainops.backends.options.unknown_settings`).

A setting's help and default are declared beside the setting, where a reader of the code looks for them:

- a field of a backend's options type declares them in its metadata (``field(default=None,
  metadata=options.described("...", default="..."))``): a typed field with its help and default, which any kit
  of options can carry;
- otherwise the ``Args:`` entry of the options type's or the backend's docstring is the help (an entry may name
  several settings, ``partition, account: ...``, and may point at the class that holds the settings,
  ```SlurmCluster```), and its ``(default ...)`` clause, else the field's own default, is the default.

Settings that take a Python object (a client factory, a callback) are for code (an operator, a test), never text:
they are not offered to ``-o`` and not listed.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, NamedTuple

from trainops.backends.options import DEFAULT, HELP, kind_of, offered


class SettingHelp(NamedTuple):
    """One setting as `trainops backends` lists it."""

    name: str
    kind: str  # bool, int, float, str, mapping, list, any
    help: str
    default: str  # what applies when the setting is not given, in words


_ENTRY = re.compile(r"^(?P<names>[a-z_][a-z0-9_]*(?:, [a-z_][a-z0-9_]*)*): (?P<text>.*)$")
#: The ways an ``Args:`` entry names its default: a whole parenthetical ``(default: X)`` / ``(None: X)``, a clause
#: ``...; default X`` inside one, or a sentence ``Default: X.``.
_DEFAULTS = (re.compile(r"\s*\((?:default|None):? (?P<value>[^;():]*(?:\([^()]*\)[^;():]*)*)\)"),
             re.compile(r"[;,] (?:default|None):? (?P<value>[^;():]*)"),
             re.compile(r"\s*Default: (?P<value>[^.]*)\."))
_REFERENCE = re.compile(r"`(?P<name>[A-Z][A-Za-z]+)`")


def docstring_args(owner: Any) -> dict[str, str]:
    """The ``Args:`` entries of ``owner``'s docstring, one per name (an entry naming several gives each the text)."""
    import inspect

    lines = inspect.cleandoc(owner.__doc__ or "").splitlines()
    entries: dict[str, str] = {}
    inside, current = False, None
    for line in lines:
        if line.strip() == "Args:":
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break  # the section ended
        stripped = line.strip()
        match = _ENTRY.match(stripped) if line.startswith("    ") and not line.startswith("     ") else None
        if match:
            current = match.group("names").split(", ")
            for name in current:
                entries[name] = match.group("text")
        elif current and stripped:
            for name in current:
                entries[name] += " " + stripped
    return entries


def _split_default(text: str) -> tuple[str, str | None]:
    """(the help without its default clause, the default it names or None)."""
    for pattern in _DEFAULTS:
        match = pattern.search(text)
        if match:
            return (text[: match.start()] + text[match.end():]).strip(), match.group("value").strip()
    return text.strip(), None


def _plain(text: str) -> str:
    """reStructuredText's literal marks (````x````) left out: the help is read in a terminal."""
    return text.replace("``", "")


def _words(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe(backend: Any) -> list[SettingHelp]:
    """Every setting ``backend`` (a `Backend` class) takes as text: its kind, its help and its default, sorted."""
    known = backend.settings()
    options = backend.Options
    fields = {item.name: item for item in dataclasses.fields(options)} if dataclasses.is_dataclass(options) else {}
    sources = [docstring_args(options), docstring_args(backend)]
    module = sys.modules.get(backend.__module__)
    rows = []
    for name in offered(known):
        declared = fields[name].metadata if name in fields else {}
        text = declared.get(HELP)
        if text is None:
            text = next((source[name] for source in sources if name in source), "")
            # An entry that only points at the class holding the setting: that class's own entry is the help.
            reference = _REFERENCE.search(text)
            held = getattr(module, reference.group("name"), None) if reference else None
            if held is not None and name in (inner := docstring_args(held)):
                text = inner[name]
        help_text, said = _split_default(text)
        default = declared.get(DEFAULT) or said
        if default is None and name in fields and fields[name].default not in (None, dataclasses.MISSING):
            default = _words(fields[name].default)
        rows.append(SettingHelp(name, kind_of(known[name]), _plain(help_text).rstrip(".") or "(no help declared)",
                                _plain(default or "not set").rstrip(".")))
    return rows
