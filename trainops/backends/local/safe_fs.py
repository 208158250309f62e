"""File access that never follows a symbolic link planted by someone else.

Checking a path and then using it by name leaves a window in which a directory on the way can be swapped for a
link. These helpers instead open every directory relative to the descriptor of its already-checked parent, with
``O_NOFOLLOW``, and create every file the same way, so what was checked is what is used, whatever happens to the
names meanwhile. Standard library only; Linux and other POSIX systems with ``*at`` system calls.
"""

from __future__ import annotations

import errno
import os
import stat

#: Open flags of a directory reached by name relative to its parent: a link there fails with ELOOP (or ENOTDIR).
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Open flags of a new file: never through a link, never an existing file.
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(OSError):
    """A name that is a symbolic link, or not a directory, where a real directory was expected."""


def open_directory(name: str, parent: int) -> int:
    """Open the directory ``name`` (one component) of the directory open at ``parent``, refusing a link.

    Raises `UnsafePath` for a link or a non-directory under that name, `FileNotFoundError` when it is missing.
    """
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(error.errno, f"{name!r} is a symbolic link or not a directory") from None
        raise


def make_directory(name: str, parent: int, mode: int = 0o777) -> int:
    """Create (or reuse) the directory ``name`` in ``parent`` and return it open; a link there is refused."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        pass
    return open_directory(name, parent)


def open_path(components: list[str], root: int) -> int:
    """Open the directory reached from ``root`` through ``components``, each relative to the last, refusing links.
    The caller closes the returned descriptor (a duplicate of ``root`` when there are no components)."""
    current = os.dup(root)
    try:
        for component in components:
            following = open_directory(component, current)
            os.close(current)
            current = following
    except BaseException:
        os.close(current)
        raise
    return current


def make_path(components: list[str], root: int, mode: int = 0o777) -> int:
    """As `open_path`, creating the directories that are missing."""
    current = os.dup(root)
    try:
        for component in components:
            following = make_directory(component, current, mode)
            os.close(current)
            current = following
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
