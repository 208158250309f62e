"""How the hosts of an mpirun job find each other, and what mpirun says when a rank fails.

On SageMaker (as the AWS toolkit does): the master waits until every worker's ssh port answers, then runs mpirun; a
worker starts ``sshd`` and waits for the Open MPI daemon (``orted``) that the master's mpirun starts on it to appear and
then end.

In a local simulation there is no ssh: every rank runs on this machine under the master host's mpirun. Each other
host's launcher registers with the master over a Linux abstract socket named after the job and its rendezvous port
(nothing on disk, nothing on the network), sending its host name, record directory and plan environment. The master
writes each host's environment to ``TRAINOPS_HOST_ENV_DIR/<host>.json`` (each rank applies its own host's), runs
mpirun, and sends every worker the outcome, which each writes to its own ``output/failure`` or ``output/success``.

Through an agent (a Slurm job's nodes: `MeetingDirectory`), the hosts are other machines that all see one directory:
each other host writes the same registration there as a file, the master waits for every host's, and the outcome is
a file too.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainops.runtime.contract import ContractError
from trainops.runtime.records import ENVIRONMENT_LIMIT_BYTES, write_json_atomically
from trainops.runtime.untrusted import read_json, unreadable

#: How long the master waits for the other hosts, and a worker for the master: the toolkit's hour on SageMaker;
#: five minutes in a local simulation, where every launcher starts within seconds of the others.
DEFAULT_WAIT_SECONDS = 3600.0
LOCAL_WAIT_SECONDS = 300.0

SSHD = "/usr/sbin/sshd"
_DAEMON_NAMES = ("orted", "prted")


class CoordinationError(RuntimeError):
    """The hosts of an mpirun job could not meet (a host never came, the master went away)."""


def _address(name: str) -> str:
    return "\0" + name


def _send_line(connection: socket.socket, message: dict[str, Any]) -> None:
    connection.sendall(json.dumps(message).encode("utf-8") + b"\n")


def _read_line(connection: socket.socket, should_stop: Callable[[], bool], deadline: float) -> dict[str, Any] | None:
    """One JSON line from the connection; None when the peer closed it first, or sent no JSON line within
    ENVIRONMENT_LIMIT_BYTES (any local user can connect to an abstract socket). Polls ``should_stop``."""
    buffer = b""
    connection.settimeout(0.2)
    while b"\n" not in buffer:
        if should_stop():
            raise InterruptedError("stopped")
        if time.monotonic() > deadline:
            raise TimeoutError("no answer in time")
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return None
        if not chunk or len(buffer) + len(chunk) > ENVIRONMENT_LIMIT_BYTES:
            return None
        buffer += chunk
    try:
        message = json.loads(buffer.split(b"\n", 1)[0])
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


@dataclass
class Registration:
    """One worker host as it registered with the master."""

    host: str
    record_dir: str
    env: dict[str, str]
    connection: socket.socket | None = field(default=None, repr=False)


def _registered(host: str, message: dict[str, Any], connection: socket.socket | None = None) -> Registration:
    """What ``host`` registered (``message``), its environment an object of strings."""
    env = message.get("env") or {}
    if not isinstance(env, dict):
        raise CoordinationError(f"host {host} registered an environment that is not an object: {env!r:.80}")
    return Registration(host=host, record_dir=str(message.get("record_dir", "")),
                        env={str(k): str(v) for k, v in env.items()}, connection=connection)


class _Meeting:
    """The master's wait for the other hosts, whichever way they register (`MasterCoordinator`, `MeetingDirectory`):
    each says how it takes what has arrived (``_receive``, waiting at most a moment) and where (``where``)."""

    where = ""
    workers: dict[str, Registration]

    def _receive(self, missing: list[str], should_stop: Callable[[], bool]) -> None:
        raise NotImplementedError

    def _pause(self) -> None:
        """Between two looks that found a host missing (nothing when ``_receive`` itself waits)."""

    def wait_for(self, hosts: tuple[str, ...], should_stop: Callable[[], bool],
                 timeout: float = DEFAULT_WAIT_SECONDS) -> dict[str, Registration]:
        """Take registrations until every host in ``hosts`` has registered. Raises :class:`CoordinationError` after
        ``timeout`` seconds and ``InterruptedError`` when ``should_stop()`` turns true."""
        deadline = time.monotonic() + timeout
        while missing := sorted(set(hosts) - set(self.workers)):
            self._receive(missing, should_stop)
            if not (missing := sorted(set(hosts) - set(self.workers))):
                break
            if should_stop():
                raise InterruptedError("stopped")
            if time.monotonic() > deadline:
                raise CoordinationError(f"hosts {', '.join(missing)} did not register {self.where} within "
                                        f"{timeout:.0f} s")
            self._pause()
        return dict(self.workers)


class MasterCoordinator(_Meeting):
    """The master host's side of a local mpirun job: accepts the other hosts' registrations, later tells them how the
    job ended."""

    where = "with the master"

    def __init__(self, name: str):
        self.name = name
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.server.bind(_address(name))
        except OSError as error:
            self.server.close()
            raise CoordinationError(f"another launcher already serves {name!r} ({error}): is the same job (same "
                                    "name and TRAINOPS_MASTER_PORT) running twice?") from None
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.workers: dict[str, Registration] = {}

    def _receive(self, missing: list[str], should_stop: Callable[[], bool]) -> None:
        """Accept one registration, waiting at most the socket's timeout (0.2 s) for it."""
        try:
            connection, _ = self.server.accept()
        except TimeoutError:
            return
        try:
            message = _read_line(connection, should_stop, time.monotonic() + 30)
        except TimeoutError:
            message = None
        try:
            if not message or message.get("host") not in missing:
                raise CoordinationError("not a registration this launch waits for")
            self.workers[message["host"]] = _registered(message["host"], message, connection)
        except CoordinationError:  # anything else on the socket is left unanswered; the host may try again
            connection.close()

    def finish(self, result: dict[str, Any]) -> None:
        """Tell every registered worker how the job ended, then close everything."""
        for registration in self.workers.values():
            if registration.connection is None:
                continue
            try:
                _send_line(registration.connection, result)
            except OSError:
                pass
            registration.connection.close()
        self.server.close()


def register_with_master(name: str, host: str, record_dir: str, env: dict[str, str],
                         should_stop: Callable[[], bool], timeout: float = DEFAULT_WAIT_SECONDS) -> socket.socket:
    """A worker host's registration with the local master (retried until the master listens). Returns the open
    connection the outcome will arrive on."""
    deadline = time.monotonic() + timeout
    while True:
        if should_stop():
            raise InterruptedError("stopped")
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(_address(name))
            _send_line(connection, {"host": host, "record_dir": record_dir, "env": env})
            return connection
        except OSError:
            connection.close()
            if time.monotonic() > deadline:
                raise CoordinationError(f"the master host's launcher did not answer on {name!r} within "
                                        f"{timeout:.0f} s") from None
            time.sleep(0.2)


def wait_for_outcome(connection: socket.socket, should_stop: Callable[[], bool],
                     timeout: float = 10 * 24 * 3600.0) -> dict[str, Any] | None:
    """The outcome the master sends when its mpirun ends; None when the master went away without one."""
    try:
        return _read_line(connection, should_stop, time.monotonic() + timeout)
    finally:
        connection.close()


def write_host_environment(directory: str, host: str, env: dict[str, str]) -> str:
    """Write one simulated host's environment for its ranks (``<directory>/<host>.json``)."""
    if "/" in host or host in ("", ".", ".."):
        raise ContractError(f"host name {host!r} cannot name a file")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{host}.json")
    write_json_atomically(path, env)
    return path


# --- through an agent: hosts that share a directory ----------------------------------------------------------


def _read_json(path: str) -> dict[str, Any] | None:
    """The object in ``path``; None while it is not there (it is written by rename: never half of it). Every host
    of the job, and whoever else can write the shared directory, could have put anything there, so it is read as
    hostile (`read_json`: bounded, a regular file only, never blocking on a FIFO); anything but a JSON object is a
    `CoordinationError` naming the file, at once, not a wait that lasts until the timeout."""
    try:
        return read_json(path, ENVIRONMENT_LIMIT_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise CoordinationError(f"cannot read {unreadable(error)}; the hosts of this launch write it, so remove it "
                                "and start the job again") from None


class MeetingDirectory(_Meeting):
    """Where the hosts of one mpirun launch meet when they are machines that share a file system: ``registered/
    <host>.json`` (a worker's registration: host, record directory, plan environment), ``hosts/<host>.json`` (what
    each host's ranks apply, `TRAINOPS_HOST_ENV_DIR`, written by the master) and ``outcome.json``. The directory is
    the launch's own (the slurm backend names it after the job and its step), so nothing in it is stale."""

    OUTCOME = "outcome.json"

    def __init__(self, path: str, poll_seconds: float = 0.2, outcome_poll_seconds: float = 1.0):
        self.path = path
        self.where = f"in {path}"
        # Registrations come within seconds of each other; the outcome may be hours away, and every worker host
        # looks for it on the shared file system (on a cluster's Lustre, each look is a metadata request).
        self.poll_seconds, self.outcome_poll_seconds = poll_seconds, outcome_poll_seconds
        self.workers: dict[str, Registration] = {}
        os.makedirs(os.path.join(path, "registered"), mode=0o700, exist_ok=True)

    def _registration(self, host: str) -> str:
        if "/" in host or host in ("", ".", ".."):
            raise ContractError(f"host name {host!r} cannot name a file")
        return os.path.join(self.path, "registered", f"{host}.json")

    def register(self, host: str, record_dir: str, env: dict[str, str]) -> None:
        """A worker host's registration (the master reads it when every host has written its own)."""
        write_json_atomically(self._registration(host), {"host": host, "record_dir": record_dir, "env": env})

    def _receive(self, missing: list[str], should_stop: Callable[[], bool]) -> None:
        for host in missing:
            found = _read_json(self._registration(host))
            if found is not None:
                self.workers[host] = _registered(host, found)

    def _pause(self) -> None:
        time.sleep(self.poll_seconds)

    def finish(self, result: dict[str, Any]) -> None:
        """Tell every host how the job ended."""
        write_json_atomically(os.path.join(self.path, self.OUTCOME), result)

    def wait_for_outcome(self, should_stop: Callable[[], bool],
                         timeout: float = 10 * 24 * 3600.0) -> dict[str, Any] | None:
        """A worker's wait for the master's outcome; None after ``timeout`` (the batch system ends a job whose
        master host is gone long before)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _read_json(os.path.join(self.path, self.OUTCOME))
            if found is not None:
                return found
            if should_stop():
                raise InterruptedError("stopped")
            time.sleep(self.outcome_poll_seconds)
        return None


# --- SageMaker: ssh between hosts, as the toolkit does ---------------------------------------------------------


def can_connect(host: str, port: int = 22, timeout: float = 2.0) -> bool:
    """Whether ``host:port`` accepts a TCP connection (a worker's sshd is up)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_ssh(hosts: tuple[str, ...], should_stop: Callable[[], bool],
                 timeout: float = DEFAULT_WAIT_SECONDS, interval: float = 1.0) -> None:
    """Wait until every host's ssh port answers (the master, before mpirun)."""
    deadline = time.monotonic() + timeout
    for host in hosts:
        while not can_connect(host):
            if should_stop():
                raise InterruptedError("stopped")
            if time.monotonic() > deadline:
                raise CoordinationError(f"host {host} did not open its ssh port within {timeout:.0f} s")
            time.sleep(interval)


def start_sshd() -> subprocess.Popen | None:
    """Start the ssh daemon mpirun reaches this worker through; None (and a message) when the image has none."""
    if not os.path.exists(SSHD):
        return None
    return subprocess.Popen([SSHD, "-D"])


def daemon_pids(proc_root: str = "/proc") -> list[int]:
    """Pids of the Open MPI daemons (``orted``, ``prted``) running here."""
    pids = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "comm"), encoding="utf-8") as handle:
                if handle.read().strip() in _DAEMON_NAMES:
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def wait_for_daemon(should_stop: Callable[[], bool], appear_timeout: float = 300.0, interval: float = 1.0) -> bool:
    """A worker's wait: for the Open MPI daemon to appear (up to ``appear_timeout``), then for it to end. False when
    it never appeared."""
    deadline = time.monotonic() + appear_timeout
    while not daemon_pids():
        if should_stop():
            raise InterruptedError("stopped")
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    while daemon_pids():
        if should_stop():
            raise InterruptedError("stopped")
        time.sleep(interval)
    return True


# --- what mpirun reports ---------------------------------------------------------------------------------------

_SIGNALLED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_EXITED = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]\s*\n\s*Exit code:\s*(-?\d+)")


def parse_mpirun_report(text: str) -> dict[str, Any] | None:
    """The first failed rank Open MPI's mpirun names in its output: ``{"rank", "exit_code"}`` (negative for a
    signal, as ``subprocess`` reports it), or None when it names none."""
    signalled = _SIGNALLED.search(text)
    exited = _EXITED.search(text)
    if signalled and (not exited or signalled.start() < exited.start()):
        return {"rank": int(signalled.group(1)), "exit_code": -int(signalled.group(3))}
    if exited:
        return {"rank": int(exited.group(1)), "exit_code": int(exited.group(2))}
    return None
