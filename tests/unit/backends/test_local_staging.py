"""Unit tests of local data staging: names, manifest skips, temporary files, interruption, refusals, the step."""

from __future__ import annotations

import ctypes
import fcntl
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.failing_copy import failing_copy, raising
from support.staging_files import listing, make_tree, recorded_files, staged_files

from trainops.backends.hostfs import stage_sources
from trainops.backends.hostfs.stage_manifest import MANIFEST_VERSION
from trainops.backends.hostfs.stage_names import (
    JOURNAL_NAME,
    MANIFEST_NAME,
    is_temporary_name,
    printable_name,
    refusal_reason,
)
from trainops.backends.hostfs.staging import stage_tree
from trainops.backends.sagemaker.fsx_paths import parse_fsx_destination
from trainops.errors import JobFailed, SpecError
from trainops.steps.stage import stage

REPOSITORY = Path(__file__).resolve().parents[3]


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    source = tmp_path / "source"
    source.mkdir()
    return source, tmp_path / "destination", make_tree(source)


# --- names -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "/etc/x", "a/../../x", "a\nb", "a/./b", "a//b", "", "..", "x/..",
                                  "tab\there", "esc\x1b[31m", "c1\x9bx", "nul\x00", ".trainops-stage.json",
                                  "sub/.trainops-stage-1-2.tmp", "n" * 256, "a/" + "\u00e9" * 128 + "/b"])
def test_hostile_names_are_refused_with_a_reason(name):
    assert refusal_reason(name)


@pytest.mark.parametrize("name", ["a", "a/b/c.bin", "with space/ünïcode.txt", "back\\slash", "..hidden", "a/.x",
                                  "dir/marker/", "n" * 255])
def test_ordinary_names_are_accepted(name):
    assert refusal_reason(name) is None


def test_printable_name_escapes_control_characters_and_undecodable_bytes():
    assert printable_name("a\nb") == "a\\nb"
    assert printable_name("\x1b[31mred") == "\\x1b[31mred"
    assert printable_name(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\\xe9"
    assert "\n" not in printable_name("x\ny\rz")


# --- copying, skipping, re-copying ---------------------------------------------------------------------------------


def test_first_stage_copies_every_file_and_a_rerun_skips_them_all(tree):
    source, destination, contents = tree
    first = stage_tree(str(source), str(destination), workers=3)
    assert first.ok and first.files_copied == len(contents) and first.files_skipped == 0
    assert first.bytes_copied == sum(len(data) for data in contents.values())
    assert staged_files(destination) == contents
    second = stage_tree(str(source), str(destination), workers=3)
    assert (second.files_copied, second.files_skipped, second.bytes_copied) == (0, len(contents), 0)
    assert second.bytes_skipped == first.bytes_copied


def test_a_changed_source_file_is_copied_again_and_only_it(tree):
    source, destination, contents = tree
    stage_tree(str(source), str(destination))
    changed = "shard-1/deep/sample-1.bin"
    new_data = b"x" * len(contents[changed])  # same size: only the modification time tells
    (source / changed).write_bytes(new_data)
    stat_before = (source / changed).stat()
    os.utime(source / changed, ns=(stat_before.st_atime_ns, stat_before.st_mtime_ns + 1_000_000_000))
    report = stage_tree(str(source), str(destination))
    assert report.files_copied == 1 and report.files_skipped == len(contents) - 1
    assert (destination / changed).read_bytes() == new_data


def test_a_staged_copy_edited_or_deleted_in_the_destination_is_staged_again(tree):
    source, destination, contents = tree
    stage_tree(str(source), str(destination))
    (destination / "top-0.bin").write_bytes(b"tampered")
    (destination / "top-3.bin").unlink()
    report = stage_tree(str(source), str(destination))
    assert report.files_copied == 2
    assert staged_files(destination) == contents


def test_copies_keep_the_source_modification_time_and_permissions(tree):
    source, destination, _ = tree
    (source / "top-0.bin").chmod(0o600)
    stage_tree(str(source), str(destination))
    assert (destination / "top-0.bin").stat().st_mtime_ns == (source / "top-0.bin").stat().st_mtime_ns
    assert (destination / "top-0.bin").stat().st_mode & 0o777 == 0o600


def test_an_unreadable_manifest_means_copy_everything_again(tree):
    source, destination, contents = tree
    stage_tree(str(source), str(destination))
    (destination / MANIFEST_NAME).write_text("{not json")
    report = stage_tree(str(source), str(destination))
    assert report.files_copied == len(contents)
    assert any("not valid JSON" in note for note in report.notes)
    assert json.loads((destination / MANIFEST_NAME).read_text())["version"] == MANIFEST_VERSION


def test_a_manifest_of_another_format_or_malformed_is_not_trusted(tree):
    """Manifests of other versions (the earlier formats included) and malformed ones mean "copy everything again",
    with a note; the entries are name -> [size, fingerprint, staged mtime]."""
    source, destination, contents = tree
    assert stage_tree(str(source), str(destination)).files_copied == len(contents)
    document = json.loads((destination / MANIFEST_NAME).read_text())
    assert document["version"] == MANIFEST_VERSION == 4
    files = recorded_files(destination)
    assert sorted(files) == sorted(contents) == sorted(document["files"])
    earlier = {"version": 3, "source": document["source"], "names": "\n".join(files)}
    (destination / MANIFEST_NAME).write_text(json.dumps(earlier))
    rerun = stage_tree(str(source), str(destination))
    assert rerun.files_copied == len(contents) and any("unknown format" in note for note in rerun.notes)
    name = sorted(files)[0]
    for broken in ({"files": []}, {"files": {name: [1, 2]}}, {"files": {name: [1.5, 1, 1]}},
                   {"files": {name: ["1", 1, 1]}}):
        (destination / MANIFEST_NAME).write_text(json.dumps({**document, **broken}))
        again = stage_tree(str(source), str(destination))
        assert again.files_copied == len(contents) and any("malformed" in note for note in again.notes), broken


def test_a_manifest_written_for_another_source_is_not_trusted(tree, tmp_path):
    source, destination, contents = tree
    other = tmp_path / "other"
    other.mkdir()
    (other / "top-0.bin").write_bytes(b"other")
    stage_tree(str(other), str(destination))
    report = stage_tree(str(source), str(destination))
    assert report.files_copied == len(contents)
    assert any("last staged from" in note for note in report.notes)


def test_file_uri_sources_and_destinations_work(tree):
    source, destination, contents = tree
    report = stage_tree(source.as_uri(), destination.as_uri())
    assert report.ok and staged_files(destination) == contents


def test_the_same_source_spelled_differently_is_still_skipped(tree, monkeypatch):
    source, destination, contents = tree
    stage_tree(source.as_uri(), str(destination))
    monkeypatch.chdir(source.parent)
    again = stage_tree("./source/", str(destination))
    assert (again.files_copied, again.files_skipped, again.notes) == (0, len(contents), [])


# --- temporary file and rename -----------------------------------------------------------------------------------


def test_each_file_is_written_to_a_temporary_name_in_its_directory_then_renamed(tree, monkeypatch):
    source, destination, contents = tree
    seen = []
    original = stage_sources.copy_descriptor

    def observing(source_descriptor, target, size):
        written_to = Path(os.readlink(f"/proc/self/fd/{target}"))
        seen.append(written_to)
        final = written_to.parent / [name for name in contents if len(contents[name]) == size][0].rpartition("/")[2]
        assert is_temporary_name(written_to.name)
        assert not final.exists()  # the final name appears only with the rename, complete
        return original(source_descriptor, target, size)

    monkeypatch.setattr(stage_sources, "copy_descriptor", observing)
    report = stage_tree(str(source), str(destination), workers=1)
    assert report.ok and len(seen) == len(contents)
    assert {path.parent for path in seen} == {(destination / name).parent for name in contents}
    assert not any(is_temporary_name(Path(name).name) for name in listing(destination))
    assert not (destination / JOURNAL_NAME).exists()


def test_an_exception_mid_stage_leaves_no_partial_file_and_a_rerun_completes(tree, monkeypatch):
    source, destination, contents = tree
    original = stage_sources.copy_descriptor
    # A partial file, then the crash.
    monkeypatch.setattr(stage_sources, "copy_descriptor", failing_copy(3, raising("simulated crash")))
    with pytest.raises(RuntimeError, match="simulated crash"):
        stage_tree(str(source), str(destination), workers=1)
    partial = staged_files(destination)
    assert 0 < len(partial) < len(contents)
    assert all(contents[name] == data for name, data in partial.items())  # every final name holds a whole file
    assert not (destination / JOURNAL_NAME).exists()
    recorded = recorded_files(destination)
    assert set(recorded) == set(partial)  # the manifest keeps the completed copies
    monkeypatch.setattr(stage_sources, "copy_descriptor", original)
    rerun = stage_tree(str(source), str(destination))
    assert rerun.ok and rerun.files_skipped == len(partial) and rerun.files_copied == len(contents) - len(partial)
    assert staged_files(destination) == contents


def test_a_killed_stage_leaves_only_temporary_files_which_the_next_run_removes(tree):
    source, destination, contents = tree
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPOSITORY / "tests")!r})
        from support.failing_copy import failing_copy, install, killed
        from trainops.backends.hostfs.staging import stage_tree
        install(failing_copy(3, killed))
        stage_tree({str(source)!r}, {str(destination)!r}, workers=1)
    """)
    completed = subprocess.run([sys.executable, "-c", script], cwd=REPOSITORY, timeout=60)
    assert completed.returncode == -signal.SIGKILL
    leftovers = [name for name in listing(destination) if is_temporary_name(Path(name).name)]
    assert len(leftovers) == 1 and (destination / JOURNAL_NAME).exists()
    finals = {name: data for name, data in staged_files(destination).items()
              if not is_temporary_name(Path(name).name) and name != JOURNAL_NAME}
    assert len(finals) == 2 and all(contents[name] == data for name, data in finals.items())
    rerun = stage_tree(str(source), str(destination))
    assert rerun.ok and any("removed 1 temporary" in note for note in rerun.notes)
    assert staged_files(destination) == contents


# --- hostile local trees --------------------------------------------------------------------------------------------


def test_links_out_of_the_tree_odd_names_and_special_files_are_refused_and_nothing_escapes(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    source = tmp_path / "source"
    (source / "inner").mkdir(parents=True)
    (source / "inner" / "real.txt").write_text("real")
    (source / "up").symlink_to("../outside/secret.txt")  # relative link climbing out with '..'
    (source / "absolute").symlink_to(outside / "secret.txt")  # absolute link out
    (source / "outside-dir").symlink_to(outside)  # a directory out
    (source / "dangling").symlink_to(source / "missing")
    (source / "inner" / "loop").symlink_to(source)  # a directory loop
    (source / "new\nline.txt").write_text("newline")
    os.mkfifo(source / "pipe")
    (source / "inner-link").symlink_to("inner/real.txt")  # inside the tree: fine
    destination = tmp_path / "destination"
    before = listing(tmp_path)
    report = stage_tree(str(source), str(destination))
    refused = {item.name: item.reason for item in report.refused}
    assert set(refused) == {"up", "absolute", "outside-dir", "dangling", "inner/loop", "new\nline.txt", "pipe"}
    assert "outside the source" in refused["up"] and "outside the source" in refused["absolute"]
    assert "control character" in refused["new\nline.txt"]
    assert not report.ok and not report.failed
    assert staged_files(destination) == {"inner/real.txt": b"real", "inner-link": b"real"}
    assert listing(tmp_path) - before == {"destination"} | {f"destination/{name}" for name in
                                                            ("inner", "inner/real.txt", "inner-link", MANIFEST_NAME)}
    assert (outside / "secret.txt").read_text() == "secret"


def test_a_link_in_the_destination_is_never_written_through(tree, tmp_path):
    source, destination, contents = tree
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    destination.mkdir()
    (destination / "shard-0").symlink_to(elsewhere)
    report = stage_tree(str(source), str(destination))
    failed = {item.name for item in report.failed}
    assert failed == {name for name in contents if name.startswith("shard-0/")}
    assert all("symbolic link" in item.reason for item in report.failed)
    assert list(elsewhere.iterdir()) == []


def test_a_source_directory_swapped_for_a_link_while_listing_is_not_read_through(tmp_path, monkeypatch):
    """The directory is checked when its parent is listed, then replaced by a link to a directory outside before
    it is opened itself: opened relative to its parent with O_NOFOLLOW, it is refused instead of read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "data.txt").write_text("data")
    (source / "top.txt").write_text("top")
    original = stage_sources.LocalSource._open

    def swapping(self, index):
        if self.directories[index][0] == "sub" and (source / "sub").is_dir() and not (source / "sub").is_symlink():
            (source / "sub").rename(tmp_path / "moved-away")
            (source / "sub").symlink_to(outside)
        return original(self, index)

    monkeypatch.setattr(stage_sources.LocalSource, "_open", swapping)
    destination = tmp_path / "destination"
    report = stage_tree(str(source), str(destination))
    assert not report.ok
    assert [item.name for item in report.refused] == ["sub"]
    assert "cannot read the directory" in report.refused[0].reason
    assert staged_files(destination) == {"top.txt": b"top"}


def test_a_source_directory_swapped_after_listing_fails_its_files(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "data.txt").write_text("secret")
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "data.txt").write_text("data")
    original = stage_sources.LocalSource.list_files

    def list_then_swap(self):
        listed = original(self)
        (source / "sub").rename(tmp_path / "moved-away")
        (source / "sub").symlink_to(outside / "sub")
        return listed

    monkeypatch.setattr(stage_sources.LocalSource, "list_files", list_then_swap)
    destination = tmp_path / "destination"
    report = stage_tree(str(source), str(destination), workers=1)
    assert [item.name for item in report.failed] == ["sub/data.txt"]
    assert "symbolic link" in report.failed[0].reason
    assert staged_files(destination) == {}


def test_a_source_file_swapped_after_listing_is_not_read_and_leaves_no_temporary(tmp_path, monkeypatch):
    """A file turned into a link, and a file replaced by another (a new inode), between listing and copying: each
    fails with its reason, nothing of either is written, the file beside them is staged."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    source = tmp_path / "source"
    source.mkdir()
    for name in ("linked.txt", "replaced.txt", "kept.txt"):
        (source / name).write_text(name)
    original = stage_sources.LocalSource.list_files

    def list_then_swap(self):
        listed = original(self)
        (source / "linked.txt").unlink()
        (source / "linked.txt").symlink_to(outside)
        (source / "replaced.txt").rename(tmp_path / "old.txt")
        (source / "replaced.txt").write_text("another file")
        return listed

    monkeypatch.setattr(stage_sources.LocalSource, "list_files", list_then_swap)
    destination = tmp_path / "destination"
    report = stage_tree(str(source), str(destination), workers=1)
    reasons = {item.name: item.reason for item in report.failed}
    assert reasons == {"linked.txt": "it became a symbolic link after it was listed",
                       "replaced.txt": "it was replaced after it was listed; stage again"}
    assert staged_files(destination) == {"kept.txt": b"kept.txt"}
    assert not [name for name in os.listdir(destination) if is_temporary_name(name)]


def exchange(first: Path, second: Path) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE): no moment where either name is missing."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_cwd, rename_exchange = -100, 2
    if libc.renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), rename_exchange) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(first))


def test_a_destination_directory_swapped_for_a_link_mid_copy_sends_nothing_there(tree, tmp_path, monkeypatch):
    """After the first copy, every destination directory is replaced by a link to a directory outside (the issue's
    run sent ~97,000 of 100,000 files there): copies go on only into the directories staging created and checked.
    The swap is made once and atomically (rename exchange)."""
    source, destination, contents = tree
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)  # the same shape as the destination, ready to receive its files
    original = stage_sources.copy_descriptor

    def swap_then_copy(source_descriptor, target, size):
        try:
            (tmp_path / "swap-claimed").mkdir()
        except FileExistsError:
            pass
        else:
            for directory in ("shard-0", "shard-1"):
                link = destination / f"{directory}-link"
                link.symlink_to(elsewhere)
                exchange(link, destination / directory)  # the link takes the directory's name in one step
                link.rename(tmp_path / f"moved-{directory}")  # the real directory, parked outside
        return original(source_descriptor, target, size)

    monkeypatch.setattr(stage_sources, "copy_descriptor", swap_then_copy)
    report = stage_tree(str(source), str(destination))
    assert [path for path in elsewhere.rglob("*") if not path.is_dir()] == []
    assert report.files_copied + len(report.failed) == len(contents)
    assert all("symbolic link" in item.reason or "replaced" in item.reason for item in report.failed), \
        report.failed


def remove_deep_tree(path: Path) -> None:
    """Remove a tree of any depth without recursion (Python 3.11's shutil.rmtree recurses, and pytest's clean-up of
    old temporary directories would hit RecursionError on what this test leaves)."""
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    stack = [(parent, ""), (os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent),
                            path.name)]
    while len(stack) > 1:
        descriptor, name = stack[-1]
        with os.scandir(descriptor) as entries:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        below = next((entry for entry, is_directory in listed if is_directory), None)
        for entry, is_directory in listed:
            if not is_directory:
                os.unlink(entry, dir_fd=descriptor)
        if below is not None:
            stack.append((os.open(below, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=descriptor), below))
        else:
            stack.pop()
            os.close(descriptor)
            os.rmdir(name, dir_fd=stack[-1][0])
    os.close(parent)


@pytest.fixture
def deep_tmp(tmp_path):
    yield tmp_path
    for name in ("source", "destination"):
        if (tmp_path / name).exists():
            remove_deep_tree(tmp_path / name)


def test_a_source_tree_1200_directories_deep_is_staged(deep_tmp):
    """A recursive walk raised RecursionError and staged nothing; the names here are also longer than PATH_MAX
    taken together, which only descriptor-relative access can reach."""
    tmp_path = deep_tmp
    source = tmp_path / "source"
    level = "level-0123456789"
    descriptor = os.open(source.parent, os.O_RDONLY | os.O_DIRECTORY)
    os.mkdir("source", dir_fd=descriptor)
    for depth in range(1200):
        following = os.open("source" if depth == 0 else level, os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = following
        os.mkdir(level, dir_fd=descriptor)
        if depth % 100 == 0:
            with os.fdopen(os.open(f"file-{depth}.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=descriptor),
                           "w") as handle:
                handle.write(str(depth))
    os.close(descriptor)
    destination = tmp_path / "destination"
    report = stage_tree(str(source), str(destination), workers=2)
    assert report.ok and report.files_copied == 12, report.problem_lines()[:3]
    rerun = stage_tree(str(source), str(destination), workers=2)
    assert rerun.ok and rerun.files_skipped == 12 and rerun.files_copied == 0
    names = recorded_files(destination)
    assert max(len(name) for name in names) > 4096


def test_refused_and_failed_lists_are_capped_in_the_dict_but_counted_exactly(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for index in range(130):
        (source / f"bad\n{index}").write_text("x")
    report = stage_tree(str(source), str(tmp_path / "destination"))
    as_dict = json.loads(json.dumps(report.to_dict()))
    assert as_dict["refused_count"] == 130 and len(as_dict["refused"]) == 100
    assert all("\n" not in entry["name"] for entry in as_dict["refused"])


# --- files gone from the source -----------------------------------------------------------------------------------


def test_files_gone_from_the_source_are_left_and_listed_unless_delete(tree):
    source, destination, contents = tree
    stage_tree(str(source), str(destination))
    (destination / "not-ours.txt").write_text("someone else's")
    (source / "top-0.bin").unlink()
    kept = stage_tree(str(source), str(destination))
    assert kept.stale == ["top-0.bin"] and (destination / "top-0.bin").exists()
    removed = stage_tree(str(source), str(destination), delete=True)
    assert removed.deleted == ["top-0.bin"] and not (destination / "top-0.bin").exists()
    assert (destination / "not-ours.txt").read_text() == "someone else's"  # never staged: never deleted
    assert stage_tree(str(source), str(destination)).stale == []


# --- bad input, locking, progress -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["missing", "file", "inside", "same", "s3-destination", "fsx-destination", "workers",
                                  "scheme"])
def test_bad_input_raises_spec_error_naming_the_field(tree, case):
    source, destination, _ = tree
    arguments = {
        "missing": (str(source / "nope"), str(destination), {}, "source"),
        "file": (str(source / "top-0.bin"), str(destination), {}, "source"),
        "inside": (str(source), str(source / "staged"), {}, "destination"),
        "same": (str(source), str(source), {}, "destination"),
        "s3-destination": (str(source), "s3://bucket/x", {}, "destination"),
        "fsx-destination": (str(source), "fsx://fs-0123456789abcdef0/x", {}, "backend='sagemaker'"),
        "workers": (str(source), str(destination), {"workers": 0}, "workers"),
        "scheme": ("gs://bucket/x", str(destination), {}, "source"),
    }[case]
    with pytest.raises(SpecError, match=arguments[3]):
        stage_tree(arguments[0], arguments[1], **arguments[2])


def test_a_second_stage_into_the_same_destination_fails_while_one_runs(tree):
    source, destination, _ = tree
    destination.mkdir()
    holder = os.open(destination, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(JobFailed, match="another stage"):
            stage_tree(str(source), str(destination))
    finally:
        os.close(holder)


def test_progress_bar_is_drawn_only_when_asked_or_on_a_terminal(tree, tmp_path):
    source, destination, _ = tree
    drawn = io.StringIO()
    stage_tree(str(source), str(destination), progress=True, stream=drawn)
    assert "\r[" in drawn.getvalue() and "files" in drawn.getvalue()
    silent = io.StringIO()  # not a terminal
    stage_tree(str(source), str(tmp_path / "second"), stream=silent)
    assert silent.getvalue() == ""


# --- the stage step ---------------------------------------------------------------------------------------------------


def test_local_step_returns_a_json_dict_and_is_strict_about_refusals(tree):
    source, destination, contents = tree
    result = stage(str(source), str(destination), workers=2)
    assert json.loads(json.dumps(result))["files_copied"] == len(contents)
    assert result["summary"].startswith(f"staged {source} -> {destination}: {len(contents)} files copied")
    (source / "bad\nname").write_text("x")
    with pytest.raises(JobFailed, match="refused bad\\\\nname"):
        stage(str(source), str(destination))
    assert stage(str(source), str(destination), strict=False)["refused_count"] == 1


@pytest.mark.parametrize("backend, options, field", [("gcp", {}, "backend"), ("local", {"colour": 1}, "colour"),
                                                     ("local", {"s3_prefix": "s3://b/p"}, "s3_prefix")])
def test_step_rejects_unknown_backends_and_options(tree, backend, options, field):
    source, destination, _ = tree
    with pytest.raises(SpecError, match=field):
        stage(str(source), str(destination), backend=backend, **options)


@pytest.mark.parametrize("destination, expected", [
    ("fsx://fs-0123456789abcdef0/data/train", ("fs-0123456789abcdef0", "/data/train")),
    ("fsx://fs-0123456789abcdef0/data/train/", ("fs-0123456789abcdef0", "/data/train")),
    ("fsx://fs-0123456789abcdef0", ("fs-0123456789abcdef0", "/")),
    ("fsx://fs-01234567/", ("fs-01234567", "/")),
])
def test_fsx_destinations_parse(destination, expected):
    assert parse_fsx_destination(destination) == expected


@pytest.mark.parametrize("destination, message", [
    ("fsx://FS-0123456789ABCDEF0/x", "lower case"), ("fsx://fs-123/x", "not an FSx file system id"),
    ("fsx:///x", "no file system id"), ("fsx://fs-0123456789abcdef0/a/../b", "plain absolute path"),
    ("fsx://fs-0123456789abcdef0/a//b", "plain absolute path"), ("fsx://fs-0123456789abcdef0/a?b=1", "query"),
    ("fsx://fs-0123456789abcdef0/a\nb", "control character"), ("/mnt/fsx", "not an fsx:// destination"),
])
def test_bad_fsx_destinations_are_refused_with_the_fix(destination, message):
    with pytest.raises(SpecError, match=message) as raised:
        parse_fsx_destination(destination)
    assert "fsx://fs-0123456789abcdef0/path/in/filesystem" in str(raised.value)


def test_sagemaker_step_calls_the_fsx_staging_with_the_parsed_destination(monkeypatch):
    from trainops.backends.sagemaker import fsx

    calls = []

    class Report:
        def to_dict(self):
            return {"directory_path": "/abcdefgh/data/train"}

    def fake_stage(factory, **arguments):
        calls.append(arguments)
        return Report()

    monkeypatch.setattr(fsx, "stage", fake_stage)
    result = stage("s3://bucket/train", "fsx://fs-0123456789abcdef0/data/train", backend="sagemaker",
                   client_factory=lambda service: None, poll_seconds=1, workers=8)
    assert result == {"directory_path": "/abcdefgh/data/train"}
    assert calls[0]["file_system_id"] == "fs-0123456789abcdef0"
    assert calls[0]["file_system_path"] == "/data/train" and calls[0]["s3_uri"] == "s3://bucket/train"
    assert calls[0]["poll_seconds"] == 1
    stage(None, "fsx://fs-0123456789abcdef0/d", backend="sagemaker", s3_prefix="s3://bucket/d",
          client_factory=lambda service: None)
    assert calls[1]["s3_uri"] == "s3://bucket/d"


@pytest.mark.parametrize("source, options, field", [
    ("/local/data", {}, "source"),
    ("s3://bucket/a", {"s3_prefix": "s3://bucket/b"}, "s3_prefix"),
    ("s3://bucket/a", {"delete": True}, "delete"),
    (None, {}, "source"),
])
def test_sagemaker_step_rejects_sources_fsx_cannot_import(source, options, field):
    with pytest.raises(SpecError, match=field):
        stage(source, "fsx://fs-0123456789abcdef0/d", backend="sagemaker", client_factory=lambda service: None,
              **options)


def test_stale_names_at_every_level_and_directories_linked_inside_the_source(tmp_path):
    """What is copied, skipped, refused and found stale at the top, inside a subtree and for a whole directory
    gone; the files of a directory reached through a link inside the source are copied."""
    source = tmp_path / "source"
    for index in range(12):
        (source / f"dir-{index % 4}" / "deep").mkdir(parents=True, exist_ok=True)
        (source / f"dir-{index % 4}" / "deep" / f"f{index}.bin").write_bytes(b"x" * index)
    (source / "top.bin").write_bytes(b"top")
    (source / "gone-top.bin").write_bytes(b"soon gone")
    (source / "linked").symlink_to(source / "dir-1")
    (source / "dir-2" / "bad\nname").write_bytes(b"refused")
    destination = tmp_path / "destination"
    first = stage_tree(str(source), str(destination))
    (source / "gone-top.bin").unlink()
    (source / "dir-0" / "deep" / "f0.bin").unlink()
    for path in (source / "dir-3" / "deep").iterdir():
        path.unlink()
    (source / "dir-3" / "deep").rmdir()
    (source / "dir-3").rmdir()
    (source / "dir-1" / "deep" / "f1.bin").write_bytes(b"changed")
    second = stage_tree(str(source), str(destination))
    assert staged_files(destination)["linked/deep/f5.bin"] == b"x" * 5
    assert (first.files_found, first.files_copied, [item.name for item in first.refused]) == (17, 17,
                                                                                              ["dir-2/bad\nname"])
    assert sorted(second.stale) == sorted(["gone-top.bin", "dir-0/deep/f0.bin", "dir-3/deep/f3.bin",
                                           "dir-3/deep/f7.bin", "dir-3/deep/f11.bin"])
    assert second.files_copied == 2  # f1.bin, changed, and its linked twin


def test_a_tree_with_one_top_directory_reports_stale_names_at_every_level(tmp_path):
    """``data/train/part-*``: copied, skipped and stale names (at every level)."""
    source = tmp_path / "source"
    for index in range(24):
        part = source / "data" / "train" / f"part-{index % 8}"
        part.mkdir(parents=True, exist_ok=True)
        (part / f"f{index}.bin").write_bytes(b"x" * index)
    (source / "data" / "README").write_bytes(b"about")
    (source / "data" / "train" / "index.csv").write_bytes(b"a,b")
    destination = tmp_path / "destination"
    stage_tree(str(source), str(destination))
    (source / "data" / "README").unlink()
    (source / "data" / "train" / "index.csv").unlink()
    (source / "data" / "train" / "part-3" / "f11.bin").unlink()
    (source / "data" / "train" / "part-5" / "f5.bin").write_bytes(b"changed")
    second = stage_tree(str(source), str(destination))
    assert (second.files_found, second.files_copied, second.files_skipped, sorted(second.stale)) == (
        23, 1, 22, ["data/README", "data/train/index.csv", "data/train/part-3/f11.bin"])


def test_a_staged_file_that_became_a_directory_is_stale_once(tmp_path):
    """A top-level file staged earlier and now a directory of the source: its old name is stale once (a split of the
    listing over two processes used to report it twice; a local tree is now listed by one, whatever ``workers``
    says); a re-stage that sees every name of the manifest finds nothing stale."""
    source = tmp_path / "source"
    for index in range(4):
        (source / f"dir-{index}").mkdir(parents=True)
        (source / f"dir-{index}" / "data.bin").write_bytes(b"x" * index)
    (source / "became-a-directory").write_bytes(b"file")
    destination = tmp_path / "destination"
    first = stage_tree(str(source), str(destination), workers=2)
    unchanged = stage_tree(str(source), str(destination), workers=2)
    (source / "became-a-directory").unlink()
    (source / "became-a-directory").mkdir()
    (source / "became-a-directory" / "inside.bin").write_bytes(b"inside")
    (source / "dir-2" / "data.bin").unlink()
    second = stage_tree(str(source), str(destination), workers=2)
    results = [(report.files_found, report.files_copied, report.files_skipped, report.stale,
                [(item.name, item.reason) for item in report.failed]) for report in (first, unchanged, second)]
    assert results[0] == (5, 5, 0, [], [])
    assert results[1] == (5, 0, 5, [], [])
    assert results[2][3] == ["became-a-directory", "dir-2/data.bin"]


def test_a_copy_that_copy_file_range_refuses_falls_back_to_sendfile(tree, monkeypatch):
    """Another file system (EXDEV) or an old kernel: the first refusal switches this process to sendfile."""
    import errno

    source, destination, contents = tree

    def refuse(*arguments):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    monkeypatch.setattr(stage_sources, "_in_kernel", [True])
    report = stage_tree(str(source), str(destination))
    assert report.ok and report.files_copied == len(contents) and staged_files(destination) == contents
    assert stage_sources._in_kernel == [False]
