"""`trainops kfp`: exit codes, options, and no kfp import for the rest of the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from trainops.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_building_the_command_line_does_not_import_kfp():
    code = ("import sys, trainops.cli; trainops.cli.build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kfp'))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_compile_with_an_image_of_our_own_installs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    output = tmp_path / "out.yaml"
    assert main(["kfp", "compile", "examples/digits/pipeline.yaml", "-o", str(output), "--image",
                 "registry.example.com/trainops:0.1.0", "--pipeline-dir", "/opt/trainops/examples/digits",
                 "--work-pvc", "trainops-work"]) == 0
    document = next(yaml.safe_load_all(output.read_text()))  # then the platform (Kubernetes) document
    executors = document["deploymentSpec"]["executors"].values()
    assert {executor["container"]["image"] for executor in executors} == {"registry.example.com/trainops:0.1.0"}
    assert "pip install" not in output.read_text()
    assert document["root"]["inputDefinitions"]["parameters"]["pipeline_dir"]["defaultValue"] == \
        "/opt/trainops/examples/digits"
    assert "compiled examples/digits/pipeline.yaml" in capsys.readouterr().out


def test_invalid_input_exits_2_for_both_commands(tmp_path, capsys):
    missing = str(tmp_path / "missing.yaml")
    assert main(["kfp", "compile", missing, "-o", str(tmp_path / "x.yaml")]) == 2
    assert main(["kfp", "run-local", missing]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps: {train: {spec: nope.yaml}, evaluate: {entry_point: e.py, gate: 3}}\n")
    assert main(["kfp", "run-local", str(bad), "--workdir", str(tmp_path / "w")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "w" / "kfp").exists()  # nothing ran
