"""The backend kit is the public seam (issue 43): the toy backend, written as another package's backend would be,
imports nothing of trainops but `trainops.backends.kit`, and every name the kit lists is importable from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trainops.backends.kit as kit

TOY = Path(__file__).resolve().parents[2] / "support" / "toy_backend" / "trainops_toy"
#: The claims engine of tests/system/test_engine_vocabulary.py (pvc:// channels, its own states, rules and spec rules).
CLAIMS = Path(__file__).resolve().parents[2] / "system" / "claims_backend" / "trainops_claims"


def trainops_imports(path: Path) -> list[str]:
    """Every module of trainops that ``path`` imports, at any depth of the file (inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] == "trainops"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "trainops":
            found.append(node.module)
    return found


@pytest.mark.parametrize("package", [TOY, CLAIMS], ids=["toy", "claims"])
def test_the_outside_engines_import_only_the_kit(package):
    files = sorted(package.glob("*.py"))
    assert files, package
    imported = {str(path.name): trainops_imports(path) for path in files}
    assert {module for modules in imported.values() for module in modules} == {"trainops.backends.kit"}, imported


def test_every_name_the_kit_lists_is_importable_from_it():
    missing = [name for name in kit.__all__ if not hasattr(kit, name)]
    assert missing == []
    assert kit.JobSpec.__name__ == "JobSpec"  # the one name made on first use (the spec's models need pydantic)


def test_the_toy_writes_no_wait_loop_and_declares_the_core_only():
    """What the toy defines is the core an engine writes; the wait, the watch and the logs come from the kit."""
    tree = ast.parse((TOY / "backend.py").read_text())
    toy = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ToyBackend")
    methods = {node.name for node in toy.body if isinstance(node, ast.FunctionDef)}
    assert not methods & {"wait", "watch", "logs", "log_lines", "describe"}, methods
    assert {"look", "stop", "create", "dry_run", "status_of"} <= methods


def test_the_core_an_engine_writes_is_small_and_no_member_hides_behind_a_capability():
    """Backend's core (what every engine writes: its abstract methods and the three declarations) stays within 20
    members; with PolledBackend fewer still. The other job kinds are objects (None: none), never stubs."""
    from trainops.backends.kit import Backend, PolledBackend

    declared = {"name", "Options", "CONTEXT"}
    assert len(Backend.__abstractmethods__ | declared) <= 20, sorted(Backend.__abstractmethods__)
    assert len(PolledBackend.__abstractmethods__ | declared) < len(Backend.__abstractmethods__ | declared)
    assert not {"require", "capabilities", "start_evaluation", "stage", "evaluate", "register"} & set(vars(Backend))
    assert {"evaluations", "staging", "registry", "job_kind"} <= set(vars(Backend))
