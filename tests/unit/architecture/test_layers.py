"""The layers point one way, proven over the source of every module, function-local imports included (an import
inside a function is a dependency too; it only runs later): front ends reach backends through the seam only, there
is no import cycle, and the spec imports nothing above it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from import_graph import cycles, edges, modules  # beside this file (pytest puts its folder on sys.path)

CONCRETE = ("trainops.backends.local", "trainops.backends.sagemaker", "trainops.backends.slurm")
#: Modules that still import a concrete backend from outside trainops/backends/ (the list only shrinks).
NOT_MOVED_YET: frozenset[str] = frozenset()
#: Imports of one backend by the other still to move to a neutral module (the list only shrinks).
CROSS_LEFT: frozenset[str] = frozenset()
#: Import cycles still to open (each a sorted list of modules; the list only shrinks). None is left.
CYCLES_LEFT: list[list[str]] = []


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, bool]]:
    return edges(modules())


def _concrete(target: str) -> bool:
    return any(target == prefix or target.startswith(prefix + ".") for prefix in CONCRETE)


def test_front_ends_import_no_concrete_backend(graph):
    found = sorted(f"{module} -> {target}" for module, targets in graph.items()
                   if not module.startswith("trainops.backends") for target in targets if _concrete(target))
    offenders = {line.split(" -> ")[0] for line in found}
    assert sorted(offenders - NOT_MOVED_YET) == [], "\n".join(found)
    assert offenders >= NOT_MOVED_YET, f"no concrete import left in {sorted(NOT_MOVED_YET - offenders)}: take it off"


def test_the_seam_and_the_registry_import_no_backend(graph):
    for seam in ("trainops.backends", "trainops.backends.api", "trainops.backends.options",
                 "trainops.backends.states", "trainops.backends.failures", "trainops.backends.vocabulary"):
        assert [target for target in graph[seam] if _concrete(target)] == [], seam


def test_no_concrete_backend_imports_another(graph):
    found = {f"{module} -> {target}" for mine in CONCRETE for other in CONCRETE if mine != other
             for module, targets in graph.items() if module.startswith(mine + ".")
             for target in targets if target == other or target.startswith(other + ".")}
    assert sorted(found - CROSS_LEFT) == [], "\n".join(sorted(found))
    assert found >= CROSS_LEFT, f"gone: {sorted(CROSS_LEFT - found)}: take them off the list"


def test_what_the_backends_share_imports_no_backend(graph):
    """The neutral packages both backends import (what their jobs' directories hold, the request) import none."""
    for package in ("trainops.backends.hostfs", "trainops.backends.request"):
        found = sorted(f"{module} -> {target}" for module, targets in graph.items()
                       if module == package or module.startswith(package + ".") for target in targets
                       if _concrete(target))
        assert found == [], "\n".join(found)


def test_backends_import_no_step_and_no_front_end(graph):
    above = ("trainops.steps", "trainops.operators", "trainops.components", "trainops.commands", "trainops.cli")
    found = sorted(f"{module} -> {target}" for module, targets in graph.items()
                   if module.startswith("trainops.backends") for target in targets
                   if any(target == a or target.startswith(a + ".") for a in above))
    assert found == [], "\n".join(found)


def test_there_is_no_import_cycle(graph):
    found = cycles(graph)
    assert [cycle for cycle in found if cycle not in CYCLES_LEFT] == [], found
    assert [cycle for cycle in CYCLES_LEFT if cycle not in found] == [], "a listed cycle is gone: take it off"


def test_there_is_no_import_cycle_with_type_checking_imports_counted():
    """``TYPE_CHECKING`` imports never run, but a type checker follows them and they are a dependency of the design:
    none may close a circle either (issue 43: the seam and its job kinds, the spec's model and its rules had)."""
    found = cycles(edges(modules(), type_checking=True))
    assert found == [], found


def test_the_spec_imports_nothing_above_it(graph):
    # Below the spec: the errors, the state root's location, and the runtime (standard library only).
    allowed = ("trainops.spec", "trainops.errors", "trainops.home", "trainops.runtime")
    found = sorted(f"{module} -> {target}" for module, targets in graph.items() if module.startswith("trainops.spec")
                   for target in targets if not any(target == a or target.startswith(a + ".") for a in allowed))
    assert found == [], "\n".join(found)


def test_the_runtime_imports_only_itself(graph):
    found = sorted(f"{module} -> {target}" for module, targets in graph.items()
                   if module.startswith("trainops.runtime") for target in targets
                   if not target.startswith("trainops.runtime") and target != "trainops")
    assert found == [], "\n".join(found)


def test_function_local_imports_are_counted(graph):
    """The graph is not only module-level imports: an operator loads the steps inside its methods (a DAG file
    imports the operators)."""
    assert graph["trainops.operators.training"].get("trainops.steps.train") is True  # imported inside methods only


@pytest.mark.parametrize(("backend", "other"), [("local", "sagemaker"), ("sagemaker", "local"), ("local", "slurm"),
                                              ("sagemaker", "slurm"), ("slurm", "sagemaker"), ("slurm", "local")])
def test_loading_a_backend_loads_nothing_of_the_other(backend, other):
    code = (f"import sys; from trainops.backends import backend_class; backend_class({backend!r}); "
            f"print(sorted(m for m in sys.modules if m.startswith('trainops.backends.{other}')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_a_local_run_imports_no_sagemaker_module(tmp_path):
    """`trainops run SPEC` on the local backend, a whole job in a fresh interpreter: the request it executes is the
    neutral package's (trainops.backends.request), so nothing of the SageMaker backend is loaded."""
    (tmp_path / "train.py").write_text("import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm'), 'w')\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"entry_point: train.py\nsource_dir: {tmp_path}\ninstance_type: ml.m5.large\n")
    code = ("import sys; from trainops.cli import main; "
            f"code = main(['run', {str(spec)!r}, '--workdir', {str(tmp_path / 'state')!r}, '--job-name', 'no-sm-1']); "
            "print('SAGEMAKER', sorted(m for m in sys.modules if m.startswith('trainops.backends.sagemaker'))); "
            "sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SAGEMAKER []" in done.stdout, done.stdout
