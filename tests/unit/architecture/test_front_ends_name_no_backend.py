"""Front ends carry any backend (issue 38, item 1), proven over their source: the CLI, its commands, the Airflow
operators, the KFP components and the steps hold no backend's name as a literal and never read ``remote`` to mean
"SageMaker-like". What differs between backends is declared by each (capabilities, what it needs to be reached, its
wait grace, its links, its options type), and the default backend is named once, in the registry."""

from __future__ import annotations

import ast
from pathlib import Path

from trainops.backends import BUILTIN, DEFAULT_BACKEND

PACKAGE = Path(__file__).resolve().parents[3] / "trainops"
FRONT_ENDS = ("cli.py", "commands", "operators", "components", "steps")


def front_end_files() -> list[Path]:
    files: list[Path] = []
    for part in FRONT_ENDS:
        path = PACKAGE / part
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants (prose may name a backend: an example, a default it documents)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def offences(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) of each backend-name literal and each ``.remote`` in a module's source."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "remote":
            found.append((node.lineno, "a .remote test"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose \
                and node.value.strip().lower() in names:
            found.append((node.lineno, f"the backend name {node.value!r}"))
    return found


def test_front_ends_hold_no_backend_name_and_no_remote_test():
    names = set(BUILTIN)
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}" for path in front_end_files()
             for line, what in offences(path.read_text(encoding="utf-8"), names)]
    assert found == [], "\n".join(found)


def test_the_check_finds_what_it_looks_for():
    """The scan is not vacuous: each kind of offence in a module is found, prose is not."""
    source = ('"""The local backend runs here; SageMaker runs remote."""\n'
              'def f(backend, name="local"):\n'
              '    """Return backend.remote, for name == "sagemaker"."""\n'
              '    if backend.remote or name == "sagemaker":\n'
              '        return "SageMaker training job"\n')
    assert offences(source, {"local", "sagemaker"}) == [(2, "the backend name 'local'"), (4, "a .remote test"),
                                                        (4, "the backend name 'sagemaker'")]
    assert len(front_end_files()) > 40


def test_the_default_backend_is_named_once_in_the_registry():
    registry = (PACKAGE / "backends" / "__init__.py").read_text(encoding="utf-8")
    assert f'DEFAULT_BACKEND = "{DEFAULT_BACKEND}"' in registry
    spec = (PACKAGE / "spec" / "pipeline.py").read_text(encoding="utf-8")
    assert offences(spec, set(BUILTIN)) == []  # the pipeline file's backend defaults to the registry's
