"""The spec loader's defences against hostile documents, checked on both YAML loaders (libyaml and pure Python).

Found while building the bad-input corpus (issue 10): a 5,000-digit integer ended in an internal error (exit 1), an
alias bomb kept under the alias count expanded into millions of values inside a pipeline file, a recursive alias
crashed the pipeline reader, JSON duplicate-key checks were quadratic, 30,000 stray keys took half a minute to
report, and a 900 KB scalar took seconds in the pure-Python scanner.
"""

from __future__ import annotations

import json

import pytest

from trainops.errors import SpecError
from trainops.spec import loader
from trainops.spec.loader import MAX_NODES, MAX_PROBLEMS, OversizedNumber, parse_job_spec, parse_text

BASE = "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_loader(request, monkeypatch):
    """Run the test with the libyaml-backed loader and again with the pure-Python fallback."""
    if request.param == "pure-python":
        monkeypatch.setattr(loader, "_CParser", None)
    elif loader._CParser is None:
        pytest.skip("PyYAML was built without libyaml")
    return request.param


def problems_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_job_spec(parse_text(text, "spec.yaml"), "spec.yaml")
    return [str(problem) for problem in caught.value.problems]


def bomb(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_both_loaders_read_the_same_data(yaml_loader):
    text = BASE + "hyperparameters: {lr: 0.1, layers: [1, 2], name: x, big: 123456789012345678901234567890}\n" \
                  "base: &b {a: 1}\nother:\n  <<: *b\n  c: 2\n"
    assert parse_text(text) == {"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
                                "hyperparameters": {"lr": 0.1, "layers": [1, 2], "name": "x",
                                                    "big": 123456789012345678901234567890},
                                "base": {"a": 1}, "other": {"a": 1, "c": 2}}


@pytest.mark.parametrize("text", [BASE + "instance_count: " + "9" * 5000 + "\n",
                                  json.dumps({"entry_point": "t.py", "instance_type": "ml.p4d.24xlarge"})[:-1]
                                  + ', "instance_count": ' + "9" * 5000 + "}"])
def test_an_integer_of_thousands_of_digits_is_named_at_its_field(yaml_loader, text):
    (problem,) = problems_of(text)
    assert problem.startswith("instance_count: ") and "5000 digits" in problem


def test_an_oversized_integer_inside_hyperparameters_is_refused_there(yaml_loader):
    problems = problems_of(BASE + "hyperparameters: {seed: -" + "1" * 4400 + "}\n")
    assert any(problem.startswith("hyperparameters") and "seed" in problem for problem in problems)
    assert isinstance(parse_text("a: " + "1" * 4400)["a"], OversizedNumber)
    assert parse_text("a: " + "1" * 4300)["a"] == int("1" * 4300)  # the largest Python converts is still a number


def test_an_alias_bomb_under_the_alias_count_is_refused_while_composing(yaml_loader):
    # 6 levels of 9 aliases: 48 aliases (under MAX_ALIASES) standing for 9**6 = 531,441 strings.
    for text in (bomb(6), BASE + "hyperparameters:\n" + "".join(f"  {line}\n" for line in bomb(6).splitlines())):
        with pytest.raises(SpecError) as caught:
            parse_text(text)
        assert f"more than {MAX_NODES} values" in str(caught.value)


def test_a_few_shared_values_are_fine(yaml_loader):
    assert parse_text(bomb(2, width=3))["l1"] == [["lol"] * 3] * 3


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "a: &a {b: [1, {c: *a}]}\n"])
def test_a_value_that_contains_itself_is_refused(yaml_loader, text):
    with pytest.raises(SpecError) as caught:
        parse_text(text)
    assert "contains it" in str(caught.value)


def test_thousands_of_unknown_keys_give_a_bounded_report(yaml_loader):
    problems = problems_of(BASE + "".join(f"stray_{index}: 1\n" for index in range(3000)))
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[0].startswith("stray_0: unknown key")
    assert problems[-1] == f"... and {3000 - MAX_PROBLEMS} more problems (fix the ones above first)"


def test_json_duplicate_keys_are_still_found_among_many(yaml_loader):
    pairs = ", ".join(f'"k{index}": {index}' for index in range(20000))
    with pytest.raises(SpecError) as caught:
        parse_text("{" + pairs + ', "k19999": 0}')
    assert "'k19999' appears twice" in str(caught.value)


def test_a_long_scalar_is_read_and_refused_at_its_field(yaml_loader):
    (problem,) = problems_of("entry_point: " + "a" * 200_000 + "\ninstance_type: ml.p4d.24xlarge\n")
    assert problem.startswith("entry_point: ") and "1024" in problem


def test_union_member_tags_never_reach_the_path(tmp_path):
    from trainops.spec.pipeline import parse_pipeline

    document = {"name": "p", "steps": {"train": {"spec": 5}, "evaluate": {"entry_point": "e.py", "gate": 0.9}}}
    with pytest.raises(SpecError) as caught:
        parse_pipeline(document, "pipeline.yaml", tmp_path, str(tmp_path))
    paths = [problem.path for problem in caught.value.problems]
    assert paths == ["steps.train.spec", "steps.evaluate.gate"]
    assert all(problem.message.startswith("fits none of its accepted forms: ") for problem in caught.value.problems)


@pytest.mark.parametrize("make", ["link-loop", "name-too-long"])
def test_a_path_the_system_cannot_open_is_a_spec_error(tmp_path, make):
    from trainops.spec.loader import read_document

    path = tmp_path / "spec.yaml"
    if make == "link-loop":
        path.symlink_to(path)  # was an internal error: OSError ELOOP
    else:
        path = tmp_path / ("x" * 300 + ".yaml")
    with pytest.raises(SpecError) as caught:
        read_document(path)
    assert str(path) in str(caught.value) and "cannot be read" in str(caught.value)
