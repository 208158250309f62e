"""The bad-input corpus (issue 10, item 1): every file in tests/reliability/corpus/ is refused with exit code 2, a
message naming its field (or, for a broken document, saying what is wrong with it), never a traceback, and well
within the 1 s / 200 MB bound; pipeline files are refused before any step runs.

The checks run in-process through `trainops.cli.main` for speed; `bench/reliability.py` measures each file again in
a subprocess of its own (time to reject, peak memory) for RELIABILITY.md.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import corpus_builder
import pytest

from trainops.cli import main
from trainops.spec import rule_registry, rules
from trainops.spec.loader import MAX_FILE_BYTES

CORPUS = Path(__file__).parent / "corpus"
CASES = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))["cases"]
HELPERS = {"pipelines/must_not_run.py", "pipelines/train.py", "pipelines/evaluate.py",
           "pipelines/valid-base-pipeline.yaml", "valid/base-spec.yaml", "valid/src/train.py", "manifest.json",
           *(f"specs/{name}" for name in corpus_builder.CASE_CODE)}
# The contract is 1 s and 200 MB per file; in-process on a shared 2-core machine the test allows 5x the time (the
# bench measures the real figure in a quiet subprocess) and checks the memory bound as stated.
TIME_BOUND_SECONDS = 5.0
MEMORY_BOUND_BYTES = 200 * 1024 * 1024


class StepRan(Exception):
    """Raised if a pipeline step starts: no corpus pipeline may get that far."""


@pytest.fixture
def no_step_runs(monkeypatch):
    """Any pipeline step that starts fails the test (and leaves the prepare marker, checked too)."""
    from trainops.steps import pipeline

    def refuse(self, name, action):
        raise StepRan(f"step {name} started")

    monkeypatch.setattr(pipeline.PipelineRunner, "_step", refuse)


def run_case(case: dict, workdir: Path, capsys) -> tuple[int, str, str, float, int]:
    """Run one corpus file through the CLI; returns (exit code, stdout, stderr, seconds, peak traced bytes)."""
    arguments = [case["command"], str(CORPUS / case["file"])]
    if case["command"] == "run" and case.get("workdir_override", True):
        arguments += ["--workdir", str(workdir)]
    capsys.readouterr()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        code = main(arguments)
    finally:
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    captured = capsys.readouterr()
    return code, captured.out, captured.err, elapsed, peak


def test_the_corpus_holds_at_least_200_cases_and_the_manifest_lists_every_file():
    on_disk = {path.relative_to(CORPUS).as_posix() for path in CORPUS.rglob("*") if path.is_file()}
    listed = {case["file"] for case in CASES}
    assert len(CASES) >= 200
    assert on_disk - HELPERS == listed
    assert all(case["fields"] or case["text"] for case in CASES)


def test_the_committed_corpus_is_what_the_builder_writes(tmp_path):
    corpus_builder.build(tmp_path)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            relative = path.relative_to(tmp_path)
            assert (CORPUS / relative).read_bytes() == path.read_bytes(), f"{relative}: run corpus_builder.py"


def test_the_base_spec_and_pipeline_are_valid(tmp_path, capsys, no_step_runs):
    from trainops.spec.pipeline import load_pipeline
    from trainops.steps.pipeline import check_pipeline

    assert main(["validate", str(CORPUS / "valid" / "base-spec.yaml")]) == 0, capsys.readouterr().err
    path = CORPUS / "pipelines" / "valid-base-pipeline.yaml"
    check_pipeline(load_pipeline(path, workdir_override=str(tmp_path)), path.parent)


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_each_case_exits_2_naming_its_field_without_running_anything(case, tmp_path, capsys, no_step_runs):
    code, out, err, elapsed, peak = run_case(case, tmp_path / "work", capsys)
    assert code == 2, f"exit {code}\n{out}\n{err}"
    assert "Traceback" not in err + out and "internal error" not in err
    problem_lines = [line for line in err.splitlines() if line.startswith("  - ")]
    for field in case["fields"]:
        assert any(line.startswith(f"  - {field}: ") for line in problem_lines), f"{field!r} not named in:\n{err}"
    for text in case["text"]:
        assert text in err, f"{text!r} not in:\n{err}"
    assert elapsed < TIME_BOUND_SECONDS and peak < MEMORY_BOUND_BYTES
    if case["command"] == "run":
        assert not (tmp_path / "work" / "prepare-ran").exists()
        leftovers = list((tmp_path / "work").rglob("*")) if (tmp_path / "work").exists() else []
        assert leftovers == []  # not even a last-run record: nothing started


def test_every_cross_field_rule_is_exercised_by_a_case_that_fails_without_it(monkeypatch, capsys, tmp_path,
                                                                            no_step_runs):
    # An engine's rules register when its vocabulary loads: load every built-in one, so the set checked does not
    # depend on which tests this worker ran first.
    from trainops.backends import builtin_names
    from trainops.backends.vocabulary import vocabulary_of

    # An outside engine's rules (the toy's, the claims engine's), registered when a test of this worker imported it,
    # are that engine's to test: the corpus covers the rules that bind every engine and the built-in engines' sets.
    builtin_sets = set().union(*(vocabulary_of(name).spec_rules for name in builtin_names()))
    checked = [rule for rule in rules.RULES if getattr(rule, "binds", None) in (None, *builtin_sets)]
    tagged: dict[str, list[dict]] = {}
    for case in CASES:
        if case["rule"]:
            tagged.setdefault(case["rule"], []).append(case)
    assert {rule.__name__ for rule in checked} <= set(tagged)
    for rule in checked:
        for case in tagged[rule.__name__]:
            with monkeypatch.context() as patch:
                # the table runs itself (rule_registry.all_problems): drop the rule where it is read
                patch.setattr(rule_registry, "RULES", [other for other in rules.RULES if other is not rule])
                code, _, err, _, _ = run_case(case, tmp_path, capsys)
            named = code == 2 and all(f"  - {field}: " in err for field in case["fields"])
            assert not named, f"{case['file']} is refused the same way without rule {rule.__name__}"


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    path.write_bytes(b"entry_point: train.py\n" + b"#" * MAX_FILE_BYTES)
    case = {"command": "validate", "file": str(path)}
    code, _, err, elapsed, peak = run_case(case, tmp_path, capsys)
    assert code == 2 and "spec files are limited" in err
    assert peak < 4 * MAX_FILE_BYTES  # refused on its size: never read whole


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "dangling-link", "link-loop", "missing"])
def test_paths_that_are_not_regular_files_are_refused_without_blocking(kind, tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block for ever
    elif kind == "device":
        path.symlink_to("/dev/zero")  # reading it would never end
    elif kind == "dangling-link":
        path.symlink_to(tmp_path / "nowhere.yaml")
    elif kind == "link-loop":
        path.symlink_to(path)
    for command in ("validate", "run"):
        code, _, err, elapsed, _ = run_case({"command": command, "file": str(path)}, tmp_path / "work", capsys)
        assert code == 2 and str(path) in err and "Traceback" not in err, err
        assert elapsed < TIME_BOUND_SECONDS
