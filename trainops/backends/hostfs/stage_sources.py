"""Where staged data comes from: a local directory (a path or a ``file://`` URI), or an S3 prefix (`stage_s3`).

A source lists its files as `SourceFile` records (each with a checked relative name and a fingerprint for the
manifest) plus the `Refusal` of everything it will not stage.

Local trees are read without following a link that could have been swapped in: the root is opened once and every
directory below it is opened relative to its open parent with ``O_NOFOLLOW`` (`safe_fs.DirectoryCache`) and
compared with the (device, inode) seen when it was listed; files are opened relative to their directory with
``O_NOFOLLOW`` and checked by inode. A directory or file replaced by a link at any moment therefore fails (and is
reported) instead of being read through. Symbolic links are followed only while they point inside the source (to a
file, or to a directory that is not one of its own ancestors), by opening the resolved path the same way; links
that point outside, dangling links, loops, FIFOs, sockets and devices are refused.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from trainops.backends.hostfs.safe_fs import DirectoryCache, UnsafePath, open_path
from trainops.backends.hostfs.stage_names import NAME_MAX, RESERVED_PREFIX, entry_refusal_reason
from trainops.errors import Problem, SpecError


class SourceChanged(OSError):
    """The file or directory on disk is no longer the one that was listed (replaced, or turned into a link)."""


class SourceFile(NamedTuple):
    """One file to stage: its relative name, size and fingerprint, and where it is in the source."""

    name: str
    size: int
    fingerprint: int | str  # mtime in nanoseconds (local) or ETag (S3)
    location: str  # the S3 key, or the local file's own name in its (real) directory
    identity: int | None = None  # inode of a local file, checked when it is opened
    directory: int = -1  # local: index of the file's real directory in `LocalSource.directories`
    mode: int = 0o644  # permission bits the copy is created with (the local file's; umask applies, as for cp)
    modified: int = 0  # S3: LastModified in ns, given to the copy


class Refusal(NamedTuple):
    """A file or key that staging will not write, and why."""

    name: str
    reason: str


def local_path_of(location: str, field: str) -> Path | None:
    """The local path of a plain path or ``file://`` URI; None for any other URI scheme. Raises `SpecError` for a
    ``file://`` URI on another host."""
    if location.startswith("file:"):
        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise SpecError(Problem(field, f"{location!r} names the host {parts.netloc!r}; file:// URIs must be local "
                                           "(file:///absolute/path)"))
        return Path(unquote(parts.path))
    if "://" in location:
        return None
    return Path(location)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW  # O_NONBLOCK: a FIFO swapped in can't hang


class LocalSource:
    """A directory on this machine. `list` walks it without recursion (trees of any depth); `copy` copies one file
    into an open descriptor, both without following a link that was not checked."""

    def __init__(self, root: Path):
        #: What the manifest records as the source: the same directory however it was spelled.
        self.identity = os.path.realpath(root)
        self.root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:  # the real path of what was opened, to tell links inside from links out
            self.real = os.readlink(f"/proc/self/fd/{self.root_fd}")
        except OSError:
            self.real = self.identity
        details = os.fstat(self.root_fd)
        #: Every directory files come from: (real path under the root, (device, inode), listing parent index).
        self.directories: list[tuple[str, tuple[int, int], int]] = [("", (details.st_dev, details.st_ino), -1)]
        self.cache = DirectoryCache(self.root_fd)
        self._checked = (-1, -1)  # (index, descriptor) of the directory checked last

    def close(self) -> None:
        self.cache.close()
        os.close(self.root_fd)

    def _open(self, index: int) -> int:
        """The open directory ``self.directories[index]``, checked to be the one listed. Raises `SourceChanged`."""
        if self._checked[0] == index:
            return self._checked[1]
        real, identity, _ = self.directories[index]
        try:
            descriptor = self.cache.open(real)
        except UnsafePath as error:
            raise SourceChanged(errno.ELOOP, "a directory on its path became a symbolic link after it was listed") \
                from error
        details = os.fstat(descriptor)
        if (details.st_dev, details.st_ino) != identity:
            raise SourceChanged(errno.ESTALE, "its directory was replaced after it was listed; stage again")
        self._checked = (index, descriptor)
        return descriptor

    def list_files(self) -> tuple[list[SourceFile], list[Refusal]]:
        """Every regular file to stage (links inside the tree resolved) and every refusal."""
        files: list[SourceFile] = []
        refused: list[Refusal] = []
        pending = [(0, "")]  # (directory index, name prefix)
        while pending:
            index, prefix = pending.pop()
            real = self.directories[index][0]
            try:
                listing = os.scandir(self._open(index))
            except OSError as error:
                refused.append(Refusal(prefix.rstrip("/") or ".", f"cannot read the directory: {_reason(error)}"))
                continue
            new, append, is_file = tuple.__new__, files.append, stat.S_ISREG  # the loop runs once per file
            with listing:
                for entry in listing:
                    entry_name = entry.name
                    name = prefix + entry_name
                    # Most names are printable ASCII and short: the full check only for the others.
                    if not (entry_name.isascii() and entry_name.isprintable() and len(entry_name) <= NAME_MAX) \
                            or entry_name.startswith(RESERVED_PREFIX):
                        reason = entry_refusal_reason(entry_name)
                        if reason is not None:
                            refused.append(Refusal(name, reason))
                            continue
                    try:
                        details = entry.stat(follow_symlinks=False)  # fstatat relative to the directory
                    except OSError as error:
                        refused.append(Refusal(name, f"cannot read it: {_reason(error)}"))
                        continue
                    mode = details.st_mode
                    if is_file(mode):
                        append(new(SourceFile, (name, details.st_size, details.st_mtime_ns, entry_name,
                                                details.st_ino, index, mode & 0o777, 0)))
                    elif stat.S_ISDIR(mode):
                        below = f"{real}/{entry_name}" if real else entry_name
                        self.directories.append((below, (details.st_dev, details.st_ino), index))
                        pending.append((len(self.directories) - 1, name + "/"))
                    elif stat.S_ISLNK(mode):
                        self._follow(index, entry_name, name, files, refused, pending)
                    else:
                        refused.append(Refusal(name, "not a regular file, directory or link (a FIFO, socket or "
                                                     "device)"))
        # Copies reopen every directory by name and check it again: a directory swapped after listing is seen.
        self.cache.close()
        self._checked = (-1, -1)
        return files, refused

    def _follow(self, index: int, entry_name: str, name: str, files: list[SourceFile], refused: list[Refusal],
                pending: list[tuple[int, str]]) -> None:
        """A symbolic link in the tree: staged when it resolves inside the source (opened by its resolved path,
        component by component, following nothing), refused otherwise."""
        target = os.path.realpath(os.path.join(self.real, self.directories[index][0], entry_name))
        if target != self.real and not target.startswith(self.real.rstrip(os.sep) + os.sep):
            refused.append(Refusal(name, "symbolic link pointing outside the source tree"))
            return
        parts = [part for part in target[len(self.real):].split(os.sep) if part]
        if not parts:
            refused.append(Refusal(name, "symbolic link to one of its own parent directories (a loop)"))
            return
        try:
            parent = open_path(parts[:-1], self.root_fd)
            try:
                details = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
                parent_details = os.fstat(parent)
            finally:
                os.close(parent)
        except OSError:
            refused.append(Refusal(name, "symbolic link whose target does not exist (or loops)"))
            return
        identity = (details.st_dev, details.st_ino)
        if stat.S_ISDIR(details.st_mode):
            ancestor = index
            while ancestor >= 0:
                if self.directories[ancestor][1] == identity:
                    refused.append(Refusal(name, "symbolic link to one of its own parent directories (a loop)"))
                    return
                ancestor = self.directories[ancestor][2]
            self.directories.append(("/".join(parts), identity, index))
            pending.append((len(self.directories) - 1, name + "/"))
        elif stat.S_ISREG(details.st_mode):
            self.directories.append(("/".join(parts[:-1]), (parent_details.st_dev, parent_details.st_ino), -1))
            files.append(SourceFile(name, details.st_size, details.st_mtime_ns, parts[-1], details.st_ino,
                                    len(self.directories) - 1, details.st_mode & 0o777))
        else:
            refused.append(Refusal(name, "symbolic link to something that is not a regular file"))

    def copy_all(self, items: list[SourceFile], destination: Any) -> None:
        """Copy ``items`` into ``destination`` (a `staging.Destination`) one after another: each file opened relative
        to its checked directory and checked to be the one listed, copied in the kernel into a new temporary file
        that gets the source's times, then renamed into place. This loop runs once per file, so a destination
        directory is looked up once for each run of files that go there."""
        target: tuple[str | None, int, str | None] = (None, -1, None)  # (relative directory, descriptor, problem)
        for item in items:
            relative = item.name.rpartition("/")[0]
            if relative != target[0]:
                target = (relative, *destination.directory(relative))
            if target[2] is not None:
                destination.fail(item, target[2])
                continue
            try:
                source = os.open(item.location, _READ_FLAGS, dir_fd=self._open(item.directory))
            except OSError as error:
                destination.fail(item, "it became a symbolic link after it was listed" if error.errno == errno.ELOOP
                                 else _reason(error))
                continue
            try:
                details = os.fstat(source)
                if not stat.S_ISREG(details.st_mode) or details.st_ino != item.identity:
                    destination.fail(item, "it was replaced after it was listed; stage again")
                    continue
                created = destination.new_file(item, target[1])
                if created is None:
                    continue
                try:
                    written = copy_descriptor(source, created.descriptor, details.st_size)
                    os.utime(created.descriptor, ns=(details.st_atime_ns, details.st_mtime_ns))
                except BaseException as error:
                    os.close(created.descriptor)
                    destination.discard(created)
                    if not isinstance(error, OSError):
                        raise
                    destination.fail(item, _reason(error))
                    continue
                os.close(created.descriptor)
            finally:
                os.close(source)
            destination.commit(created, item, written, details.st_mtime_ns, details.st_mtime_ns)


#: Errors after which a copy falls back from copy_file_range to sendfile (another file system, old kernel).
_FALLBACK_ERRORS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM}
_in_kernel = [hasattr(os, "copy_file_range")]


def copy_descriptor(source: int, target: int, size: int) -> int:
    """Copy up to ``size`` bytes from ``source`` to ``target`` in the kernel (``copy_file_range``, a reflink where the
    file system can; else ``sendfile``); return the count. Stops at ``size`` even if the file grew meanwhile (its
    new modification time makes the next stage copy it again)."""
    copied = 0
    while copied < size:
        count = min(size - copied, 1 << 30)
        try:
            count = (os.copy_file_range(source, target, count) if _in_kernel[0]
                     else os.sendfile(target, source, None, count))
        except OSError as error:
            if not _in_kernel[0] or error.errno not in _FALLBACK_ERRORS:
                raise
            _in_kernel[0] = False
            continue
        if count == 0:  # the file shrank while being copied
            break
        copied += count
    return copied
