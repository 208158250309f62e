"""Issue 24, break 1: a state root someone else controls is refused, and nothing under it is written through a link.

"Another user" is uid 12345 (the tests run as root, which can chown): a user who made `TRAINOPS_HOME` (or its
`jobs/`, `checkpoints/`) first and planted links to files root owns, and a checkpoint for root's run to resume.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from local_breaks import cli, write_job

OTHER_UID = 12345
NAME = "stand-in"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's directory needs root (chown)")


def _plant(home: Path, victims: Path) -> list[Path]:
    """The other user's traps under ``home``: links where trainops writes its lock files, host log and status, and
    a checkpoint. Returns the victims (files the links lead to)."""
    victims.mkdir()
    targets = []
    job = home / "jobs" / NAME
    (job / "logs").mkdir(parents=True)
    for link, name in ((job / ".controller.lock", "lock-victim"), (job / "logs" / "algo-1.log", "log-victim"),
                       (job / "status.json", "status-victim"), (home / "checkpoints" / f".{NAME}.lock", "ck-victim")):
        target = victims / name
        target.write_text("precious\n")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        targets.append(target)
    (home / "checkpoints" / NAME).mkdir(parents=True, exist_ok=True)
    (home / "checkpoints" / NAME / "planted.pt").write_text("the other user's code")
    return targets


def _chown_tree(path: Path, uid: int) -> None:
    os.lchown(path, uid, uid)
    for directory, names, files in os.walk(path):
        for name in names + files:
            os.lchown(os.path.join(directory, name), uid, uid)


@pytest.mark.parametrize("case", ["root-of-another-user", "world-writable-root", "jobs-of-another-user",
                                  "checkpoints-of-another-user", "group-writable-jobs", "root-is-a-link"])
def test_a_state_root_someone_else_controls_is_refused_and_nothing_is_written(tmp_path, case):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    victims = _plant(home, tmp_path / "victims")
    if case == "root-of-another-user":
        _chown_tree(home, OTHER_UID)
    elif case == "world-writable-root":
        home.chmod(0o777)
    elif case == "jobs-of-another-user":
        _chown_tree(home / "jobs", OTHER_UID)
    elif case == "checkpoints-of-another-user":
        _chown_tree(home / "checkpoints", OTHER_UID)
    elif case == "group-writable-jobs":
        (home / "jobs").chmod(0o770)
    elif case == "root-is-a-link":  # TRAINOPS_HOME names a link to the other user's directory
        _chown_tree(home, OTHER_UID)
        (tmp_path / "link").symlink_to(home)
        home = tmp_path / "link"
    spec = write_job(tmp_path)
    result = cli("run", str(spec), "--job-name", NAME, env={"TRAINOPS_HOME": str(home)})
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "TRAINOPS_HOME" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert "mode 0700" in result.stderr and "another user" in result.stderr
    assert "RESUMED" not in result.stdout and "trained" not in result.stdout
    assert [victim.read_text() for victim in victims] == ["precious\n"] * len(victims)


def test_a_work_directory_of_another_user_is_refused_naming_the_option(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, OTHER_UID, OTHER_UID)
    result = cli("run", str(write_job(tmp_path)), "--job-name", NAME, "--workdir", str(work))
    assert result.returncode == 2 and "workdir" in result.stderr and str(work) in result.stderr, result.stderr
    assert not (work / "jobs").exists()


@pytest.mark.parametrize("planted", ["controller-lock", "checkpoint-lock", "status", "host-log", "checkpoint-dir"])
def test_a_link_planted_in_your_own_state_root_is_never_written_through_nor_resumed(tmp_path, planted):
    """Even in a root that passes the checks (a link left by whatever): the link is not followed."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "planted.pt").write_text("someone's code")
    (victim / "file").write_text("precious\n")
    job = home / "jobs" / NAME
    links = {"controller-lock": job / ".controller.lock", "checkpoint-lock": home / "checkpoints" / f".{NAME}.lock",
             "status": job / "status.json", "host-log": job / "logs" / "algo-1.log",
             "checkpoint-dir": home / "checkpoints" / NAME}
    link = links[planted]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim if planted == "checkpoint-dir" else victim / "file")
    if planted == "status":  # a status link makes the name look taken: the run follows or refuses, never writes
        pass
    result = cli("run", str(write_job(tmp_path)), "--job-name", NAME, "--if-exists", "fail",
                 env={"TRAINOPS_HOME": str(home)})
    assert (victim / "file").read_text() == "precious\n"
    assert sorted(os.listdir(victim)) == ["file", "planted.pt"]
    assert "RESUMED" not in result.stdout, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    if planted in ("controller-lock", "checkpoint-lock", "checkpoint-dir", "status"):
        assert result.returncode == 2 and "symbolic link" in result.stderr, (result.stdout, result.stderr)


def test_the_default_state_root_is_the_users_state_directory_created_0700(tmp_path):
    user_home = tmp_path / "user"
    user_home.mkdir()
    result = cli("run", str(write_job(tmp_path)), "--job-name", NAME,
                 env={"HOME": str(user_home)}, unset=("TRAINOPS_HOME", "XDG_STATE_HOME"))
    assert result.returncode == 0, (result.stdout, result.stderr)
    root = user_home / ".local" / "state" / "trainops"
    assert (root / "jobs" / NAME / "status.json").is_file()
    assert not (user_home / ".trainops").exists()
    for directory in (root, root / "jobs", root / "checkpoints"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
