"""File access that never follows a symbolic link planted by someone else.

Checking a path and then using it by name leaves a window in which a directory on the way can be swapped for a
link. These helpers instead open every directory relative to the descriptor of its already-checked parent, with
``O_NOFOLLOW``, and create every file the same way, so what was checked is what is used, whatever happens to the
names meanwhile. Standard library only; Linux and other POSIX systems with ``*at`` system calls.

Reading a file a job or another user can write (bounded, a regular file only, never blocking on a FIFO) is
`trainops.runtime.untrusted`'s, re-exported here: the runtime needs it too and imports nothing above itself. So is
writing into a directory trainops does not own (`trainops.runtime.destinations`: the Slurm node packs with it).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from trainops.runtime.destinations import (  # noqa: F401 - re-exported: the one way to write where others can
    DIRECTORY_FLAGS,
    NEW_FILE_FLAGS,
    ForeignDirectory,
    PlantedLink,
    UnsafePath,
    _refused,
    make_directory,
    new_temporary,
    open_destination,
    open_directory,
    open_state_file,
    write_file_at,
)
from trainops.runtime.untrusted import (  # noqa: F401 - re-exported: the one way to read what others can write
    UnsafeFile,
    open_regular,
    read_bounded,
    read_tail_bytes,
    read_text,
)


def open_path(components: list[str], root: int, *, create: bool = False, mode: int = 0o777) -> int:
    """Open the directory reached from ``root`` through ``components``, each relative to the last, refusing links
    (``create``: making the directories that are missing, with ``mode``). The caller closes the returned
    descriptor (a duplicate of ``root`` when there are no components)."""
    current = os.dup(root)
    try:
        for component in components:
            following = make_directory(component, current, mode) if create else open_directory(component, current)
            # `current` names the open directory before the old one is closed: an exception (Ctrl-C) landing
            # between the two can leak one descriptor, never make the handler below close a number twice.
            previous, current = current, following
            os.close(previous)
    except BaseException:
        os.close(current)
        raise
    return current


def is_regular_at(name: str, parent: int) -> bool:
    """Whether ``name`` in ``parent`` is a regular file (not a link to one)."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def identity(descriptor: int) -> tuple[int, int]:
    """(device, inode) of an open file."""
    details = os.fstat(descriptor)
    return details.st_dev, details.st_ino


class DirectoryCache:
    """Directories under an open root, each opened relative to its open parent with ``O_NOFOLLOW`` (and created
    when asked), the last few kept open: a walk goes down one level at a time and copies take a directory's files
    together, so most opens are one system call from a cached parent. Relative names are ``a/b/c`` ('' is the
    root). A descriptor it returns belongs to the cache and stays valid until the next `open`."""

    def __init__(self, root: int, capacity: int = 32):
        self.root = root
        self.capacity = capacity
        self.open_ones: dict[str, int] = {}

    def open(self, relative: str, create: bool = False, mode: int = 0o777) -> int:
        """The directory ``relative`` (created level by level when ``create``); raises `UnsafePath` when a link or
        a file stands where a directory should be, `FileNotFoundError` when it is missing and not created."""
        descriptor = self.open_ones.get(relative)
        if descriptor is not None:
            return descriptor
        if not relative:
            descriptor = os.dup(self.root)
        else:
            parent_relative, _, name = relative.rpartition("/")
            parent = self.open_ones.get(parent_relative)
            if parent is not None:
                descriptor = make_directory(name, parent, mode) if create else open_directory(name, parent)
            else:
                parts = relative.split("/")
                descriptor = open_path(parts, self.root, create=create, mode=mode)
        if len(self.open_ones) >= self.capacity:
            oldest = next(iter(self.open_ones))
            os.close(self.open_ones.pop(oldest))
        self.open_ones[relative] = descriptor
        return descriptor

    def forget(self, relative: str) -> None:
        """Close ``relative`` if it is open (it is about to be removed)."""
        descriptor = self.open_ones.pop(relative, None)
        if descriptor is not None:
            os.close(descriptor)

    def close(self) -> None:
        for descriptor in self.open_ones.values():
            os.close(descriptor)
        self.open_ones.clear()


# --- single files of a state root (status records, lock files, logs) ---------------------------------------------
def write_atomically(path: os.PathLike | str, data: bytes, mode: int = 0o600, *, sync: bool = False) -> None:
    """Replace ``path`` with ``data`` (`write_file_at` in its parent directory, opened without following a link), so
    a reader sees the old contents or the new and a link planted under either name is replaced, never written
    through; ``sync``: flushed to disk before the rename."""
    directory, name = os.path.split(os.fspath(path))
    try:
        parent = os.open(directory or ".", DIRECTORY_FLAGS)
    except OSError as error:
        raise _refused(directory, error) from None
    try:
        write_file_at(parent, name, data, mode, sync=sync)
    finally:
        os.close(parent)


# --- copying into a directory trainops does not own (the writer, `open_destination` and `write_file_at`, is
# `trainops.runtime.destinations`'s, re-exported above) ------------------------------------------------------------
def copy_file_at(name: str, source_parent: int, target_parent: int, target_name: str | None = None) -> int:
    """Copy the regular file ``name`` of the open ``source_parent`` to a new file ``target_name`` (default the same
    name) of ``target_parent``, following no link on either side (``O_EXCL``: the target must not exist), in the
    kernel when it can (`copy_file_range`), keeping the source's times and execute bits; returns the bytes copied.
    Raises `UnsafeFile` when the source is a link or not a regular file."""
    source = open_regular(name, dir_fd=source_parent)
    try:
        details = os.fstat(source)
        target = os.open(target_name or name, NEW_FILE_FLAGS, stat.S_IMODE(details.st_mode) & 0o755,
                         dir_fd=target_parent)
        try:
            copied, in_kernel = 0, hasattr(os, "copy_file_range")
            while copied < details.st_size:
                count = 0
                if in_kernel:
                    try:
                        count = os.copy_file_range(source, target, details.st_size - copied)
                    except OSError as error:
                        if error.errno not in CANNOT_COPY_IN_KERNEL:
                            raise
                        in_kernel = False  # another file system, or one that cannot: read and write instead
                if count == 0:
                    data = os.read(source, 1024 * 1024)
                    if not data:
                        break
                    view = memoryview(data)
                    while view:
                        view = view[os.write(target, view):]
                    count = len(data)
                copied += count
            os.utime(target, ns=(details.st_atime_ns, details.st_mtime_ns))
        finally:
            os.close(target)
    finally:
        os.close(source)
    return copied


#: What `copy_file_range` answers for a pair of files it cannot copy between (another file system before Linux
#: 5.19, a file system without support, a kernel without the call, a seccomp filter): the copy reads and writes.
CANNOT_COPY_IN_KERNEL = (errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EBADF)


def copy_tree_at(source: int, target: int, other: Callable[[str, str], None], shown: str = "") -> int:
    """Copy the directory open at ``source`` into the (new, empty) directory open at ``target``: every directory
    opened relative to its parent with ``O_NOFOLLOW``, every file with `copy_file_at`, no recursion (deep trees are
    fine). ``other(path, why)`` is called for a link, FIFO, socket or device (shown under ``shown``): it raises to
    refuse the copy, or returns to leave that entry out. Returns how many files were copied."""
    pending: list[list[str]] = [[]]
    copied = 0
    while pending:
        parts = pending.pop()
        source_fd = open_path(parts, source)
        try:
            target_fd = open_path(parts, target)
        except BaseException:
            os.close(source_fd)
            raise
        try:
            with os.scandir(source_fd) as entries:
                listed = [(entry.name, entry.stat(follow_symlinks=False).st_mode) for entry in entries]
            for name, mode in sorted(listed):
                path = os.path.join(shown, *parts, name)
                if stat.S_ISLNK(mode):
                    other(path, "is a symbolic link")
                elif stat.S_ISDIR(mode):
                    os.close(make_directory(name, target_fd, 0o755))
                    pending.append([*parts, name])
                elif stat.S_ISREG(mode):
                    copy_file_at(name, source_fd, target_fd)
                    copied += 1
                else:
                    other(path, "is not a regular file (a FIFO, socket or device)")
        finally:
            os.close(source_fd)
            os.close(target_fd)
    return copied
