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
from collections.abc import Callable
from typing import BinaryIO

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


# --- single files of a state root (status records, lock files, logs) ---------------------------------------------
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


# --- writing into a directory trainops does not own (an output path, a registry, a staging destination) ----------
# Whoever else can write in such a directory can plant a link, a FIFO or a file under any name trainops would use,
# or make a directory trainops expects into a link. So every write there goes through these: the directory is held
# open and every name below it is reached relative to it without following a link (`open_destination`), each file
# is written under a new name nobody can guess, created exclusively (`new_temporary`), and renamed to its final name
# within the same open directory (`write_file_at`): a link under the final name is replaced, never written through,
# and nothing half-written ever carries the final name.
class ForeignDirectory(OSError):
    """A directory trainops would write in belongs to another user, who could swap what trainops writes there."""


def new_temporary(directory: int, name: str, mode: int = 0o600) -> tuple[str, int]:
    """A new file in the open ``directory`` for the final name ``name``: ``.<name>.<random>.partial``, created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a name someone planted is never opened, a clash takes another); returns its
    name and a descriptor open for writing."""
    import secrets

    for _ in range(100):
        temporary = f".{name[:200]}.{secrets.token_hex(8)}.partial"
        try:
            return temporary, os.open(temporary, NEW_FILE_FLAGS, mode, dir_fd=directory)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name for {name!r} after 100 tries")


def write_file_at(directory: int, name: str, content: bytes | Callable[[BinaryIO], object],
                  mode: int = 0o644, *, sync: bool = False) -> None:
    """Write ``name`` in the open ``directory``: ``content`` (bytes, or a function writing to a binary file) goes to
    a `new_temporary` file (flushed to disk with ``sync``), which is then renamed to ``name`` within the directory;
    on any failure the temporary is removed and nothing is left under ``name`` that was not there before."""
    temporary, descriptor = new_temporary(directory, name, mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if isinstance(content, bytes):
                handle.write(content)
            else:
                content(handle)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=directory)
        except OSError:
            pass
        raise


def _check_owner(descriptor: int, shown: str) -> None:
    details = os.fstat(descriptor)
    if details.st_uid != os.geteuid():
        raise ForeignDirectory(errno.EPERM, f"{shown} is owned by uid {details.st_uid}, not by you (uid "
                                            f"{os.geteuid()}): another user could replace what trainops writes there; "
                                            "remove it or write elsewhere")


def open_destination(root: os.PathLike | str, components: list[str] | tuple[str, ...] = (), *,
                     create: bool = True) -> int:
    """The directory ``root / components...`` held open. ``root`` is the directory a user named (created with its
    parents when missing and ``create``; a link in the path given is the user's own choice and followed); each of
    ``components`` is what trainops makes below it: created or opened relative to its parent without following a
    link (`UnsafePath`), and refused when another user owns it (`ForeignDirectory`). The caller closes it."""
    if create:
        os.makedirs(root, exist_ok=True)
    current = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    shown = os.fspath(root)
    try:
        for component in components:
            following = make_directory(component, current, 0o755) if create else open_directory(component, current)
            os.close(current)
            current = following
            shown = os.path.join(shown, component)
            _check_owner(current, shown)
    except BaseException:
        os.close(current)
        raise
    return current


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
