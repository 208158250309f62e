"""StageDataOperator and RegisterModelOperator on the local backend: the steps run for real in temporary directories."""

from __future__ import annotations

import os
from types import SimpleNamespace

from support.airflow_home import isolate_airflow_home

isolate_airflow_home()

import pytest  # noqa: E402
from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402

from trainops.operators.lineage import LINEAGE_ATTRIBUTE  # noqa: E402
from trainops.operators.register import RegisterModelOperator  # noqa: E402
from trainops.operators.stage import StageDataOperator  # noqa: E402

CONTEXT = {"ti": SimpleNamespace(dag_id="retrain", task_id="t", run_id="r", map_index=-1)}


def test_stage_template_fields_exist():
    op = StageDataOperator(task_id="stage", source="a", destination="b")
    for field in ("source", "destination", "backend", "aws_conn_id", "region_name"):
        assert field in op.template_fields and hasattr(op, field)


def test_stage_copies_a_tree_and_returns_the_report(tmp_path):
    source = tmp_path / "raw"
    (source / "train").mkdir(parents=True)
    (source / "train" / "part-0.npz").write_bytes(b"0" * 1000)
    (source / "test.npz").write_bytes(b"1" * 10)
    op = StageDataOperator(task_id="stage", source=str(source), destination=str(tmp_path / "fsx"))
    report = op.execute(CONTEXT)
    assert (report["files_copied"], report["bytes_copied"], report["ok"]) == (2, 1010, True)
    assert (tmp_path / "fsx" / "train" / "part-0.npz").read_bytes() == b"0" * 1000
    assert getattr(op, LINEAGE_ATTRIBUTE) == {"inputs": [("file", str(source))],
                                              "outputs": [("file", str(tmp_path / "fsx"))]}
    again = op.execute(CONTEXT)  # a retry re-stages nothing that is already there
    assert (again["files_copied"], again["files_skipped"]) == (0, 2)


def test_stage_fails_the_task_when_a_file_is_refused(tmp_path):
    source = tmp_path / "raw"
    source.mkdir()
    (source / "good.txt").write_text("ok")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", source / "escape.txt")
    with pytest.raises(AirflowException) as raised:
        StageDataOperator(task_id="stage", source=str(source), destination=str(tmp_path / "fsx")).execute(CONTEXT)
    assert "escape.txt" in str(raised.value)
    assert not (tmp_path / "fsx" / "escape.txt").exists()


def test_stage_refuses_an_unknown_option_by_name(tmp_path):
    op = StageDataOperator(task_id="stage", source=str(tmp_path), destination=str(tmp_path / "d"),
                           options={"compression": "zstd"})
    with pytest.raises(AirflowFailException, match="compression"):
        op.execute(CONTEXT)


def test_register_records_a_version_and_returns_small_json(tmp_path):
    artifact = tmp_path / "model.tar.gz"
    artifact.write_bytes(b"model")
    op = RegisterModelOperator(task_id="register", model_artifact=str(artifact), metrics={"accuracy": 0.97},
                               group="digits-classifier", registry_dir=str(tmp_path / "registry"),
                               job_name="digits-0123456789", spec={"name": "digits"})
    entry = op.execute(CONTEXT)
    assert (entry["group"], entry["version"], entry["approval_status"], entry["champion"]) == (
        "digits-classifier", 1, "Approved", True)
    assert entry["metrics"] == {"accuracy": 0.97} and entry["job_name"] == "digits-0123456789"
    assert os.path.isfile(entry["model_artifact"]) and entry["model_artifact"] != str(artifact)
    retried = op.execute(CONTEXT)  # a retried task registers the same training job once, not twice
    assert retried["version"] == 1 and retried.get("already_registered") is True


def test_register_refuses_bad_input_naming_every_field(tmp_path):
    op = RegisterModelOperator(task_id="register", model_artifact=str(tmp_path / "m.tar.gz"), metrics={},
                               group="g", approval="Maybe", backend="local", registry_dir=str(tmp_path))
    with pytest.raises(AirflowFailException, match="approval"):
        op.execute(CONTEXT)


@pytest.mark.parametrize("options", [None, {"region": "eu-west-1"}])
def test_stage_reads_its_backend_connection_once_per_execute(tmp_path, monkeypatch, options):
    """``backend_conn_id``: the connection is read once per execute, whether the task stages on the opened backend or
    hands the step the name and settings with context options (``region``) for it to open the backend with."""
    from support.connection_reads import connection_reads

    reads = connection_reads(monkeypatch, "team_stage",
                             {"backend": "local", "options": {"workdir": str(tmp_path / "work")}})
    source = tmp_path / "raw"
    source.mkdir()
    (source / "a.txt").write_text("a")
    op = StageDataOperator(task_id="stage", source=str(source), destination=str(tmp_path / "fsx"),
                           backend_conn_id="team_stage", options=options)
    assert op.execute(CONTEXT)["files_copied"] == 1
    assert reads == ["team_stage"]
