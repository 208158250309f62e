"""Issue 39, class 1, for the slurm layout: a host's environment file (it holds the job's secrets) and the other
private files are written beside their name and renamed over it, mode 0600, never through a planted link; and the
node script reads what the job's ranks could rewrite as hostile (no hang on a FIFO, no huge file taken whole)."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
from support import other_user
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
    directory = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    try:
        node._pack(str(model), directory, "model.tar.gz")
    finally:
        os.close(directory)
    assert all(victim.read_text() == "the victim's own contents" for victim in victims.values())
    assert not (output / "model.tar.gz").is_symlink()
    with tarfile.open(output / "model.tar.gz") as archive:
        assert archive.getnames() == ["weights.bin"]
        assert archive.extractfile("weights.bin").read() == b"w" * 1000  # type: ignore[union-attr]
    assert stat.S_IMODE((output / "model.tar.gz").stat().st_mode) == 0o644
    assert sorted(os.listdir(output)) == sorted(victims)  # the planted temporary link left alone, nothing else


def _finished_job(tmp_path, output_root):
    """A job directory as the layout leaves it, its host 1 having trained: the plan names ``output_root``."""
    job_dir = tmp_path / "job"
    (job_dir / "hosts" / "algo-1" / "model").mkdir(parents=True)
    (job_dir / "hosts" / "algo-1" / "model" / "weights.bin").write_bytes(b"w" * 100)
    (job_dir / "hosts" / "algo-1" / "output" / "data").mkdir(parents=True)
    plan = {"job_name": "job-1", "hosts": ["algo-1"], "argv": ["true"],
            "output_dir": str(output_root / "job-1" / "output"), "output_root": str(output_root),
            "output_parts": ["job-1", "output"]}
    (job_dir / "slurm").mkdir()
    (job_dir / "slurm" / "job.json").write_text(json.dumps(plan))
    return job_dir


def test_a_planted_output_link_is_refused_naming_it_and_its_target_untouched(tmp_path):
    """Another user who can write the output root makes ``<job>/output`` a link to a directory of the job's user:
    the node packs through an open directory and refuses the link, naming it; nothing lands in the target."""
    output_root = tmp_path / "shared-output"
    (output_root / "job-1").mkdir(parents=True)
    victim = tmp_path / "victims-directory"
    victim.mkdir()
    (output_root / "job-1" / "output").symlink_to(victim)
    job_dir = _finished_job(tmp_path, output_root)
    assert node.finish(str(job_dir), 0) == 1
    ended = json.loads((job_dir / "ended.json").read_text())
    reason = ended["failure_reason"]
    assert ended["status"] == "Failed" and f"{output_root / 'job-1' / 'output'} is a symbolic link" in reason, reason
    assert os.listdir(victim) == [] and (output_root / "job-1" / "output").is_symlink()


def test_the_node_packs_both_archives_into_the_output_directory(tmp_path):
    output_root = tmp_path / "shared-output"
    job_dir = _finished_job(tmp_path, output_root)
    assert node.finish(str(job_dir), 0) == 0
    ended = json.loads((job_dir / "ended.json").read_text())
    assert ended["status"] == "Completed" and ended["model_artifact"] == str(output_root / "job-1" / "output" /
                                                                              "model.tar.gz"), ended
    assert sorted(os.listdir(output_root / "job-1" / "output")) == ["model.tar.gz", "output.tar.gz"]


def test_the_layout_refuses_a_planted_output_link_before_anything_is_submitted(tmp_path):
    from trainops.errors import SpecError

    output_root = tmp_path / "shared-output"
    (output_root / "job-1").mkdir(parents=True)
    victim = tmp_path / "victims-directory"
    victim.mkdir()
    (output_root / "job-1" / "output").symlink_to(victim)
    request = {"OutputDataConfig": {"S3OutputPath": output_root.as_uri()}}
    with pytest.raises(SpecError) as raised:
        layout._check_output(request, "job-1", tmp_path / "job")
    message = str(raised.value)
    assert "output_path" in message and f"{output_root / 'job-1' / 'output'} is a symbolic link" in message, message
    assert os.listdir(victim) == []


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_the_host_log_is_never_opened_through_a_link_or_a_fifo(tmp_path, kind):
    victim = tmp_path / "victims-file"
    victim.write_text("the victim's own contents")
    log = tmp_path / "logs" / "algo-1.log"
    log.parent.mkdir()
    if kind == "link":
        log.symlink_to(victim)
    else:
        os.mkfifo(log)
    with pytest.raises(SystemExit) as raised:
        finishes(lambda: node.open_host_log(str(tmp_path), "algo-1"))
    message = str(raised.value.code)
    assert message.startswith("trainops: ") and str(log) in message, message
    assert victim.read_text() == "the victim's own contents"


def test_the_host_log_is_appended_to(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "algo-1.log").write_text("first\n")
    descriptor = node.open_host_log(str(tmp_path), "algo-1")
    try:
        os.write(descriptor, b"second\n")
        assert os.get_blocking(descriptor)
    finally:
        os.close(descriptor)
    assert (tmp_path / "logs" / "algo-1.log").read_text() == "first\nsecond\n"


@pytest.mark.skipif(not other_user.available(), reason="needs root with useradd and setpriv, to act as another user")
@pytest.mark.parametrize("planted", ["link", "directory"])
def test_another_user_who_can_write_the_output_root_cannot_redirect_the_archives(tmp_path, planted):
    """A real second account plants ``<job>/output`` as a link to a directory of the job's user, or makes ``<job>``
    its own directory first: the node refuses either, naming it, and writes nothing anywhere."""
    output_root = other_user.shared_directory("trainops-slurm-output-")
    try:
        victim = tmp_path / "victims-directory"
        victim.mkdir()
        if planted == "link":
            (output_root / "job-1").mkdir()
            (output_root / "job-1").chmod(0o777)
            other_user.as_rival("ln", "-s", str(victim), str(output_root / "job-1" / "output"))
            expected = f"{output_root / 'job-1' / 'output'} is a symbolic link"
        else:
            other_user.as_rival("mkdir", "-m", "0777", str(output_root / "job-1"))
            expected = f"{output_root / 'job-1'} is owned by uid {other_user.rival()[0]}"
        job_dir = _finished_job(tmp_path, output_root)
        assert node.finish(str(job_dir), 0) == 1
        reason = json.loads((job_dir / "ended.json").read_text())["failure_reason"]
        assert expected in reason, reason
        assert os.listdir(victim) == [] and not (output_root / "job-1" / "output" / "model.tar.gz").exists()
    finally:
        shutil.rmtree(output_root, ignore_errors=True)
