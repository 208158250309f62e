"""An emulated host the kernel cleans up: `python -m trainops.backends.local.host_init REPORT COMMAND...`.

Started by the controller as a host's launcher process (H). H dies with its controller (`PR_SET_PDEATHSIG`, SIGKILL)
and makes a mount and a PID namespace for the host; its one child (C) is PID 1 there and dies with H (its own
parent-death signal, which the kernel delivers to a namespace's init when it comes from the parent namespace). When
a PID namespace's init ends, the kernel kills every process left in it: so every process of the host, daemons and
double forks included, ends with the host or with its controller, however they end. No polling or bookkeeping is
on that path.

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
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
DIE_WITH_PARENT = "TRAINOPS_HOST_PDEATHSIG"  # "1": the controller's launching thread is its main thread
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


def main(argv: list[str]) -> int:
    report, command = argv[0], argv[1:]
    if os.environ.pop(DIE_WITH_PARENT, "") == "1":
        _die_with_parent(expected_parent=os.getppid())
    try:
        os.unlink(report)
    except FileNotFoundError:
        pass
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


def available() -> bool:
    """Whether this machine lets trainops make mount and PID namespaces (root, or CAP_SYS_ADMIN): asked of a
    fresh interpreter, as the hosts will be started."""
    import subprocess

    probe = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             f"os._exit(0 if libc.unshare({CLONE_NEWNS | CLONE_NEWPID}) == 0 else 1)\n")
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, timeout=20)
        return done.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as error:
        sys.stderr.write(f"trainops: the emulated host could not start: {error}\n")
        sys.exit(127 if error.errno != errno.EPERM else 126)
