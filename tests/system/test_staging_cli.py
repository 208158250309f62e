"""`trainops stage` as a user runs it (a new process): exit codes 0 / 1 / 2, what it prints, --delete, --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.system


def run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", "stage", *arguments], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    (root / "images").mkdir(parents=True)
    for index in range(5):
        (root / "images" / f"{index}.png").write_bytes(bytes([index]) * 2048)
    (root / "labels.csv").write_text("0,1,2,3,4\n")
    return root


def test_help_describes_the_command_and_its_exit_codes():
    completed = run_cli("--help")
    assert completed.returncode == 0
    for text in ("SRC", "DST", "--workers", "--quiet", "--delete", "Exit codes"):
        assert text in completed.stdout


def test_a_clean_stage_exits_0_with_a_summary_and_a_rerun_skips(source, tmp_path):
    destination = tmp_path / "staged"
    first = run_cli(str(source), str(destination), "--workers", "2")
    assert first.returncode == 0, first.stderr
    assert "6 files copied" in first.stdout and "0 refused" in first.stdout
    assert (destination / "images" / "3.png").read_bytes() == bytes([3]) * 2048
    second = run_cli(str(source), str(destination), "--json")
    report = json.loads(second.stdout)
    assert second.returncode == 0 and report["files_skipped"] == 6 and report["files_copied"] == 0


def test_quiet_prints_nothing_on_success(source, tmp_path):
    completed = run_cli(str(source), str(tmp_path / "staged"), "--quiet")
    assert (completed.returncode, completed.stdout, completed.stderr) == (0, "", "")


def test_refused_files_make_it_exit_1_and_each_is_printed_even_when_quiet(source, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (source / "leak").symlink_to(outside)
    (source / "two\nlines").write_text("x")
    completed = run_cli(str(source), str(tmp_path / "staged"), "--quiet")
    assert completed.returncode == 1
    assert "trainops stage: refused leak: symbolic link pointing outside the source tree" in completed.stderr
    assert "trainops stage: refused two\\nlines: name contains the control character" in completed.stderr
    assert not (tmp_path / "staged" / "leak").exists()


@pytest.mark.parametrize("case", ["missing source", "inside", "zero workers", "not a number", "s3 destination"])
def test_bad_input_exits_2_with_a_message_not_a_traceback(source, tmp_path, case):
    arguments = {
        "missing source": [str(tmp_path / "nope"), str(tmp_path / "staged")],
        "inside": [str(source), str(source / "staged")],
        "zero workers": [str(source), str(tmp_path / "staged"), "--workers", "0"],
        "not a number": [str(source), str(tmp_path / "staged"), "--workers", "many"],
        "s3 destination": [str(source), "s3://bucket/prefix"],
    }[case]
    completed = run_cli(*arguments)
    assert completed.returncode == 2
    assert completed.stderr.strip() and "Traceback" not in completed.stderr
    assert not (source / "staged").exists()


def test_delete_removes_only_files_an_earlier_stage_wrote(source, tmp_path):
    destination = tmp_path / "staged"
    assert run_cli(str(source), str(destination)).returncode == 0
    (source / "images" / "4.png").unlink()
    (destination / "notes.txt").write_text("mine")
    kept = run_cli(str(source), str(destination))
    assert kept.returncode == 0 and "left in place" in kept.stdout
    assert (destination / "images" / "4.png").exists()
    deleted = run_cli(str(source), str(destination), "--delete", "--json")
    assert json.loads(deleted.stdout)["deleted"] == ["images/4.png"]
    assert not (destination / "images" / "4.png").exists() and (destination / "notes.txt").exists()
    assert sorted(os.listdir(destination / "images")) == ["0.png", "1.png", "2.png", "3.png"]


@pytest.mark.parametrize("workers", [1, 3])
def test_ctrl_c_stops_with_130_leaving_only_whole_files_and_a_rerun_completes(source, tmp_path, workers):
    destination = tmp_path / "staged"
    # The third copy sends SIGINT to the process group, as Ctrl-C in a terminal does, and goes on; the interrupt
    # lands in the main thread of the stage.
    # A shell's foreground job gets SIGINT's default action even where this test runner was started with SIGINT
    # ignored (a background job of a non-interactive shell is), and Python keeps an ignored SIGINT ignored.
    script = textwrap.dedent(f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from support.failing_copy import failing_copy, install, interrupted
        from trainops import cli
        install(failing_copy(3, interrupted, half=False))
        sys.exit(cli.main(["stage", {str(source)!r}, {str(destination)!r}, "--workers", "{workers}"]))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                               start_new_session=True)
    assert completed.returncode == 130, completed.stderr
    assert "interrupted" in completed.stderr
    names = {path.relative_to(destination).as_posix() for path in destination.rglob("*") if path.is_file()}
    assert not any(name.startswith(".trainops-stage-") or "/.trainops-stage-" in name for name in names)
    for name in names - {".trainops-stage.json"}:  # how many got done depends on timing; each one is whole
        assert (destination / name).read_bytes() == (source / name).read_bytes()
    rerun = run_cli(str(source), str(destination))
    assert rerun.returncode == 0 and "0 refused" in rerun.stdout
    assert sorted(os.listdir(destination / "images")) == [f"{index}.png" for index in range(5)]
