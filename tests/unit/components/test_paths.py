"""Values of the pipeline file resolved where a component runs."""

from __future__ import annotations

import pytest

from trainops.components.paths import parse_json, places
from trainops.errors import SpecError


def test_pipeline_dir_is_read_against_the_working_directory_and_workdir_against_it(tmp_path, monkeypatch):
    (tmp_path / "repo" / "examples" / "digits").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    where = places("examples/digits", "../../runs/digits")
    assert where.pipeline_dir == tmp_path / "repo" / "examples" / "digits"
    assert where.workdir == tmp_path / "repo" / "runs" / "digits"
    assert where.path("${workdir}/raw") == str(tmp_path / "repo" / "runs" / "digits" / "raw")
    assert where.path("train.yaml") == str(tmp_path / "repo" / "examples" / "digits" / "train.yaml")
    assert where.path("s3://bucket/${workdir}") == f"s3://bucket/{where.workdir}"  # URIs are not resolved
    assert where.expand({"a": ["${pipeline_dir}/x"]}) == {"a": [f"{where.pipeline_dir}/x"]}


def test_an_empty_workdir_means_trainops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINOPS_HOME", str(tmp_path / "home"))
    assert places(str(tmp_path), "").workdir == tmp_path / "home"
    assert places(str(tmp_path), str(tmp_path / "abs")).workdir == tmp_path / "abs"


def test_unknown_variables_and_bad_json_name_the_field(tmp_path):
    with pytest.raises(SpecError, match=r"channels.train.*\$\{home\}"):
        places(str(tmp_path), "").path("${home}/x", "channels.train")
    with pytest.raises(SpecError, match="args_json: is not valid JSON"):
        parse_json("[1,", "args_json", list)
    with pytest.raises(SpecError, match="args_json: must be JSON holding a list, not dict"):
        parse_json("{}", "args_json", list)
    assert parse_json("", "args_json", list) is None
