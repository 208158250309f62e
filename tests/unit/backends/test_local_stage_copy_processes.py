"""Copying a local tree with forked processes: what each process copies, errors and deaths in them, the scheduler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.failing_copy import failing_copy, killed, raising

from tests.unit.backends.test_local_staging import listing, recorded_files, single_threaded, staged_files
from trainops.backends.local import stage_sources
from trainops.backends.local.stage_copy import BATCH_FILES
from trainops.backends.local.stage_copy_processes import Units
from trainops.backends.local.stage_names import JOURNAL_NAME, is_temporary_name
from trainops.backends.local.staging import stage_tree
from trainops.errors import JobFailed

REPOSITORY = Path(__file__).resolve().parents[3]


def wide_tree(root: Path, directories: int = 4, per_directory: int = 300) -> dict[str, bytes]:
    """Directories of more files than one batch holds; returns name -> content."""
    contents = {}
    for directory in range(directories):
        (root / f"part-{directory}").mkdir(parents=True)
        for index in range(per_directory):
            name = f"part-{directory}/item-{index:04d}.bin"
            contents[name] = f"{directory}:{index}".encode() * (1 + index % 7)
            (root / name).write_bytes(contents[name])
    return contents


@pytest.fixture
def forking(monkeypatch):
    """Two CPUs and no other thread, so two workers copy in processes."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    single_threaded(monkeypatch)


def no_temporary_files_left(destination: Path) -> bool:
    return not any(is_temporary_name(Path(name).name) for name in listing(destination)) \
        and not (destination / JOURNAL_NAME).exists()


def test_two_workers_copy_in_other_processes_each_in_its_own_directory(tmp_path, forking, monkeypatch):
    """Every file is copied by a forked process (never this one), two processes take part, no directory is copied
    by two processes while another one is left, and the result, the report and the manifest are what one worker
    gives."""
    contents = wide_tree(tmp_path / "source", per_directory=200)
    log = tmp_path / "copies.log"
    original = stage_sources.copy_descriptor

    def logging_copy(source_descriptor, target, size, stop):
        directory = Path(os.readlink(f"/proc/self/fd/{target}")).parent.name
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(descriptor, f"{os.getpid()} {directory}\n".encode())
        os.close(descriptor)
        return original(source_descriptor, target, size, stop)

    monkeypatch.setattr(stage_sources, "copy_descriptor", logging_copy)
    report = stage_tree(str(tmp_path / "source"), str(tmp_path / "two"), workers=2)
    monkeypatch.setattr(stage_sources, "copy_descriptor", original)
    one = stage_tree(str(tmp_path / "source"), str(tmp_path / "one"), workers=1)

    lines = [line.split() for line in log.read_text().splitlines()]
    pids = {pid for pid, _ in lines}
    assert len(lines) == len(contents) and str(os.getpid()) not in pids and len(pids) == 2
    # Each directory was copied by one process only (four directories of 200 files: each process gets two of them
    # together, as one unit, and nothing is left to share).
    by_directory: dict[str, set[str]] = {}
    for pid, directory in lines:
        by_directory.setdefault(directory, set()).add(pid)
    assert all(len(copiers) == 1 for copiers in by_directory.values())
    assert staged_files(tmp_path / "two") == staged_files(tmp_path / "one") == contents
    assert (report.files_found, report.files_copied, report.bytes_copied, report.failed) == \
        (one.files_found, one.files_copied, one.bytes_copied, one.failed)
    assert sorted(recorded_files(tmp_path / "two")) == sorted(contents)
    assert no_temporary_files_left(tmp_path / "two")
    assert stage_tree(str(tmp_path / "source"), str(tmp_path / "two"), workers=2).files_skipped == len(contents)


def test_an_error_in_a_copying_process_is_raised_and_leaves_whole_files_only(tmp_path, forking, monkeypatch):
    """A process whose copy raises: the stage raises that error, every final name holds a whole file and is in the
    manifest, no temporary file or journal is left (the other process was stopped mid-unit), and a re-run completes
    the rest."""
    contents = wide_tree(tmp_path / "source")
    original = stage_sources.copy_descriptor
    # Calls are counted per process: each forked copying process crashes on its own 400th copy.
    monkeypatch.setattr(stage_sources, "copy_descriptor",
                        failing_copy(400, raising("simulated crash in a copying process")))
    with pytest.raises(RuntimeError, match="simulated crash in a copying process"):
        stage_tree(str(tmp_path / "source"), str(tmp_path / "destination"), workers=2)
    partial = staged_files(tmp_path / "destination")
    assert 0 < len(partial) < len(contents)
    assert all(contents[name] == data for name, data in partial.items())
    recorded = set(recorded_files(tmp_path / "destination"))
    assert recorded <= set(partial) and len(recorded) >= 399  # at least the crashing process's completed units
    # Every copy that has its final name is recorded, the other process's too: it was stopped (SIGTERM), finished the
    # file in hand and reported, instead of being killed with up to a unit of copies unrecorded.
    assert recorded == set(partial)
    assert no_temporary_files_left(tmp_path / "destination")
    monkeypatch.setattr(stage_sources, "copy_descriptor", original)
    rerun = stage_tree(str(tmp_path / "source"), str(tmp_path / "destination"), workers=2)
    assert rerun.ok and rerun.files_skipped == len(recorded)
    assert staged_files(tmp_path / "destination") == contents


def test_a_copying_process_that_dies_is_reported_and_its_temporary_file_removed(tmp_path, forking, monkeypatch):
    """A process killed mid-copy (OOM, kill -9) after writing half a file: the stage fails with a clear error
    instead of waiting for it, and its temporary file is removed by the stage."""
    contents = wide_tree(tmp_path / "source")
    original = stage_sources.copy_descriptor
    monkeypatch.setattr(stage_sources, "copy_descriptor", failing_copy(100, killed))
    with pytest.raises(JobFailed, match="a copying process ended without reporting; stage again"):
        stage_tree(str(tmp_path / "source"), str(tmp_path / "destination"), workers=2)
    assert no_temporary_files_left(tmp_path / "destination")
    assert all(contents[name] == data for name, data in staged_files(tmp_path / "destination").items())
    monkeypatch.setattr(stage_sources, "copy_descriptor", original)
    assert stage_tree(str(tmp_path / "source"), str(tmp_path / "destination"), workers=2).ok
    assert staged_files(tmp_path / "destination") == contents


def test_killing_the_stage_kills_its_copying_processes_and_the_next_run_cleans_up(tmp_path):
    """`kill -9` of a staging process: its copying processes die with it (parent-death signal) instead of
    writing on, and the next stage removes the temporary files they left and completes."""
    contents = wide_tree(tmp_path / "source", directories=2, per_directory=600)
    pids = tmp_path / "pids"
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPOSITORY / "tests")!r})
        from support.failing_copy import failing_copy, install, stalled
        from trainops.backends.local.staging import stage_tree
        os.cpu_count = lambda: 2
        def log_pid():
            with open({str(pids)!r}, "a") as log:
                log.write(f"{{os.getpid()}}\\n")
        install(failing_copy(1, log_pid, half=False))  # each copying process says who it is on its first copy,
        install(failing_copy(20, stalled(), from_then_on=True))  # then stalls half-way through its 20th
        stage_tree({str(tmp_path / "source")!r}, {str(tmp_path / "destination")!r}, workers=2)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], cwd=REPOSITORY)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
            time.sleep(0.05)
        copiers = [int(pid) for pid in pids.read_text().split()]
        assert len(copiers) == 2 and process.pid not in copiers
        time.sleep(0.5)  # both are inside a copy now
    finally:
        process.kill()
        process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in copiers):
        time.sleep(0.05)
    assert not any(alive(pid) for pid in copiers)
    leftovers = [name for name in listing(tmp_path / "destination") if is_temporary_name(Path(name).name)]
    assert len(leftovers) == 2 and (tmp_path / "destination" / JOURNAL_NAME).exists()
    rerun = stage_tree(str(tmp_path / "source"), str(tmp_path / "destination"), workers=1)
    assert rerun.ok and any("removed 2 temporary" in note for note in rerun.notes)
    assert staged_files(tmp_path / "destination") == contents


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


# --- the scheduler ----------------------------------------------------------------------------------------------


def batch(directory: str, count: int) -> list:
    return [SimpleNamespace(name=f"{directory}/file-{index}" if directory else f"file-{index}")
            for index in range(count)]


def hand_out(units: Units, order: list[int]) -> list[tuple[int, list[int]]]:
    """Ask for units in the order of process numbers given (cycling) until every process got an empty one."""
    given, done, position = [], set(), 0
    while len(done) < len(set(order)):
        number = order[position % len(order)]
        position += 1
        if number in done:
            continue
        unit = units.next_for(number)
        if not unit:
            done.add(number)
        given.append((number, unit))
    return given


def test_each_process_keeps_to_its_directory_and_every_batch_is_handed_out_once():
    batches = [batch("a", BATCH_FILES)] * 3 + [batch("b", BATCH_FILES)] * 3
    units = Units(batches)
    first = units.next_for(0), units.next_for(1)
    assert first == ([0], [3])  # two processes, two directories
    given = [(0, first[0]), (1, first[1])] + hand_out(units, [0, 1])
    handed = [index for _, unit in given for index in unit]
    assert sorted(handed) == list(range(6))
    for number, unit in given:
        assert all(batches[index][0].name.startswith("a/" if number == 0 else "b/") for index in unit)


def test_small_directories_go_together_up_to_a_batch_of_files():
    batches = [batch(f"d{index}", 10) for index in range(100)]
    units = Units(batches)
    unit = units.next_for(0)
    assert sum(len(batches[index]) for index in unit) >= BATCH_FILES > sum(len(batches[index]) for index in unit[:-1])
    handed = unit + [index for _, unit in hand_out(units, [0, 1]) for index in unit]
    assert sorted(handed) == list(range(100))


def test_when_every_directory_is_started_a_process_joins_the_busiest_one():
    batches = [batch("big", BATCH_FILES)] * 4 + [batch("small", BATCH_FILES)]
    units = Units(batches)
    assert units.next_for(0) == [0] and units.next_for(1) == [4]
    assert units.next_for(1) == [1]  # "small" is done: help in "big" rather than idle
    assert units.next_for(0) == [2] and units.next_for(1) == [3]
    assert units.next_for(0) == [] and units.next_for(1) == []
