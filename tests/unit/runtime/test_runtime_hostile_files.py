"""Issue 39, class 2, in the runtime: every file a rank, a job or another host can write is read as hostile.

A FIFO in place of the file does not hang the reader, a huge (sparse) file is refused naming the file, and a file
that is not the JSON it should be is a clear error naming it, never a raw ``JSONDecodeError``. Each hang-prone read
runs in a daemon thread (or a process) waited on with a bound: a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid

import pytest
from support.hostile_files import HANG_SECONDS, REFUSED, finishes, plant
from test_runtime_rank import run_rank

from trainops.runtime import mpi_coordination as coordination
from trainops.runtime import untrusted
from trainops.runtime.context import job_context
from trainops.runtime.contract import ContractError, read_contract
from trainops.runtime.output_relay import _Stream


def never() -> bool:
    return False


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_the_json_reader_refuses_each_hostile_file_by_name(tmp_path, kind):
    path = tmp_path / "record.json"
    plant(path, kind)
    with pytest.raises((untrusted.UnsafeFile, untrusted.CorruptFile)) as raised:
        finishes(lambda: untrusted.read_json(path, 1024 * 1024))
    assert untrusted.unreadable(raised.value).startswith(f"{path}: "), untrusted.unreadable(raised.value)
    assert REFUSED[kind] in untrusted.unreadable(raised.value)


def test_the_json_reader_reads_a_good_file_and_says_when_one_is_missing(tmp_path):
    path = tmp_path / "record.json"
    path.write_text('{"a": [1]}')
    assert untrusted.read_json(path, 100) == {"a": [1]}
    assert untrusted.read_json(path, 100, expect=object) == {"a": [1]}
    with pytest.raises(FileNotFoundError):
        untrusted.read_json(tmp_path / "missing.json", 100)


# --- the hosts of an mpirun launch that meet in a shared directory (a Slurm job's nodes) ------------------------------
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_hostile_registration_ends_the_wait_at_once_naming_the_file(tmp_path, kind):
    meeting = coordination.MeetingDirectory(str(tmp_path / "mpi"), poll_seconds=0.01)
    meeting.register("algo-2", "/records/algo-2", {})
    planted = tmp_path / "mpi" / "registered" / "algo-3.json"
    plant(planted, kind)
    with pytest.raises(coordination.CoordinationError) as raised:
        finishes(lambda: meeting.wait_for(("algo-2", "algo-3"), never, timeout=3600))
    assert f"cannot read {planted}: " in str(raised.value) and REFUSED[kind] in str(raised.value), raised.value


@pytest.mark.parametrize("kind", ["fifo", "sparse", "bad-json"])
def test_a_hostile_outcome_is_a_clear_error_for_the_worker(tmp_path, kind):
    meeting = coordination.MeetingDirectory(str(tmp_path / "mpi"), outcome_poll_seconds=0.01)
    plant(tmp_path / "mpi" / "outcome.json", kind)
    with pytest.raises(coordination.CoordinationError, match=f"outcome.json: .*{REFUSED[kind][:12]}"):
        finishes(lambda: meeting.wait_for_outcome(never, timeout=3600))


def test_a_registration_whose_environment_is_not_an_object_is_named(tmp_path):
    meeting = coordination.MeetingDirectory(str(tmp_path / "mpi"), poll_seconds=0.01)
    (tmp_path / "mpi" / "registered" / "algo-2.json").write_text(json.dumps({"host": "algo-2", "env": [1]}))
    with pytest.raises(coordination.CoordinationError, match="host algo-2 registered an environment that is not"):
        meeting.wait_for(("algo-2",), never, timeout=3600)


def send_quietly(connection: socket.socket, data: bytes) -> None:
    try:
        connection.sendall(data)
    except OSError:
        pass  # the master closed it after what it would read: the point


def test_the_master_socket_ignores_what_is_not_a_registration(tmp_path):
    """Any local user can connect to an abstract socket: a JSON array, an endless line or a foreign host is closed
    unanswered, and the true registration that follows is taken."""
    name = f"trainops-test/{uuid.uuid4()}"
    master = coordination.MasterCoordinator(name)
    try:
        for junk in (b"[1, 2]\n", b"{" * 100 + b"\n", b'{"host": "algo-9"}\n', b'{"host": "algo-2", "env": 3}\n',
                     b"x" * (coordination.ENVIRONMENT_LIMIT_BYTES + 1)):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as intruder:
                intruder.connect("\0" + name)  # queued before the wait: its one accept takes this connection
                sender = threading.Thread(target=send_quietly, args=(intruder, junk), daemon=True)
                sender.start()  # more than a socket buffer holds: sent while the master reads
                with pytest.raises(coordination.CoordinationError, match="algo-2 did not register"):
                    master.wait_for(("algo-2",), never, timeout=0.01)
                sender.join(HANG_SECONDS)
                assert not sender.is_alive()
        connection = coordination.register_with_master(name, "algo-2", "/records/algo-2", {"A": "1"}, never,
                                                       timeout=HANG_SECONDS)
        registered = master.wait_for(("algo-2",), never, timeout=HANG_SECONDS)
        assert registered["algo-2"].env == {"A": "1"} and registered["algo-2"].record_dir == "/records/algo-2"
        connection.close()
    finally:
        master.finish({})


# --- a rank's own host environment, the contract's config files, the tail file --------------------------------------
MPI_RANK = {"TRAINOPS_LAUNCH_MODE": "mpirun", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
            "TRAINOPS_PROCESSES_PER_HOST": "1", "SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-1"}


@pytest.mark.parametrize("kind", ["fifo", "sparse", "bad-json", "array", "missing"])
def test_a_rank_refuses_a_hostile_or_missing_host_environment_by_name(tmp_path, kind):
    """The master writes every host's environment before mpirun starts a rank: a rank never runs without its own
    (as another host, silently) and never blocks on a FIFO there (run_rank's process has a 60 s bound)."""
    host_env_dir = tmp_path / "hosts"
    host_env_dir.mkdir()
    if kind != "missing":
        plant(host_env_dir / "algo-2.json", kind)
    result = run_rank(tmp_path, "print('the script ran')", env={**MPI_RANK, "TRAINOPS_HOST_ENV_DIR": str(host_env_dir)})
    assert result.returncode == 1 and "the script ran" not in result.stdout
    expected = "No such file or directory" if kind == "missing" else REFUSED[kind]
    assert (f"trainops: rank 1 cannot take host algo-2's environment: {host_env_dir / 'algo-2.json'}: "
            in result.stderr and expected in result.stderr), result.stderr
    assert "Traceback" not in result.stderr


def write_contract(base, hyperparameters: str | None = None):
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    if hyperparameters is not None:
        (config / "hyperparameters.json").write_text(hyperparameters)
    return config


@pytest.mark.parametrize("kind", ["fifo", "sparse", "bad-json", "nested"])
def test_a_hostile_config_file_is_a_contract_error_naming_it(tmp_path, kind):
    config = write_contract(tmp_path)
    plant(config / "hyperparameters.json", kind)
    for read in (lambda: read_contract(str(tmp_path), {}), lambda: job_context({"TRAINOPS_BASE_DIR": str(tmp_path)})):
        with pytest.raises(ContractError) as raised:
            finishes(read)
        assert f"cannot read {config / 'hyperparameters.json'}: " in str(raised.value), raised.value
        assert REFUSED[kind] in str(raised.value)


def test_a_good_contract_still_reads(tmp_path):
    write_contract(tmp_path, json.dumps({"epochs": "3"}))
    assert read_contract(str(tmp_path), {}).hyperparameters == {"epochs": "3"}
    assert job_context({"TRAINOPS_BASE_DIR": str(tmp_path)}).hyperparameters == {"epochs": 3}


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_fifo_or_link_as_the_tail_file_gives_up_the_tail_not_the_output(tmp_path, kind):
    tail = tmp_path / "rank-0.tail"
    kept = tmp_path / "someone-elses"
    kept.write_bytes(b"untouched")
    if kind == "fifo":
        os.mkfifo(tail)
    else:
        tail.symlink_to(kept)
    stream = _Stream(-1, -1, b"", str(tail))
    finishes(lambda: stream.append_tail(b"a line\n"))
    assert stream.tail_file is None and kept.read_bytes() == b"untouched"


def test_the_tail_file_is_cut_back_to_its_last_part(tmp_path, monkeypatch):
    from trainops.runtime import records

    monkeypatch.setattr(records, "TAIL_LIMIT_BYTES", 100)
    monkeypatch.setattr(records, "TAIL_KEEP_BYTES", 10)
    stream = _Stream(-1, -1, b"", str(tmp_path / "rank-0.tail"))
    for index in range(30):
        stream.append_tail(f"line {index:02d}\n".encode())
    assert (tmp_path / "rank-0.tail").read_bytes().endswith(b"line 29\n") and stream.tail_size <= 100


# --- what the runtime writes where ranks can write: by rename, never through a planted link or FIFO ------------------
@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_success_and_the_health_report_replace_a_planted_fifo_or_link(tmp_path, kind):
    from trainops.runtime import healthcheck
    from trainops.runtime.failure import write_success

    victim = tmp_path / "victim"
    victim.write_text("the victim's own contents")
    output = tmp_path / "output"
    output.mkdir()
    for name in ("success", "healthcheck-algo-1.json"):
        if kind == "fifo":
            os.mkfifo(output / name)
        else:
            (output / name).symlink_to(victim)
    finishes(lambda: write_success(str(output / "success")))
    finishes(lambda: healthcheck.write_report({"host": "algo-1", "passed": True}, str(output)))
    assert victim.read_text() == "the victim's own contents"
    assert (output / "success").is_file() and not (output / "success").is_symlink()
    assert (output / "success").read_bytes() == b""
    assert json.loads((output / "healthcheck-algo-1.json").read_text()) == {"host": "algo-1", "passed": True}
    assert sorted(os.listdir(output)) == ["healthcheck-algo-1.json", "success"]
