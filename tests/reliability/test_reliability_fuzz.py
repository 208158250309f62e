"""Property-based fuzzing of the spec and pipeline readers through the command line (issue 10, item 1).

tests/unit/spec/test_loader.py already feeds random data and text to the parser. These properties start from a
valid spec or pipeline and change one thing in a hostile way (a field set to a strange value, a key added or
removed, bytes spliced into the file), then check what the user sees: exit code 0 or 2 (never 1, never a
traceback), and when it is 2, a problem naming the field that was changed or one a cross-field rule reads with it.
A valid pipeline is never run here: the runner is replaced by a stub that records that it was reached.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from corpus_builder import BASE_PIPELINE, BASE_SPEC, write_case_code
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trainops.cli import main
from trainops.spec import rules
from trainops.spec.job import JobSpec

CORPUS_PIPELINES = Path(__file__).parent / "corpus" / "pipelines"
FIELDS = sorted(name for name in JobSpec.model_fields)

HOSTILE_TEXT = st.sampled_from([
    "", " ", "s3://", "s3://a", "-x A; rm -rf /", "$(id)", "`id`", "a\nb", "\x00", "\x1b[31m", "../../etc/passwd",
    "/etc/passwd", "ml.p4d.24xlarge", "ml.c5.xlarge", "local", "smddp", "torch_distributed", "${workdir}",
    "${nope}", "\u202e", "\ud7ff", "ｍｌ.ｐ４ｄ", "🚀", "a" * 5000, "1e999", "NaN", "true", "null", "~", "*a", "&a",
]) | st.text(max_size=40)
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2 ** 63, max_value=2 ** 200)
           | st.floats(allow_nan=True, allow_infinity=True) | HOSTILE_TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=10) | st.sampled_from(FIELDS), inner, max_size=4),
                      max_leaves=12)
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


#: Read together by validate's check of the code on disk (the entry point is looked up in source_dir), like a rule.
CODE_CHECK_READS = {"source_dir", "entry_point"}


def coupled(field: str) -> set[str]:
    """The fields whose problems a change to `field` may cause: itself and those a rule (or the check of the code on
    disk) reads together with it."""
    related = {field}
    for reads in [*(rule.reads for rule in rules.RULES), CODE_CHECK_READS]:  # type: ignore[attr-defined]
        if field in reads:
            related |= set(reads)
    return related


def write_spec(directory: str, name: str, content: bytes) -> Path:
    """The spec file, with the code BASE_SPEC names beside it (validate checks it exists, as run does)."""
    write_case_code(Path(directory), ("src/train.py", "train.py"))
    path = Path(directory) / name
    path.write_bytes(content)
    return path


def dump(data, fmt: str) -> bytes:
    if fmt == "json":
        return json.dumps(data).encode()
    return yaml.safe_dump(data, allow_unicode=True).encode("utf-8", "surrogatepass")


def run_cli(arguments: list[str]) -> tuple[int, str]:
    """`trainops ARGUMENTS` in this process; returns (exit code, stderr), having checked for tracebacks."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(arguments)
    output = out.getvalue() + err.getvalue()
    assert "Traceback" not in output and "internal error" not in output, output
    event(f"exit code {code}")  # --hypothesis-show-statistics shows how many inputs were accepted and refused
    return code, err.getvalue()


def problem_fields(stderr: str) -> list[str]:
    return [line[4:].split(": ", 1)[0] for line in stderr.splitlines() if line.startswith("  - ")]


@FUZZ
@given(field=st.sampled_from(FIELDS + ["unknown_field", "Entry_Point"]), value=VALUES | st.just("<delete>"),
       fmt=st.sampled_from(["yaml", "json"]))
def test_one_hostile_change_to_a_valid_spec_is_accepted_or_refused_at_that_field(field, value, fmt):
    data = copy.deepcopy(BASE_SPEC)
    if value == "<delete>":
        data.pop(field, None)
    else:
        data[field] = value
    try:
        content = dump(data, fmt)
    except (ValueError, yaml.YAMLError):
        return  # the value cannot be written as a document at all (a lone surrogate in JSON's eyes)
    with tempfile.TemporaryDirectory() as directory:
        code, err = run_cli(["validate", str(write_spec(directory, f"spec.{fmt}", content))])
    assert code in (0, 2)
    if code == 2:
        named = {name.split(".")[0].split("[")[0] for name in problem_fields(err)}
        assert named, err
        if field in JobSpec.model_fields:
            assert named <= coupled(field) | {""}, f"changed {field}, told about {named}:\n{err}"
        elif value != "<delete>":
            assert field in named


@FUZZ
@given(position=st.floats(min_value=0, max_value=1), noise=st.binary(min_size=1, max_size=16),
       cut=st.integers(min_value=0, max_value=8))
def test_bytes_spliced_into_a_valid_spec_never_crash_the_reader(position, noise, cut):
    content = dump(BASE_SPEC, "yaml")
    index = int(position * len(content))
    spliced = content[:index] + noise + content[index + cut:]
    with tempfile.TemporaryDirectory() as directory:
        code, err = run_cli(["validate", str(write_spec(directory, "spec.yaml", spliced))])
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("trainops: invalid ") and problem_lines_exist(err)


def problem_lines_exist(err: str) -> bool:
    return any(line.startswith("  - ") for line in err.splitlines())


PIPELINE_PATHS = ["name", "backend", "workdir", "steps.prepare.script", "steps.prepare.args",
                  "steps.prepare.timeout", "steps.stage.source", "steps.stage.workers", "steps.train.channels",
                  "steps.train.processes_per_host", "steps.train.job_name", "steps.evaluate.gate",
                  "steps.evaluate.on_gate_failure", "steps.evaluate.hyperparameters", "steps.register.group",
                  "steps.register.approval"] + [f"steps.train.spec.{name}" for name in FIELDS]


@pytest.fixture(scope="module")
def pipeline_dir(tmp_path_factory) -> Path:
    """A directory with the corpus pipelines' helper scripts (the base pipeline names them)."""
    directory = tmp_path_factory.mktemp("fuzz-pipeline")
    for helper in ("must_not_run.py", "train.py", "evaluate.py"):
        shutil.copy(CORPUS_PIPELINES / helper, directory / helper)
    return directory


@FUZZ
@given(where=st.sampled_from(PIPELINE_PATHS), value=VALUES | st.just("<delete>"))
def test_one_hostile_change_to_a_valid_pipeline_never_runs_a_step_when_refused(pipeline_dir, where, value):
    from trainops.steps import pipeline as runner_module

    reached = []

    def stub_run(self):
        reached.append(self.pipeline.name)
        self.run_record.status = "Succeeded"
        return self.run_record

    document = copy.deepcopy(BASE_PIPELINE)
    *parents, last = where.split(".")
    node = document
    for part in parents:
        node = node[part]
    if value == "<delete>":
        node.pop(last, None)
    else:
        node[last] = value
    try:
        content = dump(document, "yaml")
    except (ValueError, yaml.YAMLError):
        return
    path = pipeline_dir / "pipeline.yaml"
    path.write_bytes(content)
    with tempfile.TemporaryDirectory() as workdir:
        override = [] if where == "workdir" else ["--workdir", workdir]
        with mock.patch.object(runner_module.PipelineRunner, "run", stub_run):
            code, err = run_cli(["run", str(path), *override])
        assert not (Path(workdir) / "prepare-ran").exists()
    assert code in (0, 2)
    assert bool(reached) == (code == 0)  # refused means the runner was never reached
    if code == 2 and where.startswith("steps.train.spec."):
        field = where.rsplit(".", 1)[1]
        allowed = {f"steps.train.spec.{name}" for name in coupled(field)} | {"steps.train.spec"}
        named = {".".join(name.split(".")[:4]).split("[")[0] for name in problem_fields(err)}
        assert named <= allowed, f"changed {where}, told about {named}:\n{err}"
    elif code == 2 and where not in ("name", "workdir") and not where.startswith("steps.train"):
        assert any(name.startswith(where.split(".")[0]) for name in problem_fields(err)), err
