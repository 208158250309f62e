"""The port lock directory in a shared /tmp: created 0700, checked (owner, mode, not a link), lock files opened
without following links (issue 15, item 10). Each test uses a TMPDIR of its own."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile

import pytest

from trainops.backends.local import ports
from trainops.errors import JobFailed


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    return temporary / f"trainops-ports-{os.getuid()}"


def test_the_directory_is_created_private(private_tmp):
    with ports.reserve_port() as reservation:
        assert (private_tmp / f"{reservation.port}.lock").read_text() == f"pid {os.getpid()}"
    details = os.lstat(private_tmp)
    assert stat.S_ISDIR(details.st_mode) and stat.S_IMODE(details.st_mode) == 0o700


def test_a_link_in_place_of_the_directory_is_refused(private_tmp, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    private_tmp.symlink_to(elsewhere)
    with pytest.raises(JobFailed) as caught:
        ports.reserve_port()
    assert "symbolic link" in str(caught.value) and "TMPDIR" in str(caught.value)
    assert list(elsewhere.iterdir()) == []


def test_a_directory_open_to_others_is_refused(private_tmp):
    private_tmp.mkdir()
    private_tmp.chmod(0o777)
    with pytest.raises(JobFailed) as caught:
        ports.reserve_port()
    assert "mode 0777" in str(caught.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a directory to another user needs root")
def test_a_directory_of_another_user_is_refused_and_its_links_not_followed(private_tmp, tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    private_tmp.mkdir(mode=0o700)
    (private_tmp / "30000.lock").symlink_to(victim)
    os.chown(private_tmp, 65534, 65534)
    monkeypatch.setattr(ports, "PORT_RANGE", (30000, 30001))
    with pytest.raises(JobFailed) as caught:
        ports.reserve_port()
    assert "belongs to uid 65534" in str(caught.value)
    assert victim.read_text() == "precious\n"


def test_a_link_as_a_lock_file_is_never_written_through(private_tmp, tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    private_tmp.mkdir(mode=0o700)
    (private_tmp / "30000.lock").symlink_to(victim)
    monkeypatch.setattr(ports, "PORT_RANGE", (30000, 30001))
    with pytest.raises(JobFailed) as caught:
        ports.reserve_port()
    assert "30000.lock" in str(caught.value)
    assert victim.read_text() == "precious\n"


def test_a_block_is_locked_whole_and_skips_a_port_another_program_holds(private_tmp, monkeypatch):
    # A TensorFlow job of two hosts uses five consecutive ports; one of them bound by another program must move
    # the whole block, or the parameter server's bind fails with "Address already in use" mid-job.
    import socket

    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    squatter.bind(("127.0.0.1", 30002))
    squatter.listen()
    monkeypatch.setattr(ports, "PORT_RANGE", (30000, 30010))
    try:
        with ports.reserve_port(count=5, attempts=500) as reservation:
            block = range(reservation.port, reservation.port + 5)
            assert 30002 not in block and reservation.count == 5
            for port in block:  # every port of the block is locked, not only the first
                with open(private_tmp / f"{port}.lock", "a+") as handle, pytest.raises(BlockingIOError):
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with pytest.raises(RuntimeError, match="5 free consecutive"):
                ports.reserve_port(count=5, attempts=20)  # what is left cannot hold a second block
    finally:
        squatter.close()


def test_the_range_ends_where_the_kernels_ephemeral_ports_begin(tmp_path, monkeypatch):
    # Outgoing connections take source ports from the ephemeral range: a reserved port there can be taken before
    # the job's server binds it.
    fake = tmp_path / "ip_local_port_range"
    fake.write_text("32768\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", str(fake))
    assert ports._below_ephemeral() == (20000, 32768)
    fake.write_text("10000\t60999\n")  # too little room below: the whole range, and the bind test
    assert ports._below_ephemeral() == (20000, 40000)
    low, high = ports.PORT_RANGE
    ephemeral_low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    assert high <= ephemeral_low or ephemeral_low - low < 4096
