"""The figures of issue 43's closing note (the backend kit), read from the source: nothing is run or imported.

    .venv/bin/python bench/kit_figures.py [--before 68cf672] [--after HEAD]

Prints, for ``--before`` (the commit the issue measured) and ``--after``:

- `Backend`'s members: every name its class body defines (methods, properties, class attributes; dunders left out),
  public and private, the abstract ones, and the core an engine writes (the list of `Backend`'s own docstring,
  `CORE`; the issue's bound is <= 20); and what a `PolledBackend` asks of an engine against what it gives;
- each backend package's imports of trainops that are not the public kit (``trainops.backends.kit`` and the
  conformance suite ``trainops.backends.testing``) or that name a private (underscore) name: the toy (an outside
  package, tests/support/toy_backend) and the built-in kubernetes, ray, slurm, sagemaker and local; ``TYPE_CHECKING``
  and function-local imports count;
- the lines of the three built-ins' packages (local, sagemaker, slurm);
- trainops' own imports, and how many of them sit inside functions.

Every file is read with ``git show REV:PATH``, so the figures of a revision do not depend on the working tree.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What every engine writes (Backend's docstring: "Its core, what every engine writes").
CORE = ("name", "Options", "CONTEXT", "dry_run", "create", "status_of", "describe", "wait", "watch", "stop", "logs",
        "log_lines", "render_request", "location")
#: The public modules a backend of another package may import.
PUBLIC = ("trainops.backends.kit", "trainops.backends.testing")
PACKAGES = {"toy (tests/support)": "tests/support/toy_backend/trainops_toy", "kubernetes": "trainops/backends/kubernetes",
            "ray": "trainops/backends/ray", "slurm": "trainops/backends/slurm",
            "sagemaker": "trainops/backends/sagemaker", "local": "trainops/backends/local"}
BUILT_INS = ("local", "sagemaker", "slurm")


def git(*arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def files(revision: str, directory: str) -> list[str]:
    """The .py files under ``directory`` at ``revision`` (none: the directory is not there)."""
    listed = git("ls-tree", "-r", "--name-only", revision, "--", directory).split()
    return sorted(path for path in listed if path.endswith(".py"))


def source(revision: str, path: str) -> str:
    return git("show", f"{revision}:{path}")


def class_members(tree: ast.Module, name: str) -> tuple[list[str], list[str]]:
    """(every name the class body defines, the abstract ones): methods and properties first, then attributes."""
    found = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)
    members: list[str] = []
    abstract: list[str] = []
    for node in sorted(found.body, key=lambda item: not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))):
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
            if any("abstractmethod" in ast.unparse(decorator) for decorator in node.decorator_list):
                abstract.append(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        members += [item for item in names if not (item.startswith("__") and item.endswith("__"))
                    and item not in members]
    return members, abstract


def methods(tree: ast.Module, name: str) -> int:
    found = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)
    return len({node.name for node in found.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and not (node.name.startswith("__") and node.name.endswith("__"))})


def imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, str]]:
    """(module, name) for every ``from X import name`` / ``import X`` of the file, wherever it stands (module level,
    a function, a ``TYPE_CHECKING`` block); relative imports resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield base, alias.name


def module_of(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if "trainops_toy" in parts:
        parts = parts[parts.index("trainops_toy"):]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_imports(revision: str, directory: str) -> set[tuple[str, str]]:
    """The trainops names a package imports that are not the public kit's, or are private (underscore)."""
    own = module_of(directory + "/__init__.py")
    found: set[tuple[str, str]] = set()
    for path in files(revision, directory):
        module = module_of(path)
        tree = ast.parse(source(revision, path))
        for imported, name in imports(tree, module, path.endswith("__init__.py")):
            if not imported.startswith("trainops") or imported == own or imported.startswith(own + "."):
                continue
            if imported in PUBLIC and not name.startswith("_"):
                continue
            found.add((imported, name))
    return found


def own_imports(revision: str) -> tuple[int, int]:
    """(trainops' imports of its own modules, those inside a function)."""
    total = inside = 0
    for path in files(revision, "trainops"):
        tree = ast.parse(source(revision, path))
        module = module_of(path)
        functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        local = {id(child) for function in functions for child in ast.walk(function)
                 if isinstance(child, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [next(imports(ast.Module(body=[node], type_ignores=[]), module, path.endswith("__init__.py")))[0]]
            if any(target.startswith("trainops") for target in targets):
                total += 1
                inside += id(node) in local
    return total, inside


def lines(revision: str, directory: str) -> int:
    return sum(len(source(revision, path).splitlines()) for path in files(revision, directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="68cf672", help="the revision the issue measured (default 68cf672)")
    parser.add_argument("--after", default="HEAD", help="the revision to compare (default HEAD)")
    given = parser.parse_args()
    revisions = {"before": given.before, "after": given.after}
    named = {key: git("rev-parse", "--short", value).strip() for key, value in revisions.items()}
    print(f"before: {named['before']}   after: {named['after']}\n")

    print("## Backend's members")
    print("| revision | members | methods | public | private | abstract | core an engine writes (<= 20) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for key, revision in revisions.items():
        tree = ast.parse(source(revision, "trainops/backends/api.py"))
        members, abstract = class_members(tree, "Backend")
        private = [item for item in members if item.startswith("_")]
        core = [item for item in CORE if item in members]
        print(f"| {key} {named[key]} | {len(members)} | {methods(tree, 'Backend')} | {len(members) - len(private)} | "
              f"{len(private)} | "
              f"{len(abstract)} | {len(core)} |")
    after = revisions["after"]
    if files(after, "trainops/backends/polled.py"):
        backend, _ = class_members(ast.parse(source(after, "trainops/backends/api.py")), "Backend")
        polled, polled_abstract = class_members(ast.parse(source(after, "trainops/backends/polled.py")),
                                                "PolledBackend")
        writes = [item for item in CORE if item not in polled] + polled_abstract
        writes = [item for item in writes if item not in ("describe", "wait", "watch", "logs", "log_lines")]
        given_names = [item for item in polled if item not in polled_abstract]
        print(f"\nA PolledBackend engine writes {len(writes)} ({', '.join(writes)}; read_logs where its jobs have "
              f"logs); the kit gives {len(given_names)} ({', '.join(given_names)}) on top of Backend's "
              f"{len(backend)} members.")

    print("\n## Imports of trainops outside the public kit (kit, testing) or of private names, per backend package")
    print("| package | " + " | ".join(f"{key} {named[key]}" for key in revisions) + " | modules (after) |")
    print("| --- | --- | --- | --- |")
    for label, directory in PACKAGES.items():
        counts = []
        for revision in revisions.values():
            counts.append(str(len(private_imports(revision, directory))) if files(revision, directory) else "-")
        modules = sorted({imported for imported, _ in private_imports(after, directory)}) \
            if files(after, directory) else []
        print(f"| {label} | {' | '.join(counts)} | {len(modules)} modules |")

    print("\n## Lines of the built-in backends' packages")
    print("| backend | " + " | ".join(f"{key} {named[key]}" for key in revisions) + " |")
    print("| --- | --- | --- |")
    totals = dict.fromkeys(revisions, 0)
    for name in BUILT_INS:
        counted = {key: lines(revision, f"trainops/backends/{name}") for key, revision in revisions.items()}
        for key, value in counted.items():
            totals[key] += value
        print(f"| {name} | " + " | ".join(str(counted[key]) for key in revisions) + " |")
    print("| all three | " + " | ".join(str(totals[key]) for key in revisions) + " |")

    print("\n## trainops' imports of its own modules")
    print("| revision | imports | inside functions |")
    print("| --- | --- | --- |")
    for key, revision in revisions.items():
        total, inside = own_imports(revision)
        print(f"| {key} {named[key]} | {total} | {inside} ({100 * inside / total:.0f} %) |")


if __name__ == "__main__":
    main()
