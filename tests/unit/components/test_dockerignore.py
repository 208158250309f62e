"""The image's build context (.dockerignore): what the Dockerfile copies is in it, what a checkout accumulates (the
virtual environment, git, caches, runs) is not. Patterns are read as Docker reads them for these simple forms: a
leading path, or ``**/`` for any depth."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(relative: str) -> bool:
    parts = relative.split("/")
    for pattern in patterns():
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatch(part, pattern[3:]) for part in parts):
                return True
        elif any(fnmatch.fnmatch("/".join(parts[:depth]), pattern) for depth in range(1, len(parts) + 1)):
            return True
    return False


def test_what_the_dockerfile_copies_is_in_the_context():
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = [source for line in dockerfile.splitlines() if line.startswith("COPY ")
              for source in line.split()[1:-1] if not source.startswith("${")]
    copied.append(re.search(r"ARG PIPELINE_DIR=(\S+)", dockerfile).group(1))  # the default pipeline directory
    assert set(copied) >= {"pyproject.toml", "README.md", "constraints.txt", "trainops", "examples"}
    for source in copied:
        assert not ignored(source), source
    assert not ignored("trainops/components/executor.py") and not ignored("examples/digits/pipeline.yaml")


def test_what_a_checkout_accumulates_is_left_out():
    for path in (".venv/lib/python3.11/site-packages/torch/__init__.py", ".git/objects/ab/cdef", "runs/digits/x",
                 "trainops/__pycache__/cli.cpython-311.pyc", "examples/digits/__pycache__/model.cpython-311.pyc",
                 ".mypy_cache/3.11/x.json", "tests/unit/test_cli_spec.py", "trainops.egg-info/PKG-INFO"):
        assert ignored(path), path
