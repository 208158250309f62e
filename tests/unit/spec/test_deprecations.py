"""`trainops validate` warns, in one line and with exit 0, about configurations that work but are deprecated."""

from __future__ import annotations

from datetime import date

from trainops.cli import main
from trainops.spec.deprecations import deprecation_warnings
from trainops.spec.job import JobSpec

SMP_V1 = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
          "mpi": {"enabled": True, "processes_per_host": 8}}


def spec(**fields):
    return JobSpec(**{"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", **fields})


def test_smp_v1_is_deprecated():
    notes = deprecation_warnings(spec(framework_version="2.8.0", distribution=SMP_V1), today=date(2026, 11, 30))
    assert len(notes) == 1 and "SMP v1" in notes[0]


def test_an_image_older_than_two_years_is_named_with_its_release():
    notes = deprecation_warnings(spec(framework_version="2.3.0"), today=date(2026, 11, 30))
    assert notes == [notes[0]] and "PyTorch 2.3.0" in notes[0] and "2024-04" in notes[0]
    # two years to the month is not yet "more than two years"
    assert deprecation_warnings(spec(framework_version="2.3.0"), today=date(2026, 4, 30)) == []
    assert deprecation_warnings(spec(framework_version="2.8.0"), today=date(2026, 11, 30)) == []
    # a user's own image is the user's business
    assert deprecation_warnings(spec(image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/x:1",
                                     framework_version="1.13.1"), today=date(2026, 11, 30)) == []


def test_validate_prints_one_warning_line_and_exits_0(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    (tmp_path / "train.py").write_text("")  # validate checks the entry point beside the spec, as run does
    path.write_text("entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nframework_version: '1.13.1'\n"
                    "distribution: {smdistributed: {modelparallel: {enabled: true, parameters: {partitions: 2}}}, "
                    "mpi: {enabled: true, processes_per_host: 8}}\n")
    assert main(["validate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "valid" in out
    lines = [line for line in err.strip().splitlines() if not line.startswith(("forecast:", "  "))]  # issue 25
    assert len(lines) == 1 and "warning:" in lines[0] and "SMP v1" in lines[0] and "1.13.1" in lines[0]


def test_a_current_spec_gets_no_warning(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    (tmp_path / "train.py").write_text("")
    path.write_text("entry_point: train.py\ninstance_type: local\n")
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().err == ""
