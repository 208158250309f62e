"""Issue 48, class 9: the suite passes wherever a user clones it. The tests that run project code as another user
(the useradd rival under prlimit, user nobody) handed that user the checkout's own path and its venv's
site-packages: from a clone in a directory other users cannot read (a 0700 home, `mktemp -d`) they failed every time
(`No module named 'trainops'`, `Permission denied` on host_init.py) or skipped for want of a Python nobody could run
trainops with. They now give the other user a readable copy (`support.project_copy`). This test copies the working
tree into a new 0700 directory and runs those tests from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import other_user

REPOSITORY = Path(__file__).resolve().parents[2]

#: Every test that runs project code as another user (grep setpriv / other_user in tests/).
OTHER_USER_TESTS = [
    "tests/reliability/test_reliability_limits.py::test_a_process_limit_that_leaves_no_room_for_the_job_is_refused_"
    "when_validated",
    "tests/reliability/test_reliability_limits.py::test_a_host_that_cannot_fork_says_the_process_limit",
    "tests/reliability/test_reliability_host_namespace.py::test_an_unprivileged_user_gets_the_user_namespace_variant_"
    "and_its_daemons_end_with_the_controller",
]

pytestmark = [pytest.mark.system, pytest.mark.skipif(
    not other_user.available() or not os.path.exists(f"/usr/bin/python{sys.version_info.major}."
                                                     f"{sys.version_info.minor}"),
    reason="needs root with useradd and setpriv, and a system Python of this version another user may run")]


def working_tree_files() -> list[str]:
    """The files of the working tree a clone would hold: tracked, and untracked but not ignored (new files)."""
    done = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                          capture_output=True, text=True, timeout=120, cwd=REPOSITORY, check=True)
    return [name for name in done.stdout.split("\0") if name and (REPOSITORY / name).is_file()]


def test_the_tests_that_run_code_as_another_user_pass_from_a_clone_no_other_user_can_read():
    private = Path(tempfile.mkdtemp(prefix="trainops-private-clone-"))  # 0700, as mktemp -d makes it
    try:
        assert private.stat().st_mode & 0o077 == 0
        clone = private / "trainops"
        for name in working_tree_files():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPOSITORY / name, clone / name)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                               *OTHER_USER_TESTS], capture_output=True, text=True, timeout=900, cwd=clone,
                              env={**os.environ, "PYTHONPATH": str(clone)})
        said = done.stdout[-4000:] + done.stderr[-2000:]
        assert done.returncode == 0, said
        assert f"{len(OTHER_USER_TESTS)} passed" in said and "skipped" not in said, said
    finally:
        shutil.rmtree(private, ignore_errors=True)
