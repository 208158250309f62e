"""The docs test (issue 47, item 6): every command block of README.md and the quick-start pages runs, exactly as
written, so a command that stops working fails `make test`.

Each fenced block of these documents is preceded by a mark that says what it is:

- ``<!-- docs-test: run -->``: commands to run. A shell block runs in ``bash -e -o pipefail`` (a failing line fails
  the block), a ``python`` block in the checkout's ``.venv/bin/python``; from the root of a copy of the checkout,
  as a newcomer does after ``git clone``, with a HOME of its own and ``.venv/bin`` first on PATH (an activated venv:
  the pages that write bare ``trainops`` assume one). The blocks of all pages run in order in one copy (README first:
  its ``make run`` stages the data the later blocks read); a block identical to one that already ran is not run
  twice.
- ``<!-- docs-test: file PATH -->``: a file's content (a named backend's YAML), written to PATH (``~`` is the HOME).
- ``<!-- docs-test: background FILE -->``: a command that holds its terminal until Ctrl-C (``make slurm-cluster``),
  run in the background as a user leaves it in another shell: the blocks after it run once it has written FILE
  (relative to the copy), and it gets Ctrl-C (SIGINT to its process group) when the last block has run.
- ``<!-- docs-test: skip (WHY) -->``: shown, not run, and why (output transcripts, a cluster's or an account's
  commands, the test suite itself); the reason is required.

A block without a mark fails `test_every_block_says_whether_it_runs`, so a new block is a decision, not an
omission. The copy shares the checkout's ``.venv`` (a symlink): the install `make setup` did is the one the commands
use, so the venv must be up to date (the test refuses a stale one rather than let ``make run`` reinstall it from the
copy). The training-image venv comes from the suite's cache (``TRAINOPS_IMAGE_VENV_CACHE``, else
``~/.cache/trainops-test``), as a user's second run finds it in their own.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: README and the quick-start pages, in the order their blocks run.
DOCUMENTS = ("README.md", "docs/airflow.md", "docs/kubeflow.md", "docs/slurm.md")
MARK = re.compile(r"^<!-- docs-test: (?P<kind>run|file|skip|background)(?: (?P<argument>.*?))? -->$")
FENCE = re.compile(r"^```(?P<info>\S*)\s*$")
#: Seconds one block may take: `make run` trains on 2 busy cores, the Airflow DAG runs the whole pipeline.
BLOCK_SECONDS = 1200
#: Seconds a background block may take to write its file (a Slurm cluster starting on 2 busy cores), and to end
#: after its Ctrl-C.
BACKGROUND_SECONDS = 300


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # of the opening fence, 1-based
    info: str  # the fence's language (``python``, ``yaml``, ``sh`` or none)
    kind: str  # run | file | skip | "" (no mark)
    argument: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


def blocks(document: str) -> list[Block]:
    """Every fenced block of ``document`` with the mark on the last non-blank line before it."""
    lines = (ROOT / document).read_text().splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        previous = index - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        mark = MARK.match(lines[previous].strip()) if previous >= 0 else None
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        found.append(Block(document, index + 1, fence.group("info"), mark.group("kind") if mark else "",
                           (mark.group("argument") or "") if mark else "", "\n".join(lines[index + 1:end]) + "\n"))
        index = end + 1
    return found


def every_block() -> list[Block]:
    return [block for document in DOCUMENTS for block in blocks(document)]


def test_every_block_says_whether_it_runs():
    problems = []
    for block in every_block():
        if not block.kind:
            problems.append(f"{block.where}: no <!-- docs-test: run|file PATH|skip (why) --> before the block")
        elif block.kind == "skip" and not re.fullmatch(r"\(.+\)", block.argument):
            problems.append(f"{block.where}: a skipped block says why: <!-- docs-test: skip (why) -->")
        elif block.kind in ("file", "background") and not block.argument:
            problems.append(f"{block.where}: <!-- docs-test: {block.kind} PATH --> names the file")
        elif block.kind == "background" and block.info not in ("", "sh", "bash"):
            problems.append(f"{block.where}: a {block.info} block cannot run in the background")
        elif block.kind == "run" and block.info not in ("", "sh", "bash", "python"):
            problems.append(f"{block.where}: a {block.info} block cannot run: mark it file or skip")
    assert not problems, "\n".join(problems)
    assert [block for block in every_block() if block.kind == "run"], "no block runs"


def checkout_files() -> list[str]:
    """The checkout's files as a clone has them: tracked, and new files git does not ignore (this branch's own)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def stale_venv() -> str | None:
    """Why the checkout's .venv is not the install of this checkout's pins (`make setup`), or None."""
    stamp = ROOT / ".venv" / ".trainops-test"
    if not stamp.exists():
        return "no .venv/.trainops-test: run make setup first"
    newer = [name for name in ("pyproject.toml", "constraints.txt")
             if (ROOT / name).stat().st_mtime > stamp.stat().st_mtime]
    return f"{', '.join(newer)} changed after .venv was set up: run make setup first" if newer else None


def run_block(block: Block, copy: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if block.info == "python":
        command = [str(copy / ".venv" / "bin" / "python"), "-c", block.text]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=BLOCK_SECONDS)


@pytest.mark.system
@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
def test_the_documented_commands_run_as_written(tmp_path):
    why = stale_venv()
    assert why is None, why
    copy = tmp_path / "trainops"
    for name in checkout_files():
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)  # times kept: make sees the venv's stamps as newer, as in the checkout
    (copy / ".venv").symlink_to(ROOT / ".venv")
    home = tmp_path / "home"
    home.mkdir()
    image_cache = os.environ.get("TRAINOPS_IMAGE_VENV_CACHE") or str(Path.home() / ".cache" / "trainops-test")
    env = {"PATH": f"{copy / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home),
           "USER": os.environ.get("USER", "root"), "LANG": "C.UTF-8", "TRAINOPS_IMAGE_VENV_CACHE": image_cache}
    ran: set[str] = set()
    background: list[tuple[Block, subprocess.Popen[bytes], Path]] = []
    try:
        for block in every_block():
            if block.kind == "file":
                target = Path(block.argument.replace("~", str(home), 1) if block.argument.startswith("~")
                              else copy / block.argument)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
            if block.kind == "background":
                background.append(start_background(block, copy, env, tmp_path / f"background-{len(background)}.log"))
            if block.kind != "run" or block.text in ran:
                continue
            done = run_block(block, copy, env)
            assert done.returncode == 0, (f"{block.where} exited {done.returncode}:\n{block.text}\n--- stdout (end)"
                                          f"\n{done.stdout[-4000:]}\n--- stderr (end)\n{done.stderr[-4000:]}")
            ran.add(block.text)
    finally:
        for block, process, log in background:
            interrupt(block, process, log)


def start_background(block: Block, copy: Path, env: dict[str, str], log: Path
                     ) -> tuple[Block, subprocess.Popen[bytes], Path]:
    """Start a background block in its own process group (a terminal of its own); return once it wrote its file."""
    ready = copy / block.argument
    with log.open("wb") as output:
        process = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=copy, env=env,
                                   stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    deadline = time.monotonic() + BACKGROUND_SECONDS
    while not ready.exists():  # the condition the next blocks need; the bound only ends a block that never gets there
        if process.poll() is not None or time.monotonic() > deadline:
            interrupt(block, process, log)
            raise AssertionError(f"{block.where} did not write {block.argument} (exit {process.returncode}):\n"
                                 f"{block.text}\n--- output (end)\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.2)
    return block, process, log


def interrupt(block: Block, process: subprocess.Popen[bytes], log: Path) -> None:
    """Ctrl-C to the block's process group, as its user ends it; it must end (and clean up) within the bound."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=BACKGROUND_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"{block.where} did not end after Ctrl-C:\n"
                                 f"{log.read_text(errors='replace')[-4000:]}") from None
