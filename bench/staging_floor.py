"""The floor under a one-process local stage written in Python, for row 15.14 (bench/staging_scale.py).

The same system calls per file that `trainops stage` must make to keep its promises, in the leanest loop Python
allows and nothing else: no name checks, no links, no report, no progress, no error handling. A first stage opens
each file without following links, checks it, writes it to a new temporary name (``O_EXCL``) in its directory,
gives it the source's times and renames it into place, then writes a manifest of (size, mtime, mtime). A re-stage
lists and stats the source, reads the manifest and stats every copy. What `trainops stage` takes beyond this is its
own overhead; what this takes beyond ``cp -r`` / ``rsync -a`` no one-process Python stage can win back.

    python bench/staging_floor.py first SOURCE DESTINATION
    python bench/staging_floor.py restage SOURCE DESTINATION
"""

from __future__ import annotations

import json
import os
import sys

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


def first(source: str, destination: str) -> None:
    source_root = os.open(source, DIRECTORY)
    os.mkdir(destination)
    target_root = os.open(destination, DIRECTORY)
    manifest, current = {}, None
    source_directory = target_directory = -1
    for number, (directory, name, _, _) in enumerate(listing(source_root)):
        if directory != current:
            if current is not None:
                os.close(source_directory)
                os.close(target_directory)
            source_directory = os.open(directory, DIRECTORY, dir_fd=source_root)
            os.mkdir(directory, dir_fd=target_root)
            target_directory = os.open(directory, DIRECTORY, dir_fd=target_root)
            current = directory
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
    with open(os.path.join(destination, MANIFEST), "w", encoding="ascii") as handle:
        json.dump(manifest, handle, separators=(",", ":"))


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
    {"first": first, "restage": restage}[sys.argv[1]](sys.argv[2], sys.argv[3])
