"""Files, archives and other users (issue 15, items 6-10): hostile model archives, model directories with links,
concurrent and corrupt registrations, staging races and deep trees, and a port lock directory planted by another
user. Shared by tests/reliability/test_reliability_files.py (which checks the bounds) and bench/reliability.py
(section ``files``, which records the figures).

Every hostile input is built here, at run time: nothing hostile is checked into the repository.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

#: The single-letter links of the realpath-overflow chain (16 levels, as in the published reports).
CHAIN_LINKS = "abcdefghijklmnop"


def _add(bundle: tarfile.TarFile, name: str, kind: bytes, linkname: str = "", data: bytes = b"") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data)
    bundle.addfile(info, io.BytesIO(data) if data else None)


def realpath_overflow_archive(path: Path, destination: Path, victim: str = "victim.txt",
                              payload: bytes = b"written outside the model directory\n") -> Path:
    """A tar.gz on the idea of CVE-2025-4517, to be extracted into ``destination``: it writes ``payload`` to
    ``destination/../../<victim>`` on an extractor that checks members with ``os.path.realpath`` (Python 3.11.7's
    ``data`` filter included).

    How: directories with long names are nested 16 deep, each reached through a one-letter link, so the short name
    ``a/b/.../p`` stands for a path of about 4,000 characters. A link ``L`` with a long name placed there makes the
    expanded path longer than PATH_MAX: ``realpath`` cannot ``lstat`` it, takes it for a plain name and resolves the
    ``..`` after it lexically (inside the directory), while the kernel follows the link (``../`` 16 times, back to
    the top) and then the ``..`` (out of it). A link ``escape`` through ``L`` and a file under ``escape`` finish it.
    """
    destination_length = len(os.path.abspath(destination))
    # Long enough that the chain plus L exceeds PATH_MAX (4096), short enough that the chain alone does not.
    component_length = min(254, (4000 - destination_length) // len(CHAIN_LINKS) - 1)
    long_name = "d" * component_length
    tail_name = "l" * 254
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as bundle:
        prefix = ""
        for letter in CHAIN_LINKS:
            _add(bundle, prefix + long_name, tarfile.DIRTYPE)
            _add(bundle, prefix + letter, tarfile.SYMTYPE, linkname=long_name)
            prefix += letter + "/"
        _add(bundle, prefix + tail_name, tarfile.SYMTYPE, linkname="../" * len(CHAIN_LINKS))
        _add(bundle, "escape", tarfile.SYMTYPE, linkname=prefix + tail_name + "/../..")
        _add(bundle, f"escape/{victim}", tarfile.REGTYPE, data=payload)
    return path


def expansion_bomb_archive(path: Path, expanded_bytes: int, files: int = 1) -> Path:
    """A tar.gz of a few hundred KB that expands to ``expanded_bytes`` of zeros (in ``files`` files)."""
    each = expanded_bytes // files
    chunk = bytes(1024 * 1024)
    with gzip.open(path, "wb", compresslevel=9) as compressed, \
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.GNU_FORMAT) as bundle:
        for number in range(files):
            info = tarfile.TarInfo(f"weights-{number}.bin")
            info.size = each
            bundle.addfile(info, _Zeros(each, chunk))
    return path


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, read without holding them all in memory."""

    def __init__(self, size: int, chunk: bytes):
        self.left, self.chunk = size, chunk

    def readable(self) -> bool:
        return True

    def read(self, count: int = -1) -> bytes:
        count = self.left if count is None or count < 0 else min(count, self.left)
        self.left -= count
        return self.chunk[:count] if count <= len(self.chunk) else bytes(count)


# --- item 6: archives ----------------------------------------------------------------------------------------------

def tar_slip(scratch: Path) -> dict:
    """Extract the realpath-overflow archive the way evaluation does; report whether anything landed outside."""
    import time

    from trainops.backends.local.evaluate import extract_model
    from trainops.errors import SpecError

    destination = scratch / "extract" / "model"
    destination.parent.mkdir(parents=True)
    victim = scratch / "victim.txt"
    victim.write_text("the user's own file\n")
    archive = realpath_overflow_archive(scratch / "model.tar.gz", destination)
    started = time.perf_counter()
    try:
        extract_model(archive, destination)
        refused, message = False, ""
    except SpecError as error:
        refused, message = True, str(error)
    return {"refused": refused, "message": message, "seconds": round(time.perf_counter() - started, 3),
            "victim_overwritten": victim.read_text() != "the user's own file\n",
            "left_in_destination": len(list(destination.rglob("*"))) if destination.exists() else 0}


def expansion_bomb(scratch: Path, expanded_bytes: int = 200 * 1024 * 1024, limit: int = 100 * 1024 * 1024) -> dict:
    """A ~200 KB archive that expands to 200 MiB, extracted under a 100 MiB limit."""
    import time

    from trainops.backends.local.evaluate import extract_model
    from trainops.backends.local.model_archive import LIMIT_VARIABLE
    from trainops.errors import SpecError

    archive = expansion_bomb_archive(scratch / "bomb.tar.gz", expanded_bytes)
    destination = scratch / "model"
    previous = os.environ.get(LIMIT_VARIABLE)
    os.environ[LIMIT_VARIABLE] = str(limit)
    started = time.perf_counter()
    try:
        extract_model(archive, destination)
        refused, message = False, ""
    except SpecError as error:
        refused, message = True, str(error)
    finally:
        if previous is None:
            os.environ.pop(LIMIT_VARIABLE, None)
        else:
            os.environ[LIMIT_VARIABLE] = previous
    written = sum(path.stat().st_size for path in destination.rglob("*") if path.is_file()) \
        if destination.exists() else 0
    return {"archive_bytes": archive.stat().st_size, "expanded_bytes": expanded_bytes, "limit": limit,
            "refused": refused, "message": message, "written_bytes": written,
            "seconds": round(time.perf_counter() - started, 3)}


# --- items 7 and 8: the registry -----------------------------------------------------------------------------------

def registry_links(scratch: Path) -> dict:
    """Register a model directory holding a link to a secret file and one to a directory of secrets."""
    from trainops.backends.local.registry import LocalRegistry
    from trainops.errors import SpecError

    secrets = scratch / "etc"
    secrets.mkdir()
    (secrets / "shadow").write_text("root:hash-of-a-secret\n")
    registry = LocalRegistry(scratch / "registry")
    outcomes = {}
    for label, target in (("file", secrets / "shadow"), ("directory", secrets)):
        model = scratch / f"model-{label}"
        model.mkdir()
        (model / "weights.bin").write_bytes(b"weights")
        (model / "leak").symlink_to(target)
        try:
            registry.register(group="linked", model_artifact=model, metrics={"accuracy": 1.0})
            outcomes[label] = "registered"
        except SpecError as error:
            text = str(error)
            outcomes[label] = "refused: a symbolic link" if "symbolic link" in text else f"refused: {text[-80:]}"
    copied = [str(path) for path in registry.root.rglob("*") if "hash-of-a-secret" in _text(path)]
    return {"outcomes": outcomes, "secret_copies": len(copied), "versions": len(registry.list())}


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace") if path.is_file() and not path.is_symlink() else ""
    except OSError:
        return ""


def _register_job(root: str, artifact: str, barrier, results) -> None:
    import trainops.backends.local.backend  # noqa: F401 - imported before the barrier, so the calls really race
    import trainops.backends.local.registry  # noqa: F401
    from trainops.steps.register import register

    barrier.wait()
    result = register(model_artifact=artifact, metrics={"accuracy": 0.9}, group="digits", backend="local",
                      registry_dir=root, job_name="digits-20240101")
    results.put((result["version"], result["already_registered"]))


def concurrent_registrations(scratch: Path, count: int = 10) -> dict:
    """``count`` processes register the same training job through the register step at once."""
    import multiprocessing
    import time

    from trainops.backends.local.registry import LocalRegistry

    artifact = scratch / "model.tar.gz"
    artifact.write_bytes(b"model bytes")
    root = scratch / "registry"
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(count), context.Queue()
    processes = [context.Process(target=_register_job, args=(str(root), str(artifact), barrier, results))
                 for _ in range(count)]
    started = time.perf_counter()
    for process in processes:
        process.start()
    returned = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    seconds = time.perf_counter() - started
    return {"registrations": count, "exit_codes": [process.exitcode for process in processes],
            "versions_returned": sorted({version for version, _ in returned}),
            "said_added": sum(1 for _, already in returned if not already),
            "versions_made": len(LocalRegistry(root).list("digits")), "seconds": round(seconds, 2)}


def corrupt_entry(scratch: Path) -> dict:
    """A registry with one corrupt entry.json and one whose artifact points outside: list, register, champion."""
    import contextlib
    import io
    import json

    from trainops.backends.local.registry import LocalRegistry
    from trainops.cli import main
    from trainops.steps.register import register

    artifact = scratch / "model.tar.gz"
    artifact.write_bytes(b"model bytes")
    (scratch / "outside.bin").write_bytes(b"not the registry's")
    root = scratch / "registry"
    registry = LocalRegistry(root)
    for number in range(3):
        registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.9}, job_name=f"j{number}")
    (root / "digits" / "v2" / "entry.json").write_text("{corrupt")
    entry = json.loads((root / "digits" / "v3" / "entry.json").read_text())
    entry["model_artifact"] = "../../../outside.bin"
    (root / "digits" / "v3" / "entry.json").write_text(json.dumps(entry))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["models", "list", "--registry", str(root)])
    try:
        added = register(model_artifact=artifact, metrics={"accuracy": 0.95}, group="digits", backend="local",
                         registry_dir=str(root), job_name="j-new")["version"]
    except Exception as error:  # noqa: BLE001 - recorded: a blocked registration is the failure this measures
        added = f"{type(error).__name__}: {error}"
    return {"list_exit": code, "listed": len(out.getvalue().strip().splitlines()) - 1,
            "warnings": err.getvalue().count("is damaged"), "new_version": added,
            "served_outside": any(str(scratch / "outside.bin") == version.model_artifact
                                  for version in registry.list())}


# --- item 10: the port lock directory ------------------------------------------------------------------------------

def planted_port_directory(scratch: Path) -> dict:
    """Another user pre-creates ``$TMPDIR/trainops-ports-<uid>`` full of links to files the victim can write (as
    root: the directory is handed to uid 65534; otherwise a link in place of the directory), then the victim
    reserves a port. Records whether it refused and whether any target was touched."""
    import tempfile

    from trainops.backends.local import ports
    from trainops.errors import JobFailed

    temporary = scratch / "tmp"
    temporary.mkdir()
    victims = []
    for number in range(3):
        victim = scratch / f"victim-{number}.txt"
        victim.write_text("precious\n")
        victims.append(victim)
    planted = temporary / f"trainops-ports-{os.getuid()}"
    if os.geteuid() == 0:
        planted.mkdir(mode=0o777)
        for port, victim in zip(range(30000, 30003), victims, strict=False):
            (planted / f"{port}.lock").symlink_to(victim)
        os.chown(planted, 65534, 65534)
        how = "directory of uid 65534 with links to the victim's files"
    else:
        elsewhere = scratch / "elsewhere"
        elsewhere.mkdir()
        for port, victim in zip(range(30000, 30003), victims, strict=False):
            (elsewhere / f"{port}.lock").symlink_to(victim)
        planted.symlink_to(elsewhere)
        how = "link to a directory of links to the victim's files"
    saved_tempdir, saved_range = tempfile.tempdir, ports.PORT_RANGE
    tempfile.tempdir, ports.PORT_RANGE = str(temporary), (30000, 30003)
    try:
        reservation = ports.reserve_port(attempts=10)
        reservation.release()
        refused, message = False, ""
    except JobFailed as error:
        refused, message = True, str(error)
    finally:
        tempfile.tempdir, ports.PORT_RANGE = saved_tempdir, saved_range
    return {"planted": how, "refused": refused, "message": message,
            "victims_changed": sum(victim.read_text() != "precious\n" for victim in victims)}


# --- item 9: staging races and deep trees --------------------------------------------------------------------------

def _swapper(directory: Path, link_to: Path, parked: Path, stop) -> None:
    """Swap ``directory`` for a link to ``link_to`` and back, as fast as possible, until ``stop`` is set."""
    while not stop.is_set():
        try:
            directory.rename(parked)
            directory.symlink_to(link_to)
            directory.unlink()
            parked.rename(directory)
        except OSError:
            pass
    if parked.exists() and not directory.exists():
        parked.rename(directory)
    elif parked.exists() and directory.is_symlink():
        directory.unlink()
        parked.rename(directory)


def _start_swappers(swap_in: str, jobs: list[tuple]) -> tuple:
    """Start a `_swapper` per job, as threads of this process (taking turns with the stage at the GIL) or as forked
    processes (swapping truly alongside it)."""
    import threading

    if swap_in == "thread":
        stop = threading.Event()
        workers = [threading.Thread(target=_swapper, args=(*job, stop)) for job in jobs]
    else:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        stop = context.Event()
        workers = [context.Process(target=_swapper, args=(*job, stop)) for job in jobs]
    for worker in workers:
        worker.start()
    return stop, workers


def staging_races(scratch: Path, files: int = 2000, rounds: int = 3, swap_in: str = "thread") -> dict:
    """Stage while another thread (``swap_in="thread"``) or another process (``"process"``) keeps swapping (a) a
    source directory and (b) the destination directories for links to directories outside, shaped like the real
    ones. Counts what was read from outside the source and what was written outside the destination."""
    import time

    from trainops.backends.hostfs.staging import stage_tree

    source = scratch / "source"
    outside_source = scratch / "outside-source"
    elsewhere = scratch / "elsewhere"
    for directory in ("shard-0", "shard-1"):
        (source / directory).mkdir(parents=True)
        (outside_source / directory).mkdir(parents=True)
        (elsewhere / directory).mkdir(parents=True)
    for index in range(files):
        name = f"shard-{index % 2}/sample-{index:05d}.bin"
        (source / name).write_bytes(b"data %d\n" % index)
        (outside_source / name).write_bytes(b"SECRET from outside the source\n")
    results = {"source_swaps": {"from_outside": 0, "staged": 0, "refused_or_failed": 0},
               "destination_swaps": {"written_outside": 0, "staged": 0, "refused_or_failed": 0}}
    started = time.perf_counter()

    def stage(destination: Path, jobs: list[tuple]):
        stop, workers = _start_swappers(swap_in, jobs)
        try:
            return stage_tree(str(source), str(destination), workers=2, progress=False)
        finally:
            stop.set()
            for worker in workers:
                worker.join()

    for round_number in range(rounds):
        # (a) the source: shard-1 swapped for a link to a look-alike outside.
        destination = scratch / f"staged-a-{round_number}"
        report = stage(destination, [(source / "shard-1", outside_source / "shard-1", scratch / "parked-source")])
        copies = [path for path in destination.rglob("*.bin")]
        results["source_swaps"]["from_outside"] += sum(b"SECRET" in path.read_bytes() for path in copies)
        results["source_swaps"]["staged"] += report.files_copied
        results["source_swaps"]["refused_or_failed"] += len(report.refused) + len(report.failed)
        # (b) the destination: its directories swapped for links to look-alikes outside, during the copy.
        destination = scratch / f"staged-b-{round_number}"
        (destination / "shard-0").mkdir(parents=True)
        (destination / "shard-1").mkdir()
        report = stage(destination, [(destination / name, elsewhere / name, scratch / f"parked-{name}")
                                     for name in ("shard-0", "shard-1")])
        results["destination_swaps"]["written_outside"] += sum(1 for path in elsewhere.rglob("*") if path.is_file())
        results["destination_swaps"]["staged"] += report.files_copied
        results["destination_swaps"]["refused_or_failed"] += len(report.refused) + len(report.failed)
    results.update(files=files, rounds=rounds, seconds=round(time.perf_counter() - started, 2))
    return results


def staging_races_in_processes(scratch: Path, files: int = 2000, rounds: int = 3) -> dict:
    """`staging_races` with the swaps made by other processes."""
    return staging_races(scratch, files, rounds, swap_in="process")


def remove_deep_tree(path: Path) -> None:
    """Remove a tree of any depth without recursion (Python 3.11's shutil.rmtree recurses)."""
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


def deep_tree(scratch: Path, depth: int = 1200) -> dict:
    """Stage a source ``depth`` directories deep (one file every 100 levels); removes both trees afterwards."""
    import time

    from trainops.backends.hostfs.staging import stage_tree

    level = "level-0123456789"
    descriptor = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    os.mkdir("deep-source", dir_fd=descriptor)
    expected = 0
    for number in range(depth):
        following = os.open("deep-source" if number == 0 else level, os.O_RDONLY | os.O_DIRECTORY, dir_fd=descriptor)
        os.close(descriptor)
        descriptor = following
        os.mkdir(level, dir_fd=descriptor)
        if number % 100 == 0:
            os.close(os.open(f"file-{number}.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=descriptor))
            expected += 1
    os.close(descriptor)
    started = time.perf_counter()
    try:
        report = stage_tree(str(scratch / "deep-source"), str(scratch / "deep-staged"), workers=2, progress=False)
        outcome = {"depth": depth, "files": expected, "copied": report.files_copied, "ok": report.ok, "error": ""}
    except Exception as error:  # noqa: BLE001 - recorded: RecursionError was the bug
        outcome = {"depth": depth, "files": expected, "copied": 0, "ok": False,
                   "error": f"{type(error).__name__}: {str(error)[:100]}"}
    outcome["seconds"] = round(time.perf_counter() - started, 2)
    for name in ("deep-source", "deep-staged"):
        if (scratch / name).exists():
            remove_deep_tree(scratch / name)
    return outcome


# --- bench/reliability.py, section "files" -------------------------------------------------------------------------

TEST_FILE = "test_reliability_files.py"


def measure_section() -> dict:
    """Every scenario above, each in a scratch directory of its own, for bench/reliability.py."""
    import tempfile

    measured = {}
    for name, scenario in (("tar_slip", tar_slip), ("expansion_bomb", expansion_bomb),
                           ("registry_links", registry_links), ("concurrent_registrations", concurrent_registrations),
                           ("corrupt_entry", corrupt_entry), ("staging_races", staging_races),
                           ("staging_races_in_processes", staging_races_in_processes),
                           ("deep_tree", deep_tree), ("planted_port_directory", planted_port_directory)):
        with tempfile.TemporaryDirectory(prefix="reliability-files-") as scratch:
            measured[name] = scenario(Path(scratch))
    return measured


def section_rows(section: dict) -> list[str]:
    """The rows of RELIABILITY.md for issue 15, items 6-10."""
    def verdict(ok: bool) -> str:
        return "met" if ok else "**MISSED**"

    def test(name: str) -> str:
        return f"`{TEST_FILE}::{name}`"

    slip, bomb = section["tar_slip"], section["expansion_bomb"]
    links, racing = section["registry_links"], section["concurrent_registrations"]
    corrupt = section["corrupt_entry"]
    deep, ports = section["deep_tree"], section["planted_port_directory"]
    return [
        f"| 15.6 | Model archive on CVE-2025-4517 (chain of long links that defeats realpath) | "
        f"{'refused' if slip['refused'] else 'EXTRACTED'} in {slip['seconds']} s; file outside overwritten: "
        f"{'yes' if slip['victim_overwritten'] else 'no'}; left in the model directory: {slip['left_in_destination']} | "
        f"refused, nothing written | {verdict(slip['refused'] and not slip['victim_overwritten'])} | "
        f"{test('test_realpath_overflow_archive_cannot_write_outside_the_model_directory')} |",
        f"| 15.6 | {bomb['archive_bytes'] / 1024:.0f} KB archive expanding to {bomb['expanded_bytes'] / 2**20:.0f} MiB, "
        f"limit {bomb['limit'] / 2**20:.0f} MiB | {'refused' if bomb['refused'] else 'EXTRACTED'} in {bomb['seconds']} s, "
        f"{bomb['written_bytes']} bytes written | refused before writing | "
        f"{verdict(bomb['refused'] and bomb['written_bytes'] == 0)} | "
        f"{test('test_expansion_bomb_is_refused_before_filling_the_disk')} |",
        f"| 15.7 | Registering a model directory with a link to a secret file / to a directory | "
        f"link to a file: {links['outcomes'].get('file')}; link to a directory: {links['outcomes'].get('directory')}; "
        f"copies of the secret in the registry: {links['secret_copies']}, "
        f"versions made: {links['versions']} | refused, nothing copied | "
        f"{verdict(links['secret_copies'] == 0 and links['versions'] == 0)} | "
        f"{test('test_registering_a_directory_with_links_copies_nothing_from_outside')} |",
        f"| 15.8 | {racing['registrations']} concurrent registrations of one training job (register step) | "
        f"versions made {racing['versions_made']}, versions returned {racing['versions_returned']}, "
        f"{racing['said_added']} said it added the version (`already_registered: false`), "
        f"exit codes {sorted(set(racing['exit_codes']))} ({racing['seconds']} s) | one version, one adder | "
        f"{verdict(racing['versions_made'] == 1 and racing['said_added'] == 1)} | "
        f"{test('test_ten_concurrent_registrations_of_one_job_make_one_version')} |",
        f"| 15.8 | A corrupt entry.json and an entry whose artifact points outside | `models list` exit "
        f"{corrupt['list_exit']}, {corrupt['listed']} usable version listed, {corrupt['warnings']} named as damaged; "
        f"new registration: version {corrupt['new_version']}; artifact outside served: "
        f"{'yes' if corrupt['served_outside'] else 'no'} | rest usable, bad ones named | "
        f"{verdict(corrupt['list_exit'] == 0 and not corrupt['served_outside'] and corrupt['new_version'] == 4)} | "
        f"{test('test_a_corrupt_entry_blocks_neither_listing_nor_registering')} |",
        *[f"| 15.9 | Staging while another {who} swaps directories for links to look-alikes outside "
          f"({races['files']:,} files, {races['rounds']} rounds each) | "
          f"source side: files read from outside {races['source_swaps']['from_outside']}, staged "
          f"{races['source_swaps']['staged']}, refused or failed {races['source_swaps']['refused_or_failed']}; "
          f"destination side: files written outside {races['destination_swaps']['written_outside']}, staged "
          f"{races['destination_swaps']['staged']}, refused or failed "
          f"{races['destination_swaps']['refused_or_failed']} ({races['seconds']} s) | 0 outside | "
          f"{verdict(races['source_swaps']['from_outside'] == 0 and races['destination_swaps']['written_outside'] == 0)}"
          f" | {test('test_staging_while_directories_are_swapped_for_links_reads_and_writes_nothing_outside')} |"
          for who, races in (("thread", section["staging_races"]),
                             ("process", section["staging_races_in_processes"]))],
        f"| 15.9 | A source tree {deep['depth']:,} directories deep (longer than PATH_MAX) | "
        f"{deep['copied']}/{deep['files']} files staged in {deep['seconds']} s {deep['error']} | all staged | "
        f"{verdict(deep['ok'] and deep['copied'] == deep['files'])} | {test('test_a_source_1200_directories_deep_stages')} |",
        f"| 15.10 | Port lock directory planted by another user ({ports['planted']}) | "
        f"{'refused' if ports['refused'] else 'USED'}; link targets changed: {ports['victims_changed']} | refused, "
        f"nothing written | {verdict(ports['refused'] and ports['victims_changed'] == 0)} | "
        f"{test('test_a_port_directory_planted_by_another_user_is_refused')} |",
    ]
