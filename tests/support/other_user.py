"""Another local user, for the tests of what a second user of this machine can do to trainops (issue 39): a real
account made with ``useradd`` (once per machine: the tests of several processes share it) and commands run as that
user with ``setpriv``. Root only: the tests that need it skip elsewhere."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

RIVAL = "trainops-rival"


def available() -> bool:
    """Whether this process can make and become another user (root, with useradd and setpriv installed)."""
    return os.geteuid() == 0 and bool(shutil.which("useradd")) and bool(shutil.which("setpriv"))


def rival() -> tuple[int, int]:
    """(uid, gid) of the other user, made on first use (a system account: no home, no login shell)."""
    try:
        entry = pwd.getpwnam(RIVAL)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", RIVAL],
                              capture_output=True, text=True, timeout=60)
        if made.returncode not in (0, 9):  # 9: made meanwhile by another test process
            raise RuntimeError(f"useradd {RIVAL} failed: {made.stderr}") from None
        entry = pwd.getpwnam(RIVAL)
    return entry.pw_uid, entry.pw_gid


def as_rival(*argv: str, check: bool = True, **options) -> subprocess.CompletedProcess:
    """Run ``argv`` as the other user (its own uid, gid and no supplementary groups)."""
    uid, gid = rival()
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv],
                          capture_output=True, text=True, timeout=60, check=check, **options)


def shared_directory(prefix: str, mode: int = 0o777) -> Path:
    """A new directory in the system's temporary directory that the other user can reach and, with the default
    mode, write (as a shared team or scratch directory is); the caller removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(mode)
    return path
