"""An emulated host the kernel cleans up: `python host_init.py [--user-namespace] REPORT COMMAND...`.

Started by the controller as a host's launcher process (H). H dies with its controller (`PR_SET_PDEATHSIG`, SIGKILL)
and makes a mount and a PID namespace for the host (with ``--user-namespace``, where this user may not make them
directly, inside a user namespace of its own in which this user is root, as `unshare --user --map-root-user` does:
no privilege beyond this user's, and files keep this user's ownership); its one child (C) is PID 1 there and dies
with H (its own parent-death signal, which the kernel delivers to a namespace's init when it comes from the parent
namespace). When a PID namespace's init ends, the kernel kills every process left in it: so every process of the
host, daemons and double forks included, ends with the host or with its controller, however they end. No polling
or bookkeeping is on that path.

C mounts a /proc of the namespace (so the runtime inside sees its own pids), runs COMMAND (the mount script that
binds /opt/ml and /etc/hosts, then the container's entrypoint: L) as its child, passes SIGTERM / SIGINT / SIGHUP on
to it and reaps every orphan meanwhile. When L ends, C stops what L left in the host (SIGTERM, SIGKILL a second
later), writes to REPORT how L ended and how many processes it stopped, and exits; H then ends as L did (the same
exit code, or the same signal), so the controller reads the host's end as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
USER_NAMESPACE_FLAG = "--user-namespace"
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
DIE_WITH_PARENT = "TRAINOPS_HOST_PDEATHSIG"  # "1": the controller's launching thread is its main thread
#: The read end of a pipe whose write end only the controller holds: its end of file means the controller process
#: ended, whichever of its threads started this host (a parent-death signal follows the thread).
CONTROLLER_PIPE = "TRAINOPS_HOST_CONTROLLER_FD"
LEFT_GRACE_SECONDS = 1.0

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _die_with_parent(expected_parent: int) -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != expected_parent:  # the parent ended before the signal was asked for
        os._exit(128 + int(signal.SIGKILL))


def _forward_to(pid: int) -> None:
    def forward(number: int, _frame) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in FORWARDED:
        signal.signal(number, forward)


def _wait(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def _others() -> list[int]:
    """Every process of this namespace but this one (C is pid 1)."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and int(entry) != 1]


def _stop_the_rest() -> int:
    """SIGTERM what L left, SIGKILL it after `LEFT_GRACE_SECONDS`; returns how many were running."""
    left = set(_others())
    if not left:
        return 0
    _signal_all(signal.SIGTERM)  # from a namespace's init: every process of the namespace but itself
    deadline = time.monotonic() + LEFT_GRACE_SECONDS
    while time.monotonic() < deadline:
        _reap()
        alive = set(_others())
        if not alive:
            return len(left)
        left |= alive
        time.sleep(0.02)
    _signal_all(signal.SIGKILL)
    _reap()
    return len(left)


def _signal_all(number: int) -> None:
    try:
        os.kill(-1, number)
    except ProcessLookupError:  # they ended meanwhile
        pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _init(report: str, command: list[str]) -> None:
    """C: the host's PID 1."""
    _die_with_parent(expected_parent=0)  # H is in the parent namespace: getppid() is 0 here
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(_libc.mount(b"proc", b"/proc", b"proc", 0, None), "mount -t proc proc /proc")
    launcher = os.fork()
    if launcher == 0:
        for number in FORWARDED:
            signal.signal(number, signal.SIG_DFL)
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _forward_to(launcher)
    status = None
    while status is None:
        try:
            pid, raw = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if pid == launcher:
            status = raw
    stopped = _stop_the_rest()
    status = status if status is not None else 127 << 8
    try:
        with open(report, "w", encoding="ascii") as handle:
            handle.write(f"{status} {stopped}\n")
    except OSError:  # a full disk: H still learns how L ended, from this exit code
        pass
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _end_as(raw: int) -> None:
    """H ends as L did: its exit code, or its signal."""
    if os.WIFSIGNALED(raw):
        number = os.WTERMSIG(raw)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 1)


def _wait_or_end_with_controller(descriptor: int, init: int) -> None:
    """Wait until the host's init ends; should the controller's pipe reach its end first (the controller process
    is gone), kill the init, which makes the kernel end every process of the host, and end H as killed. (H cannot
    start a thread once it made the PID namespace: a poll of the pipe and of the init's pidfd.)"""
    import select

    try:
        process = os.pidfd_open(init)
    except (AttributeError, OSError):  # no pidfd here (Linux < 5.3): the parent-death signal and the guard remain
        return
    poller = select.poll()
    poller.register(process, select.POLLIN)
    poller.register(descriptor, select.POLLIN | select.POLLHUP)
    while True:
        ready = dict(poller.poll())
        if process in ready:
            return
        if descriptor in ready:  # nothing is ever written: ready means every write end is closed
            try:
                os.kill(init, signal.SIGKILL)
            finally:
                os._exit(128 + int(signal.SIGKILL))


def _enter_user_namespace() -> None:
    """A user namespace of its own in which this user (and group) is root: what lets an unprivileged user make the
    host's mount and PID namespaces (they belong to it). Its processes have no privilege outside it."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID),
           "unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:  # setgroups first: gid_map needs it
            handle.write(text)


def main(argv: list[str]) -> int:
    user_namespace = bool(argv) and argv[0] == USER_NAMESPACE_FLAG
    report, command = (argv[1:] if user_namespace else argv)[0], (argv[1:] if user_namespace else argv)[1:]
    if os.environ.pop(DIE_WITH_PARENT, "") == "1":
        _die_with_parent(expected_parent=os.getppid())
    named = os.environ.pop(CONTROLLER_PIPE, "")
    pipe = int(named) if named.isdigit() else None
    if pipe is not None:
        os.set_inheritable(pipe, False)  # the host's processes never get it
    try:
        os.unlink(report)
    except FileNotFoundError:
        pass
    if user_namespace:
        _enter_user_namespace()
    else:
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID), "unshare(CLONE_NEWNS | CLONE_NEWPID)")
    init = os.fork()
    if init == 0:
        try:
            _init(report, command)
        except BaseException as error:  # noqa: BLE001 - said on the host's output, then the host fails
            sys.stderr.write(f"trainops: the emulated host could not start: {error}\n")
            sys.stderr.flush()
            os._exit(127)
    _forward_to(init)
    if pipe is not None:
        _wait_or_end_with_controller(pipe, init)
    raw = _wait(init)
    try:
        with open(report, encoding="ascii") as handle:
            launcher_status = int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):  # no report (a full disk): C's exit code says it, 128 + a signal
        code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 1
        launcher_status = (code - 128) if 128 < code < 128 + 65 else code << 8
    _end_as(launcher_status)
    return 1


def stopped_in(report: str) -> int:
    """How many processes the host's init stopped after its launcher ended (0 when it said nothing)."""
    try:
        with open(report, encoding="ascii") as handle:
            return int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def works(user_namespace: bool, command: list[str], env: dict[str, str], timeout: float = 20.0) -> bool:
    """Whether a host made this way starts here: this module run as the hosts will be (a fresh interpreter, the same
    namespaces) with ``command`` (a probe of the mounts the host's mount script makes) as the host's launcher."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="trainops-probe-") as directory:
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__),
                *([USER_NAMESPACE_FLAG] if user_namespace else []), os.path.join(directory, "init"), *command]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as error:
        sys.stderr.write(f"trainops: the emulated host could not start: {error}\n")
        sys.exit(127 if error.errno != errno.EPERM else 126)
