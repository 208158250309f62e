"""Local channels are the data where it lies, mounted into each emulated host as an FSx file system would be: never
copied, a real directory in the container (not a link into this machine), and read-only unless the channel's access
mode is rw. Needs the hosts' mount namespaces (root or user namespaces); the link fallback elsewhere is the weaker
promise the docs state."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainops.backends.local.container import namespaces_available

SCRIPT = Path(__file__).parent / "scripts" / "local" / "channel_probe.py"
pytestmark = [pytest.mark.system, pytest.mark.timeout(300),
              pytest.mark.skipif(not namespaces_available(), reason="needs mount namespaces (root or user ns)")]


def _run(tmp_path: Path, spec_text: str, *channels: str) -> dict:
    (tmp_path / "src").mkdir(exist_ok=True)
    shutil.copy(SCRIPT, tmp_path / "src" / SCRIPT.name)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: {SCRIPT.name}\nsource_dir: src\ninstance_type: ml.m5.large\ninstance_count: 2\n"
                    + spec_text)
    arguments = [part for channel in channels for part in ("--channel", channel)]
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "run", str(spec), "--job-name", "channel-probe-1",
                           "--workdir", str(tmp_path / "state"), *arguments],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads(line.split("CHANNELS ", 1)[1]) for line in done.stdout.splitlines() if "CHANNELS " in line]
    assert len(reports) == 2, done.stdout  # one per host
    return reports[0]


def _data(directory: Path) -> Path:
    directory.mkdir()
    (directory / "part-0.csv").write_text("1,2\n")
    return directory


def test_a_local_channel_is_mounted_read_only_and_never_written(tmp_path):
    data = _data(tmp_path / "staged")
    seen = _run(tmp_path, f"inputs:\n  train: {data}\n")
    assert seen["train"] == {"link": False, "files": ["part-0.csv"], "write": "read-only"}
    assert sorted(path.name for path in data.iterdir()) == ["part-0.csv"]  # the data, untouched


def test_an_fsx_channel_with_access_mode_rw_is_writable_like_its_mount(tmp_path):
    data = _data(tmp_path / "fsx")
    fsx = ("inputs:\n  shared:\n    file_system_id: fs-0123456789abcdef0\n    file_system_type: FSxLustre\n"
           "    directory_path: /fsx/shared\n    file_system_access_mode: rw\n"
           "subnets: [subnet-0123456789abcdef0]\nsecurity_group_ids: [sg-0123456789abcdef0]\n")
    seen = _run(tmp_path, fsx, f"shared={data}")
    assert seen["shared"]["link"] is False and seen["shared"]["write"] == "ok"
    assert (data / "written-by-the-job.txt").read_text() == "the job wrote here"
