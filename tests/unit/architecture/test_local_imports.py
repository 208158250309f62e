"""A function-local import says why it is not at module level (issue 43 item 5), and the reason it gives is checked.

What needs a reason: every import inside a function of trainops' own modules, or of a third-party package of
trainops' core install (pydantic, PyYAML, platformdirs: always there, so only import time can keep one local).
Packages outside the core install (boto3, torch, kfp, Airflow, kubernetes, ray: extras, or an image's own) need
none: they may not be installed. Nor do a module's lazy attributes (PEP 562 ``__getattr__``): the function is the
reason.

A reason is a line of the module's docstring, for every function-local import of the module::

    Function-local imports (DAG-parse path): a DAG file imports this module; the steps load when a task runs.

or a trailing comment on the import (its first or last line), for that one import, in place of the docstring's::

    from trainops.spec.loader import check_rule_sets  # function-local (heavy): pydantic, which the seam does not load

A docstring line may name several kinds (``(CLI start, heavy)``): each import it covers is true to one of them,
and each kind is true of one import at least. The kinds and what is checked:

- ``DAG-parse path``: the module is in the module-level import closure of a DAG file (``dags/*.py``) or of a
  ``trainops.operators`` module (a DAG file imports them);
- ``CLI start``: the module is in the module-level import closure of ``trainops.cli`` and the command modules it
  registers (``trainops --help`` imports them all);
- ``runtime start``: the module is the in-container runtime's (``trainops.runtime``): each of its processes (the
  launcher, every rank, a training script's helpers) loads only what its command runs;
- ``heavy``: at module level, the import would load a third-party package (pydantic, yaml, an extra) that the
  module's own module-level imports do not;
- ``cycle``: at module level, the import would close an import cycle: the imported module's module-level imports
  reach this module;
- ``component body``: a KFP lightweight component's function, whose source KFP ships alone; checked: the module
  imports kfp, and nothing of trainops, at module level (a body could not use it);
- ``standalone script``: a file copied and run where trainops is not installed (the Slurm node script), which
  imports trainops' modules once it has put them on ``sys.path``; checked: it imports nothing of trainops at module
  level, and it sets ``sys.path``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
from import_graph import PACKAGE, edges, imported, imports, modules  # beside this file

ROOT = PACKAGE.parent
CORE_THIRD_PARTY = ("pydantic", "yaml", "platformdirs")
KINDS = ("DAG-parse path", "CLI start", "runtime start", "heavy", "cycle", "component body", "standalone script")
DOCSTRING_REASON = re.compile(r"^\s*Function-local imports \(([^)]*)\):", re.MULTILINE)
COMMENT_REASON = re.compile(r"#\s*function-local \(([^)]*)\)")


class Tree:
    """The package read once: each module's source, syntax tree and imports; module-level edges, module-level
    third-party packages, closures."""

    def __init__(self, known: dict[str, Path]):
        self.known = known
        self.graph = edges(known)
        self._loads: dict[str, set[str]] = {}
        self.text: dict[str, str] = {}
        self.syntax: dict[str, ast.Module] = {}
        self.statements: dict[str, list[tuple[ast.Import | ast.ImportFrom, bool]]] = {}
        self.third_party: dict[str, set[str]] = {}
        for name, path in known.items():
            self.text[name] = path.read_text(encoding="utf-8")
            self.syntax[name] = ast.parse(self.text[name])
            self.statements[name] = list(imports(self.syntax[name]))
            self.third_party[name] = {target.split(".")[0] for node, local in self.statements[name] if not local
                                      for target in imported(node, name, path.name == "__init__.py", known)
                                      if _third_party(target)}

    def closure(self, entries: list[str]) -> set[str]:
        """The modules importing ``entries`` runs, their packages' ``__init__`` included (module-level imports)."""
        seen: set[str] = set()
        todo = list(entries)
        while todo:
            module = todo.pop()
            if module in seen or module not in self.known:
                continue
            seen.add(module)
            parts = module.split(".")
            todo += [".".join(parts[:index]) for index in range(1, len(parts))]
            todo += [target for target, local in self.graph[module].items() if not local]
        return seen

    def loads(self, module: str) -> set[str]:
        """The third-party packages importing ``module`` loads at module level."""
        if module not in self._loads:
            self._loads[module] = set().union(*(self.third_party[name] for name in self.closure([module])))
        return self._loads[module]


def _third_party(target: str) -> bool:
    top = target.split(".")[0]
    return bool(top) and top != "trainops" and top not in sys.stdlib_module_names


@pytest.fixture(scope="module")
def tree() -> Tree:
    return Tree(modules())


def _entries(known: dict[str, Path]) -> dict[str, list[str]]:
    dags = []
    for path in sorted((ROOT / "dags").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainops"):
                dags.append(node.module)
    commands = re.findall(r'"(trainops\.commands\.\w+)"', (PACKAGE / "cli.py").read_text(encoding="utf-8"))
    assert dags and commands, "the DAG files' imports and the CLI's command modules are where this test looks"
    return {"DAG-parse path": [*dags, *(name for name in known if name.startswith("trainops.operators"))],
            "CLI start": ["trainops.cli", *commands]}


def _lazy_attributes(tree: ast.Module) -> set[int]:
    return {id(child) for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for child in ast.walk(node)}


def local_imports(name: str, tree: Tree):
    """(line, what it imports, the kinds its comment states or None) for each function-local import needing a
    reason."""
    lines = tree.text[name].splitlines()
    lazy = _lazy_attributes(tree.syntax[name])
    for node, local in tree.statements[name]:
        if not local or id(node) in lazy:
            continue
        targets = [target for target in imported(node, name, tree.known[name].name == "__init__.py", tree.known)
                   if target.startswith("trainops") or target.split(".")[0] in CORE_THIRD_PARTY]
        if not targets:
            continue
        stated = None
        for line in (lines[node.lineno - 1], lines[node.end_lineno - 1]):
            found = COMMENT_REASON.search(line)
            if found:
                stated = _kinds(found.group(1))
        yield node.lineno, targets, stated


def _kinds(text: str) -> list[str]:
    return [kind.strip() for kind in text.split(",") if kind.strip()]


def _true_of_module(kind: str, name: str, closures: dict[str, set[str]], tree: Tree) -> bool | None:
    """Whether a kind that is about the module holds of it; None for a kind that is about each import."""
    if kind in closures:
        return name in closures[kind]
    if kind == "runtime start":
        return name == "trainops.runtime" or name.startswith("trainops.runtime.")
    if kind == "standalone script":
        return all(local for local in tree.graph[name].values()) and "sys.path" in tree.text[name]
    if kind == "component body":
        return "kfp" in tree.third_party[name] and all(local for local in tree.graph[name].values())
    return None


def _true_of_import(kind: str, name: str, target: str, tree: Tree) -> bool:
    if kind == "heavy":
        added = ({target.split(".")[0]} if _third_party(target) else tree.loads(target)) - tree.loads(name)
        return bool(added)
    if kind == "cycle":
        return target.startswith("trainops") and name in tree.closure([target])
    raise AssertionError(kind)


def reasons(tree: Tree) -> tuple[list[str], list[str]]:
    """(imports with no reason, reasons that are not true), each a line naming the module."""
    closures = {kind: tree.closure(entries) for kind, entries in _entries(tree.known).items()}
    missing: list[str] = []
    wrong: list[str] = []
    for name, path in tree.known.items():
        docstring = ast.get_docstring(tree.syntax[name]) or ""
        module_kinds = [kind for found in DOCSTRING_REASON.findall(docstring) for kind in _kinds(found)]
        used: set[str] = set()
        for line, targets, stated in local_imports(name, tree):
            kinds = stated if stated is not None else module_kinds
            where = f"{path.relative_to(ROOT)}:{line} ({', '.join(targets)})"
            if not kinds:
                missing.append(where)
                continue
            unknown = [kind for kind in kinds if kind not in KINDS]
            if unknown:
                wrong.append(f"{where}: no such kind {unknown}; the kinds are {KINDS}")
                continue
            true = []
            for kind in kinds:
                about_module = _true_of_module(kind, name, closures, tree)
                if about_module or (about_module is None
                                    and all(_true_of_import(kind, name, target, tree) for target in targets)):
                    true.append(kind)
            if stated is None:
                used.update(true)
            if not true:
                wrong.append(f"{where}: {', '.join(kinds)} is not true of it")
        for kind in module_kinds:
            if kind in KINDS and kind not in used:
                wrong.append(f"{path.relative_to(ROOT)}: its docstring's '{kind}' is true of no import it covers")
    return missing, wrong


@pytest.fixture(scope="module")
def found(tree) -> tuple[list[str], list[str]]:
    return reasons(tree)  # read once for both tests (every module's source and closures)


def test_every_function_local_import_says_why(found):
    missing, _ = found
    assert missing == [], ("function-local imports with no reason (move them to module level, or state why: "
                           "see this test's docstring):\n" + "\n".join(missing))


def test_every_stated_reason_is_true(found):
    _, wrong = found
    assert wrong == [], "\n".join(wrong)
