"""The package's import graph, read from the source: every import statement, at module level or inside a function
(an import hidden in a function is still a dependency; it only runs later).

``TYPE_CHECKING`` blocks are left out unless asked for (``type_checking=True``): they never run, but they are a
dependency of the design all the same (a type checker follows them), so the cycle test counts them too. Relative imports are resolved. An import of a name from a
package (``from trainops.backends import api``) counts as an import of the submodule when one exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "trainops"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(tree: ast.AST, type_checking: bool = False):
    """(node, in a function) for every import that can run (with ``type_checking``: and those of the
    ``TYPE_CHECKING`` blocks)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                blocks = [*child.body, *child.orelse] if type_checking else child.orelse  # type: ignore[attr-defined]
                # Their statements are walked as a module's (the block's own imports are children of it, not of them).
                stack.append((ast.Module(body=blocks, type_ignores=[]), in_function))
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            stack.append((child, nested))


def imported(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    """What one import statement of module ``name`` names: trainops modules (the innermost that exists) and, for a
    third-party import, the dotted name as written (relative imports resolved)."""
    if isinstance(node, ast.Import):
        found = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = name.split(".") if is_package else name.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        found = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    resolved = []
    for target in found:
        if target.split(".")[0] == "trainops":
            while target and target not in known:
                target = target.rpartition(".")[0]
        if target and target not in resolved:
            resolved.append(target)
    return resolved


def edges(known: dict[str, Path] | None = None, *, type_checking: bool = False) -> dict[str, dict[str, bool]]:
    """module -> {imported trainops module: whether only function-local}; with ``type_checking``, the imports of
    ``TYPE_CHECKING`` blocks count too."""
    known = known or modules()
    graph: dict[str, dict[str, bool]] = {}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: dict[str, bool] = {}
        for node, in_function in imports(tree, type_checking):
            for target in imported(node, name, is_package, known):
                if target.startswith("trainops") and target in known and target != name:
                    targets[target] = targets.get(target, True) and in_function
        graph[name] = targets
    return graph


def cycles(graph: dict[str, dict[str, bool]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iteratively), each sorted.

    A package's ``__init__`` is imported before any of its submodules, so an edge from a submodule to its own
    package's ``__init__`` is part of Python's import order, not a cycle of the design; such edges are left out."""
    def parent_of(child: str, parent: str) -> bool:
        return child.startswith(parent + ".")

    adjacency = {node: [t for t in targets if not parent_of(node, t)] for node, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(adjacency[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in adjacency:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(adjacency[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)
