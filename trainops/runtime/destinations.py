"""Writing where someone else may plant a link: the one way trainops does it, in the runtime and above.

Checking a path and then using it by name leaves a window in which a directory on the way can be swapped for a
link. So a directory trainops does not own (an output path, a registry, a staging destination, a Slurm job's output
directory on the shared file system) is held open and every name below it is reached relative to that descriptor
with ``O_NOFOLLOW`` (`open_destination`, which also refuses a directory another user owns); each file is written
under a new name nobody can guess, created exclusively (`new_temporary`), and renamed to its final name within the
same open directory (`write_file_at`): a link under the final name is replaced, never written through, and nothing
half-written ever carries the final name. trainops' own single files (logs, locks) are opened without following a
link (`open_state_file`).

Standard library only: the Slurm node script packs a job's archives with it on the nodes, where only the runtime is
there; `trainops.backends.hostfs.safe_fs` re-exports all of it for the backends.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import BinaryIO

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
            shown = os.path.join(shown, component)
            try:
                following = make_directory(component, current, 0o755) if create else open_directory(component,
                                                                                                     current)
            except UnsafePath as error:  # named in full: which directory of whose path is the link
                raise UnsafePath(error.errno, f"{shown} is a symbolic link or not a directory; trainops never "
                                              "writes through one (remove it, or write elsewhere)") from None
            os.close(current)
            current = following
            _check_owner(current, shown)
    except BaseException:
        os.close(current)
        raise
    return current
