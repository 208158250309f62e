"""File access that never follows a symbolic link planted by someone else.

Checking a path and then using it by name leaves a window in which a directory on the way can be swapped for a
link. These helpers instead open every directory relative to the descriptor of its already-checked parent, with
``O_NOFOLLOW``, and create every file the same way, so what was checked is what is used, whatever happens to the
names meanwhile. Standard library only; Linux and other POSIX systems with ``*at`` system calls.

Reading a file a job or another user can write (bounded, a regular file only, never blocking on a FIFO) is
`trainops.runtime.untrusted`'s, re-exported here: the runtime needs it too and imports nothing above itself.
"""

from __future__ import annotations

import errno
import os
import stat

from trainops.runtime.untrusted import (  # noqa: F401 - re-exported: the one way to read what others can write
    UnsafeFile,
    open_regular,
    read_bounded,
    read_tail_bytes,
    read_text,
)

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


def open_path(components: list[str], root: int, *, create: bool = False, mode: int = 0o777) -> int:
    """Open the directory reached from ``root`` through ``components``, each relative to the last, refusing links
    (``create``: making the directories that are missing, with ``mode``). The caller closes the returned
    descriptor (a duplicate of ``root`` when there are no components)."""
    current = os.dup(root)
    try:
        for component in components:
            following = make_directory(component, current, mode) if create else open_directory(component, current)
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


# --- single files of the local state (status records, lock files, logs) -----------------------------------------
class PlantedLink(OSError):
    """A symbolic link (or a non-file) where trainops keeps one of its own files."""


def _refused(path: os.PathLike | str, error: OSError) -> OSError:
    if error.errno in (errno.ELOOP, errno.EMLINK):
        return PlantedLink(error.errno, f"{os.fspath(path)} is a symbolic link; trainops never writes through one "
                                        "(remove the link)")
    return error


def open_state_file(path: os.PathLike | str, flags: int, mode: int = 0o600) -> int:
    """Open one of trainops' own files without following a link there (`PlantedLink` when one is)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as error:
        raise _refused(path, error) from None


def write_atomically(path: os.PathLike | str, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data``: written to a new temporary name beside it (``O_EXCL``, ``O_NOFOLLOW``, in
    the parent directory opened without following a link), then renamed over it, so a reader sees the old contents
    or the new and a link planted under either name is replaced, never written through."""
    import secrets

    directory, name = os.path.split(os.fspath(path))
    try:
        parent = os.open(directory or ".", DIRECTORY_FLAGS)
    except OSError as error:
        raise _refused(directory, error) from None
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        descriptor = os.open(temporary, NEW_FILE_FLAGS, mode, dir_fd=parent)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
        finally:
            os.close(descriptor)
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=parent)
        except OSError:
            pass
        raise
    finally:
        os.close(parent)
