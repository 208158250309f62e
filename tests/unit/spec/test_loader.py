"""Reading spec files (YAML/JSON, hostile ones too) and turning pydantic's errors into the project's own."""

from __future__ import annotations

import json
import string

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainops.errors import SpecError
from trainops.spec import load_job_spec, parse_job_spec, read_document
from trainops.spec.job import JobSpec
from trainops.spec.loader import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, parse_text


def messages(error: SpecError) -> str:
    return "\n".join(str(problem) for problem in error.problems)


def test_yaml_and_json_give_the_same_data():
    as_yaml = parse_text("entry_point: train.py\ninstance_count: 2\ntags: {team: x}\n")
    as_json = parse_text('{"entry_point": "train.py", "instance_count": 2, "tags": {"team": "x"}}')
    assert as_yaml == as_json == {"entry_point": "train.py", "instance_count": 2, "tags": {"team": "x"}}


def test_flow_style_yaml_that_is_not_json():
    assert parse_text("{a: 1, b: [x, y]}") == {"a": 1, "b": ["x", "y"]}


@pytest.mark.parametrize("text, words", [
    ("", "is empty"),
    ("   \n\t\n", "is empty"),
    ("a: [1\n", "not valid YAML or JSON at line 2"),
    ("a: b: c\n", "not valid YAML or JSON at line 1"),
    ("a: !!python/object:os.system x\n", "not valid YAML or JSON"),
    ("- &a x\n" + "- *a\n" * (MAX_ALIASES + 1), f"more than {MAX_ALIASES} YAML aliases"),
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ("a:\n" + "".join("  " * depth + "b:\n" for depth in range(1, MAX_DEPTH + 2)), "nested more than"),
    ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), "nested more than"),
    ("? [a, b]\n: c\n", "not valid YAML or JSON"),
])
def test_bad_documents_are_spec_errors(text, words):
    with pytest.raises(SpecError) as caught:
        parse_text(text, "spec.yaml")
    assert words in messages(caught.value)
    assert caught.value.source == "spec.yaml"


def test_alias_bomb_is_refused_before_it_expands():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 12)]
    with pytest.raises(SpecError) as caught:
        parse_text("\n".join(lines))
    assert "aliases" in messages(caught.value)


@pytest.mark.parametrize("text, words", [
    ("entry_point: a.py\ninstance_count: 2\ninstance_count: 4\n", "key 'instance_count' appears twice (lines 2 and 3)"),
    ("tags:\n  team: a\n  team: b\n", "key 'team' appears twice"),
    ('{"instance_count": 2, "instance_count": 4}', "key 'instance_count' appears twice in one object"),
])
def test_duplicate_keys_are_refused(text, words):
    with pytest.raises(SpecError) as caught:
        parse_text(text)
    assert words in messages(caught.value)


def test_merge_keys_may_be_overridden():
    assert parse_text("base: &b {a: 1, c: 2}\nother:\n  <<: *b\n  a: 3\n")["other"] == {"a": 3, "c": 2}
    assert parse_text("a: 1\nb: {a: 2}\n") == {"a": 1, "b": {"a": 2}}


def test_a_few_aliases_are_fine():
    assert parse_text("base: &b {x: 1}\nother: *b\n") == {"base": {"x": 1}, "other": {"x": 1}}


# --- files --------------------------------------------------------------------------------------------------------

def test_read_document(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbfentry_point: train.py\n")  # a UTF-8 BOM is fine
    assert read_document(path) == {"entry_point": "train.py"}


@pytest.mark.parametrize("content, words", [
    (b"\xff\xfe\x00x", "not UTF-8 text (byte 0)"),
    (b"entry_point: \xe9t\xe9\n", "not UTF-8"),
    (b"entry_point: a\x00b\n", "NUL bytes"),
    (b"", "is empty"),
    (b"x" * (MAX_FILE_BYTES + 1), "spec files are limited"),
])
def test_bad_files(tmp_path, content, words):
    path = tmp_path / "spec.yaml"
    path.write_bytes(content)
    with pytest.raises(SpecError) as caught:
        read_document(path)
    assert words in messages(caught.value)
    assert caught.value.source == str(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SpecError) as caught:
        read_document(tmp_path / "nope.yaml")
    assert "does not exist" in messages(caught.value)
    with pytest.raises(SpecError) as caught:
        read_document(tmp_path)
    assert "is not a file" in messages(caught.value)


def test_load_job_spec_resolves_local_paths_against_the_file(tmp_path):
    (tmp_path / "jobs").mkdir()
    path = tmp_path / "jobs" / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "entry_point": "train.py", "instance_type": "local", "source_dir": "../src", "output_path": "out",
        "inputs": {"train": "data/train", "val": {"s3_data": "data/val"}, "remote": "s3://bucket/x",
                   "abs": "/abs/path"}}))
    spec = load_job_spec(path)
    assert spec.source_dir == str(tmp_path / "src")
    assert spec.output_path == str(tmp_path / "jobs" / "out")
    assert spec.inputs["train"] == str(tmp_path / "jobs" / "data" / "train")
    assert spec.inputs["val"].s3_data == str(tmp_path / "jobs" / "data" / "val")
    assert spec.inputs["remote"] == "s3://bucket/x"
    assert spec.inputs["abs"] == "/abs/path"


@pytest.mark.parametrize("uri, words", [("file://data/val", "names the host 'data'"),
                                        ("s3:/bucket/x", "malformed"), ("s3:bucket", "malformed")])
def test_malformed_uris_are_errors_not_relative_paths(tmp_path, uri, words):
    # Issue 14: 'file://data/val' and 's3:/bucket' used to be taken for relative local paths.
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"entry_point": "train.py", "instance_type": "local", "inputs": {"val": uri}}))
    with pytest.raises(SpecError) as caught:
        load_job_spec(path)
    assert words in messages(caught.value) and "inputs.val" in messages(caught.value)


def test_load_job_spec_keeps_s3_source_dir(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"entry_point": "t.py", "instance_type": "local",
                                "source_dir": "s3://bucket/code/sourcedir.tar.gz"}))
    assert load_job_spec(path).source_dir == "s3://bucket/code/sourcedir.tar.gz"


def test_load_job_spec_names_the_file_in_errors(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("entry_point: train.py\ninstance_count: 0\n")
    with pytest.raises(SpecError) as caught:
        load_job_spec(path)
    assert caught.value.source == str(path)
    assert str(caught.value).startswith(f"invalid {path}: 2 problems")


# --- parse_job_spec -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data, words", [
    (None, "got nothing"), ([1, 2], "got list"), ("text", "got str"), (3, "got int"),
])
def test_a_spec_is_a_mapping(data, words):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(data)
    assert words in messages(caught.value)


def test_a_job_spec_passes_through():
    spec = parse_job_spec({"entry_point": "t.py", "instance_type": "local"})
    assert parse_job_spec(spec) is spec


def test_problems_are_unique_and_ordered():
    with pytest.raises(SpecError) as caught:
        parse_job_spec({"entry_point": "", "instance_count": 0, "volume_size": 0})
    paths = [problem.path for problem in caught.value.problems]
    assert paths == ["entry_point", "instance_count", "volume_size", "instance_type"]
    assert len(set(map(str, caught.value.problems))) == len(caught.value.problems)


@pytest.mark.parametrize("text, path, words", [
    ("framework_version: 2.10\n", "framework_version", "write it in quotes (YAML reads 2.1 as a number)"),
    # YAML 1.2 core schema (issue 14): dates and yes/no are text; only true/false are booleans
    ("region: 1\n", "region", "(YAML reads 1 as a number)"),
    ("py_version: true\n", "py_version", "(YAML reads True as a boolean)"),
    ("hyperparameters:\n  1: x\n", "hyperparameters.1", "names must be text: write '1' in quotes"),
])
def test_yaml_scalars_that_should_be_text(text, path, words):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(parse_text("entry_point: t.py\ninstance_type: local\n" + text))
    problems = {problem.path: problem.message for problem in caught.value.problems}
    assert words in problems[path]


def test_non_text_top_level_key_does_not_hide_other_problems():
    with pytest.raises(SpecError) as caught:
        parse_job_spec({1: 2, "entry_point": "t.py", "instance_type": "local", "hyperparameters": {"hf_token": 1}})
    problems = {problem.path: problem.message for problem in caught.value.problems}
    assert problems == {"1": "names must be text: write '1' in quotes",
                        "hyperparameters.hf_token": problems["hyperparameters.hf_token"]}
    assert "looks like a secret" in problems["hyperparameters.hf_token"]


def test_messages_are_plain():
    with pytest.raises(SpecError) as caught:
        parse_job_spec({"entry_point": "t.py", "instance_type": "local", "region": "x"})
    (problem,) = caught.value.problems
    assert not problem.message.startswith("Value error")


# --- property-based: nothing but SpecError, ever ---------------------------------------------------------------------

FIELDS = sorted(JobSpec.model_fields) + ["Key", "Value", "type", "enabled", "smdistributed", "dataparallel",
                                         "modelparallel", "parameters", "mpi", "torch_distributed", "s3_data",
                                         "file_system_id", "directory_path", "instance_group_name"]
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
           | st.text(max_size=30) | st.sampled_from(["s3://bucket/x", "ml.p4d.24xlarge", "smddp", "smp", "mpi",
                                                   "torch_distributed", "local", "py311", "2.3.0", "us-east-1",
                                                   "fs-0123456789abcdef0", "/fsx/a", "a;b"]))
KEYS = st.sampled_from(FIELDS) | st.text(max_size=12)
DATA = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
                    max_leaves=25)
SPECS = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), DATA, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_parse_job_spec_on_arbitrary_data_raises_only_spec_error(data):
    try:
        spec = parse_job_spec(data)
    except SpecError as error:
        assert error.problems
        assert all(isinstance(problem.path, str) and problem.message for problem in error.problems)
    else:
        assert isinstance(spec, JobSpec)


YAML_TEXT = st.text(alphabet=string.printable + "ä€\u00a0", max_size=200) | DATA.map(
    lambda value: yaml.safe_dump(value, default_flow_style=None) if value is not None else "")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(YAML_TEXT)
def test_parse_text_then_parse_job_spec_on_arbitrary_text_raises_only_spec_error(text):
    try:
        parse_job_spec(parse_text(text))
    except SpecError as error:
        assert error.problems


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_read_document_on_arbitrary_bytes_raises_only_spec_error(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("bytes") / "spec.yaml"
    path.write_bytes(content)
    try:
        parse_job_spec(read_document(path))
    except SpecError as error:
        assert error.problems


@pytest.mark.parametrize("text, expected", [
    ("1e-5", 1e-05), ("0123", 123), ("1:30", "1:30"), ("yes", "yes"), ("off", "off"), ("True", True),
    ("FALSE", False), ("0x1F", 31), ("0o17", 15), ("-0.5e3", -500.0), (".inf", float("inf")), ("~", None),
    ("2024-01-01", "2024-01-01"), ("1_000", "1_000"), ("+12", 12),
])
def test_yaml_scalars_follow_the_yaml_1_2_core_schema(text, expected):
    # Issue 14: PyYAML's YAML 1.1 rules made 1e-5 a string, 0123 octal 83, 1:30 the number 90 and yes a boolean.
    assert parse_text(f"value: {text}\n")["value"] == expected


def test_a_learning_rate_in_exponent_form_reaches_the_request_as_the_sdk_sends_it(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("entry_point: train.py\ninstance_type: local\nhyperparameters: {learning_rate: 1e-5}\n")
    assert load_job_spec(path).hyperparameters == {"learning_rate": 1e-05}
