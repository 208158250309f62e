"""The floor under a one-process local stage written in Python, for row 15.14 (bench/staging_scale.py).

The same system calls per file that `trainops stage` must make to keep its promises, in the leanest loop Python
allows and nothing else: no name checks, no links, no report, no progress, no error handling. A first stage opens
each file without following links, checks it, writes it to a new temporary name (``O_EXCL``) in its directory,
gives it the source's times and renames it into place, then writes a manifest of (size, mtime, mtime). A re-stage
lists and stats the source, reads the manifest and stats every copy. What `trainops stage` takes beyond this is its
own overhead; what this takes beyond ``cp -r`` / ``rsync -a`` no one-process Python stage can win back.

    python bench/staging_floor.py first SOURCE DESTINATION [THREADS]
    python bench/staging_floor.py restage SOURCE DESTINATION
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MANIFEST = ".floor-manifest.json"


def listing(root: int) -> list[tuple[str, str, int, int]]:
    """(directory, name, size, mtime) of every file one level below the root (the bench tree's shape)."""
    files = []
    with os.scandir(root) as top:
        directories = [entry.name for entry in top if entry.is_dir(follow_symlinks=False)]
    for directory in directories:
        descriptor = os.open(directory, DIRECTORY, dir_fd=root)
        with os.scandir(descriptor) as entries:
            for entry in entries:
                details = entry.stat(follow_symlinks=False)
                files.append((directory, entry.name, details.st_size, details.st_mtime_ns))
        os.close(descriptor)
    return files


def first(source: str, destination: str, threads: int = 1) -> None:
    """The first stage; ``threads`` > 1 splits the directories over that many threads of this process (a side
    experiment in bench/README.md: most of a small file's copy is kernel time, which threads overlap)."""
    source_root = os.open(source, DIRECTORY)
    os.mkdir(destination)
    target_root = os.open(destination, DIRECTORY)
    by_directory: dict[str, list[str]] = {}
    for directory, name, _, _ in listing(source_root):
        by_directory.setdefault(directory, []).append(name)
    for directory in by_directory:
        os.mkdir(directory, dir_fd=target_root)
    names = sorted(by_directory)
    shares = [names[index::threads] for index in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(lambda share: _copy(source_root, target_root, share, by_directory), shares))
    manifest = {name: entry for part in parts for name, entry in part.items()}
    with open(os.path.join(destination, MANIFEST), "w", encoding="ascii") as handle:
        json.dump(manifest, handle, separators=(",", ":"))


def _copy(source_root: int, target_root: int, directories: list[str], by_directory: dict[str, list[str]]) -> dict:
    manifest = {}
    for directory in directories:
        source_directory = os.open(directory, DIRECTORY, dir_fd=source_root)
        target_directory = os.open(directory, DIRECTORY, dir_fd=target_root)
        for number, name in enumerate(by_directory[directory]):
            source_file = os.open(name, READ, dir_fd=source_directory)
            details = os.fstat(source_file)
            temporary = f".floor-{number}.tmp"
            target = os.open(temporary, NEW, 0o644, dir_fd=target_directory)
            os.copy_file_range(source_file, target, details.st_size)
            os.utime(target, ns=(details.st_atime_ns, details.st_mtime_ns))
            os.close(target)
            os.close(source_file)
            os.replace(temporary, name, src_dir_fd=target_directory, dst_dir_fd=target_directory)
            manifest[f"{directory}/{name}"] = (details.st_size, details.st_mtime_ns, details.st_mtime_ns)
        os.close(source_directory)
        os.close(target_directory)
    return manifest


def restage(source: str, destination: str) -> None:
    files = listing(os.open(source, DIRECTORY))
    with open(os.path.join(destination, MANIFEST), encoding="ascii") as handle:
        manifest = json.load(handle)
    target_root = os.open(destination, DIRECTORY)
    changed, current, target_directory = 0, None, -1
    for directory, name, size, modified in files:
        if directory != current:
            if current is not None:
                os.close(target_directory)
            target_directory = os.open(directory, DIRECTORY, dir_fd=target_root)
            current = directory
        entry = manifest.get(f"{directory}/{name}")
        copy = os.stat(name, dir_fd=target_directory, follow_symlinks=False)
        if entry is None or entry[0] != size or entry[1] != modified or copy.st_size != entry[0] \
                or copy.st_mtime_ns != entry[2]:
            changed += 1
    if changed:
        raise SystemExit(f"{changed} files changed: the re-stage floor expects an unchanged tree")


if __name__ == "__main__":
    if sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    else:
        restage(sys.argv[2], sys.argv[3])
