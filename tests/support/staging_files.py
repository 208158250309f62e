"""Files of the staging tests: a small source tree, what a destination holds, and what its manifest records."""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainops.backends.hostfs.stage_names import MANIFEST_NAME


def make_tree(root: Path, count: int = 6) -> dict[str, bytes]:
    """A small source tree: files of different sizes in nested directories; returns name -> content."""
    contents = {}
    for index in range(count):
        name = f"shard-{index % 2}/deep/sample-{index}.bin" if index % 3 else f"top-{index}.bin"
        data = bytes([index]) * (1000 * (index + 1))
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        contents[name] = data
    return contents


def staged_files(destination: Path) -> dict[str, bytes]:
    """Every file under ``destination`` except staging's manifest: relative name -> content."""
    found = {}
    for directory, _, files in os.walk(destination):
        for file_name in files:
            path = Path(directory) / file_name
            name = path.relative_to(destination).as_posix()
            if name != MANIFEST_NAME:
                found[name] = path.read_bytes()
    return found


def listing(root: Path) -> set[str]:
    """Every path under ``root`` (links not followed), relative."""
    paths = set()
    for directory, directories, files in os.walk(root):
        for entry in directories + files:
            paths.add((Path(directory) / entry).relative_to(root).as_posix())
    return paths


def recorded_files(destination: Path) -> dict:
    """The manifest of ``destination`` as name -> (size, fingerprint, staged mtime)."""
    document = json.loads((destination / MANIFEST_NAME).read_text())
    return {name: tuple(entry) for name, entry in document["files"].items()}
