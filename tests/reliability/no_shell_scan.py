"""A static check that code never runs a shell (issue 10, item 3), used by test_reliability_security.py and
bench/reliability.py.

It reads the source with `ast` (nothing is imported) and reports every call that would involve a shell:
`shell=` with anything but False, `os.system`, `os.popen`, `subprocess.getoutput`/`getstatusoutput`,
`asyncio.create_subprocess_shell`, a process started from a string command (a literal, an f-string, a `+`/`%`
expression, `.format()`/`.join()`, or a variable assigned one of those or annotated `str`), and an argument list that
starts `sh -c` (or bash, dash, zsh).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SHELL_CALLS = {"system", "popen", "getoutput", "getstatusoutput", "create_subprocess_shell"}
PROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output", "create_subprocess_exec", "execv", "execve",
                 "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp",
                 "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash", "cmd", "cmd.exe"}
# Modules whose `run` / `call` are not process starters (so `asyncio.run(...)` is not taken for `subprocess.run`).
PROCESS_MODULES = {"subprocess", "os", "asyncio", None}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _call_name(call: ast.Call) -> tuple[str | None, str | None]:
    """(module or object name, function name) of a call: `subprocess.run` -> ("subprocess", "run")."""
    func = call.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else "?"
        return owner, func.attr
    if isinstance(func, ast.Name):
        return None, func.id
    return "?", None


def _is_text_expression(node: ast.AST) -> bool:
    """True for expressions that build one string (a shell command line) rather than an argument list."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_text_expression(node.left) or _is_text_expression(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("format", "join"):
        return isinstance(node.func.value, (ast.Constant, ast.JoinedStr))
    return False


def _starts_a_shell(node: ast.AST) -> bool:
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    first = node.elts[0]
    words = [element.value for element in node.elts if isinstance(element, ast.Constant)]
    return isinstance(first, ast.Constant) and first.value in SHELLS and "-c" in words


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str):
        self.path = path
        self.findings: list[Finding] = []
        self.scopes: list[ast.AST] = []

    def visit_FunctionDef(self, node):  # noqa: N802 - ast hook
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _report(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(self.path, node.lineno, what))

    def _text_variable(self, name: str) -> bool:
        """Whether `name`, in the enclosing function, is assigned a string or is a parameter annotated `str`."""
        scope = self.scopes[-1] if self.scopes else None
        if scope is None:
            return False
        for argument in scope.args.args + scope.args.kwonlyargs + scope.args.posonlyargs:
            if argument.arg == name and argument.annotation is not None \
                    and ast.unparse(argument.annotation).replace(" ", "") in ("str", "str|None", "Optional[str]"):
                return True
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                    and _is_text_expression(node.value):
                return True
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                    and node.value is not None and _is_text_expression(node.value):
                return True
        return False

    def visit_Call(self, node: ast.Call):  # noqa: N802 - ast hook
        owner, name = _call_name(node)
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
                self._report(node, "shell= other than False")
        if name in SHELL_CALLS and owner in ("os", "subprocess", "asyncio", "commands", None):
            self._report(node, f"{owner + '.' if owner else ''}{name} runs a shell")
        elif name in PROCESS_CALLS and owner in PROCESS_MODULES:
            command = node.args[0] if node.args else next(
                (keyword.value for keyword in node.keywords if keyword.arg in ("args", "program", "path")), None)
            if command is not None:
                if _is_text_expression(command):
                    self._report(node, f"{name} started from a string command")
                elif isinstance(command, ast.Name) and self._text_variable(command.id):
                    self._report(node, f"{name} started from {command.id}, a string command")
                elif _starts_a_shell(command):
                    self._report(node, f"{name} starts a shell with -c")
        for argument in node.args:
            if _starts_a_shell(argument):
                self._report(node, "argument list starting a shell with -c")
        self.generic_visit(node)


def scan_source(source: str, path: str = "<source>") -> list[Finding]:
    """Every shell use in one module's source."""
    scanner = _Scanner(path)
    scanner.visit(ast.parse(source, filename=path))
    return scanner.findings


def scan_tree(root: Path) -> tuple[list[Finding], int]:
    """Every shell use under `root` (*.py), and how many files were read."""
    findings: list[Finding] = []
    files = sorted(root.rglob("*.py"))
    for path in files:
        findings += scan_source(path.read_text(encoding="utf-8"), str(path))
    return findings, len(files)
