"""`trainops models list|show|approve|reject`: output and exit codes, through `trainops.cli.main`."""

from __future__ import annotations

import json

import pytest

from trainops.backends.local.registry import LocalRegistry
from trainops.cli import main


@pytest.fixture
def registry(tmp_path):
    artifact = tmp_path / "model.tar.gz"
    artifact.write_bytes(b"model")
    registry = LocalRegistry(tmp_path / "registry")
    registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.91, "loss": 0.3},
                      job_name="digits-1", spec={"name": "digits"})
    registry.register(group="digits", model_artifact=artifact,
                      metrics={"accuracy": 0.96, "loss": 0.1, "f1": 0.95, "precision": 0.97}, job_name="digits-2")
    registry.register(group="digits", model_artifact=artifact, metrics={"accuracy": 0.5}, approval="Rejected")
    registry.register(group="spam", model_artifact=artifact, metrics={"auc": 0.8}, approval="PendingManualApproval")
    return registry


def table_rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def test_list_table_marks_each_groups_champion(registry, capsys):
    assert main(["models", "list", "--registry", str(registry.root)]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert rows[0] == ["GROUP", "VERSION", "STATUS", "METRICS", "CREATED", "CHAMPION"]
    by_version = {(row[0], row[1]): row for row in rows[1:]}
    assert len(by_version) == 4
    assert by_version[("digits", "2")][-1] == "*"
    assert by_version[("digits", "1")][-1] != "*" and by_version[("spam", "1")][-1] != "*"
    assert by_version[("digits", "1")][2:4] == ["Approved", "accuracy=0.91"]
    # At most three metrics per row, the rest counted.
    assert "(+1)" in by_version[("digits", "2")]


def test_list_json_and_group_filter(registry, capsys):
    assert main(["models", "list", "--registry", str(registry.root), "--group", "digits", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(record["version"], record["champion"]) for record in records] == [(1, False), (2, True), (3, False)]
    assert all("spec" not in record for record in records)


def test_list_of_an_empty_registry(tmp_path, capsys):
    assert main(["models", "list", "--registry", str(tmp_path / "empty")]) == 0
    assert "no models registered" in capsys.readouterr().out


def test_unknown_group_is_exit_code_2(registry, capsys):
    assert main(["models", "list", "--registry", str(registry.root), "--group", "nothing"]) == 2
    assert "groups: digits, spam" in capsys.readouterr().err
    assert main(["models", "show", "nothing", "--registry", str(registry.root)]) == 2
    assert main(["models", "show", "digits", "9", "--registry", str(registry.root)]) == 2
    assert "versions: 1, 2, 3" in capsys.readouterr().err


def test_show_text_and_json(registry, capsys):
    assert main(["models", "show", "digits", "1", "--registry", str(registry.root)]) == 0
    text = capsys.readouterr().out
    fields = dict(line.split(":", 1) for line in text.splitlines()[:7])
    assert fields["version"].strip() == "1" and fields["job name"].strip() == "digits-1"
    assert "accuracy: 0.91" in text and '"name": "digits"' in text
    assert main(["models", "show", "digits", "--registry", str(registry.root), "--json"]) == 0
    latest = json.loads(capsys.readouterr().out)
    assert latest["version"] == 3 and latest["champion"] is False and latest["approval_status"] == "Rejected"


def test_approve_and_reject_move_the_champion(registry, capsys):
    assert main(["models", "reject", "digits", "2", "--registry", str(registry.root)]) == 0
    assert capsys.readouterr().out.strip() == "digits version 2: Rejected; champion: version 1"
    assert main(["models", "approve", "digits", "3", "--registry", str(registry.root)]) == 0
    assert capsys.readouterr().out.strip() == "digits version 3: Approved; champion: version 3"
    assert registry.champion("digits").version == 3
    assert main(["models", "reject", "spam", "1", "--registry", str(registry.root)]) == 0
    assert "champion: none" in capsys.readouterr().out


def test_approve_needs_a_version_number(registry, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["models", "approve", "digits", "two", "--registry", str(registry.root)])
    assert caught.value.code == 2


def test_list_names_a_damaged_version_and_shows_the_rest(registry, capsys):
    """One corrupt entry.json made `models list` fail for the whole registry."""
    (registry.root / "digits" / "v2" / "entry.json").write_text("{not json")
    assert main(["models", "list", "--registry", str(registry.root)]) == 0
    captured = capsys.readouterr()
    versions = {(row[0], row[1]) for row in table_rows(captured.out)[1:]}
    assert versions == {("digits", "1"), ("digits", "3"), ("spam", "1")}
    assert "digits version 2 is damaged" in captured.err and "entry.json" in captured.err
    assert main(["models", "list", "--registry", str(registry.root), "--group", "digits", "--json"]) == 0
    captured = capsys.readouterr()
    assert [record["version"] for record in json.loads(captured.out)] == [1, 3]
