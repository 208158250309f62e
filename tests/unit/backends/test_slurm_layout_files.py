"""Issue 39, class 1, for the slurm layout: a host's environment file (it holds the job's secrets) and the other
private files are written beside their name and renamed over it, mode 0600, never through a planted link; and the
node script reads what the job's ranks could rewrite as hostile (no hang on a FIFO, no huge file taken whole)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from support.hostile_files import REFUSED, finishes, plant

from trainops.backends.slurm import layout, node

SECRET = {"AWS_SECRET_ACCESS_KEY": "s3cr3t-" + "x" * 5000, "TRAINOPS_MASK_VARIABLES": "AWS_SECRET_ACCESS_KEY"}


def test_a_planted_link_is_replaced_not_followed_and_the_file_is_0600_and_whole(tmp_path):
    victim = tmp_path / "victims-file"
    victim.write_text("the victim's own contents")
    victim.chmod(0o644)
    target = tmp_path / "slurm" / "algo-1.env.json"
    target.parent.mkdir()
    target.symlink_to(victim)
    layout._write_private(target, SECRET)
    assert victim.read_text() == "the victim's own contents" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    details = os.lstat(target)
    assert stat.S_ISREG(details.st_mode) and stat.S_IMODE(details.st_mode) == 0o600
    assert json.loads(target.read_text()) == SECRET
    assert sorted(os.listdir(target.parent)) == ["algo-1.env.json"]  # no temporary left beside it


def test_a_reader_never_sees_half_a_file(tmp_path):
    """Rewritten by rename, the file a reader holds open keeps its whole old contents: the O_TRUNC it replaces
    would have emptied it under the reader."""
    target = tmp_path / "algo-1.env.json"
    layout._write_private(target, {"A": "old"})
    with open(target, encoding="utf-8") as reader:
        layout._write_private(target, SECRET)
        assert json.loads(reader.read()) == {"A": "old"}
    assert json.loads(target.read_text()) == SECRET


def test_an_existing_file_of_wider_mode_ends_0600(tmp_path):
    target = tmp_path / "request.json"
    target.write_text("{}")
    target.chmod(0o644)
    layout._write_private(target, {"B": "1"})
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and json.loads(target.read_text()) == {"B": "1"}


@pytest.mark.parametrize("kind", ["fifo", "sparse", "bad-json", "array"])
def test_the_node_script_refuses_a_hostile_plan_by_name(tmp_path, kind):
    plan = tmp_path / "slurm" / "job.json"
    plant(plan, kind)
    with pytest.raises(SystemExit) as raised:
        finishes(lambda: node.agent_command(str(tmp_path), "algo-2", ["orted"], {"SLURM_JOB_ID": "1"}))
    message = str(raised.value.code)
    assert message.startswith(f"trainops: cannot read {plan}: ") and REFUSED[kind] in message, message


def test_a_fifo_as_a_hosts_failure_file_does_not_hang_the_root_cause(tmp_path):
    (tmp_path / "hosts" / "algo-1" / "output").mkdir(parents=True)
    os.mkfifo(tmp_path / "hosts" / "algo-1" / "output" / "failure")
    (tmp_path / "hosts" / "algo-2" / "output").mkdir(parents=True)
    (tmp_path / "hosts" / "algo-2" / "output" / "failure").write_text("rank 1 ran out of memory\n")
    cause = finishes(lambda: node._root_cause(str(tmp_path), ["algo-1", "algo-2"], 1))
    assert cause == ("algo-2", "rank 1 ran out of memory")


def test_the_archives_go_where_the_output_is_by_a_name_nobody_can_guess_never_through_a_link(tmp_path):
    """Another user who can write the output path plants links at the temporary name the node used to take
    (``.model.tar.gz.<pid>.partial``) and at the final name: neither is followed, the archive is whole."""
    import tarfile

    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 1000)
    output = tmp_path / "output"
    output.mkdir()
    victims = {name: tmp_path / f"victim-{index}" for index, name in
               enumerate((f".model.tar.gz.{os.getpid()}.partial", "model.tar.gz"))}
    for name, victim in victims.items():
        victim.write_text("the victim's own contents")
        (output / name).symlink_to(victim)
    node._pack(str(model), str(output / "model.tar.gz"))
    assert all(victim.read_text() == "the victim's own contents" for victim in victims.values())
    assert not (output / "model.tar.gz").is_symlink()
    with tarfile.open(output / "model.tar.gz") as archive:
        assert archive.getnames() == ["weights.bin"]
        assert archive.extractfile("weights.bin").read() == b"w" * 1000  # type: ignore[union-attr]
    assert stat.S_IMODE((output / "model.tar.gz").stat().st_mode) == 0o644
    assert sorted(os.listdir(output)) == sorted(victims)  # the planted temporary link left alone, nothing else
