"""An emulated host the kernel cleans up: `python -I -S host_init.py VARIANT REPORT COMMAND...`.

Every host of a local job is started by the controller through this launcher (H), whatever the machine allows
(`VARIANTS`, strongest first; `container.isolation` chooses). H holds copies of the job's locks (the controller
lock and the checkpoint directory's lock: `HELD_LOCKS`) and the read end of a pipe whose write end only the
controller holds (`CONTROLLER_PIPE`). Whenever H ends, its host has ended before it: so a lock that is free proves
that no process of the job runs, and the controller ending in any way, `kill -9` included, ends every host.

- **pid** and **user-pid**: H makes a mount and a PID namespace for the host (``user-pid``: inside a user namespace
  of its own in which this user is root, as `unshare --user --map-root-user` does: no privilege beyond this user's,
  and files keep this user's ownership). Its one child (C) is PID 1 there and dies with H (parent-death signal).
  When a PID namespace's init ends, the kernel kills every process left in it, daemons and double forks included.
  C mounts a /proc of the namespace, runs COMMAND (L) as its child and, when L ends, stops what L left.
- **mount**, **user-mount** and **none** (no PID namespace here, or turned off): H makes the mount namespace itself
  (not for ``none``) and is a child subreaper, so an orphan anywhere below it is handed to H instead of init and
  every process of the host stays a descendant of H; when L ends, H stops its descendants. The weaker promise: a
  process that H does not see as its descendant (one made a child of another process, such as a service manager's)
  is not the host's any more, and should H itself be killed outright (not the controller: H), the host's processes
  other than L lose the one who would stop them.

When the controller's pipe reaches its end before the host has ended (the controller process is gone), H kills the
host (C, which makes the kernel kill the namespace; or each of its descendants) and waits until nothing of it is
left before it exits, releasing the locks last. Otherwise H passes SIGTERM / SIGINT / SIGHUP on to the host, writes
to REPORT how L ended and how many processes were stopped after it, and ends as L did (the same exit code, or the
same signal), so the controller reads the host's end as a launcher's. No polling is on these paths: H sleeps in
`poll` until a child ends (SIGCHLD) or the pipe closes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
import sys
import time
from collections.abc import Callable

if not __package__:  # run as a file (`python -I -S`, no site-packages): trainops is three directories up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from trainops.runtime.processes import (  # noqa: E402 - stdlib only
    become_subreaper,
    process_limit_note,
    process_start_ticks,
    set_parent_death_signal,
    stat_fields,
)
from trainops.runtime.untrusted import read_bounded  # noqa: E402 - stdlib only

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
#: How a host is isolated, strongest first: what each namespace flag set makes (None: no namespace).
VARIANTS = {"pid": CLONE_NEWNS | CLONE_NEWPID, "user-pid": CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID,
            "mount": CLONE_NEWNS, "user-mount": CLONE_NEWUSER | CLONE_NEWNS, "none": 0}
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
#: The read end of a pipe whose write end only the controller holds: its end of file means the controller process
#: ended (or gave the host up), whichever of its threads started this host.
CONTROLLER_PIPE = "TRAINOPS_HOST_CONTROLLER_FD"
#: Descriptors of the job's locks (comma-separated), held by H until the host has ended.
HELD_LOCKS = "TRAINOPS_HOST_LOCK_FDS"
LEFT_GRACE_SECONDS = 1.0
KILLED = 128 + int(signal.SIGKILL)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _die_with_parent(expected_parent: int) -> None:
    if not set_parent_death_signal(signal.SIGKILL):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) refused")
    if os.getppid() != expected_parent:  # the parent ended before the signal was asked for
        os._exit(KILLED)


def _forward_to(pid: int) -> None:
    def forward(number: int, _frame) -> None:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass

    for number in FORWARDED:
        signal.signal(number, forward)


def _stop_forwarding() -> None:
    """Once the launcher is reaped its pid may be another process's: signals are no longer passed on (the host is
    ending anyway)."""
    for number in FORWARDED:
        signal.signal(number, signal.SIG_IGN)


def _exec(command: list[str]) -> None:
    """In a forked child: the host's launcher L, with the default signal actions."""
    for number in FORWARDED:
        signal.signal(number, signal.SIG_DFL)
    try:
        os.execv(command[0], command)
    finally:
        os._exit(127)


def _reap(child: int) -> int | None:
    """Collect every child that ended (orphans a subreaper adopted); the raw status of ``child`` if it was one."""
    found = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == child:
            found = raw


def _wait_for(child: int, pipe: int | None, lost: Callable[[], None] | None) -> int:
    """Wait until ``child`` ends and return its raw status, reaping every other child meanwhile; should the
    controller's pipe reach its end first, call ``lost()`` (which does not return). Woken by SIGCHLD through a
    wake-up descriptor: no polling."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    if pipe is not None:
        poller.register(pipe, select.POLLIN | select.POLLHUP)
    while True:
        raw = _reap(child)  # before each sleep: a SIGCHLD after this wakes the poll below
        if raw is not None:
            return raw
        for descriptor, _ in poller.poll():
            if descriptor == wake_read:
                os.read(wake_read, 4096)
            elif lost is not None:  # nothing is ever written to the pipe: ready means every write end is closed
                lost()


# --- what a host's process left: the processes below it ----------------------------------------------------------
def _descendants() -> dict[int, tuple[str, int]]:
    """Every process below this one, ended ones not yet reaped included (pid -> (state, start time in clock ticks)),
    from /proc's parent links: without a PID namespace, below H (a child subreaper, so orphans stay below it); with
    one, below its init, which is every other process of the namespace."""
    children: dict[int, list[int]] = {}
    details: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        fields = stat_fields(entry) if entry.isdigit() else None
        if not fields or len(fields) < 20:
            continue  # not a process, or gone meanwhile
        details[int(entry)] = (fields[0], int(fields[19]))
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: dict[int, tuple[str, int]] = {}
    pending = [os.getpid()]
    while pending:
        for pid in children.get(pending.pop(), ()):
            if pid not in found:
                found[pid] = details[pid]
                pending.append(pid)
    return found


def _signal(pid: int, ticks: int, number: int) -> None:
    """Signal a descendant found by `_descendants`, only while its pid is still that process (its start time)."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        handle = None
    try:
        if process_start_ticks(pid) != ticks:
            return  # ended, and the pid is another process's now (or none's)
        if handle is not None:
            signal.pidfd_send_signal(handle, number)
        else:
            os.kill(pid, number)
    except OSError:
        pass  # it ended meanwhile
    finally:
        if handle is not None:
            os.close(handle)


def _stop_descendants(grace: float) -> int:
    """SIGTERM every descendant (and any started meanwhile), SIGKILL what is left after ``grace`` seconds; returns
    how many there were."""
    seen: dict[int, int] = {}
    number, deadline = signal.SIGTERM, time.monotonic() + grace
    while True:
        _reap(-1)
        below = _descendants()
        # Done only when not even an ended process is left: one that forked and ended as /proc was listed (its child
        # made after the listing) still shows as ended, so the next walk, which sees the child, comes.
        if not below:
            return len(seen)
        alive = {pid: ticks for pid, (state, ticks) in below.items() if state not in ("Z", "X")}
        if time.monotonic() >= deadline:
            number = signal.SIGKILL
        for pid, ticks in alive.items():
            if number == signal.SIGKILL or seen.get(pid) != ticks:
                _signal(pid, ticks, number)
        seen.update(alive)
        time.sleep(0.02)


def _write_report(report: str, raw: int, stopped: int) -> None:
    """Create the report afresh (whatever the host left under its name is removed: a FIFO there would block an open
    for writing, a link would be written through)."""
    try:
        try:
            os.unlink(report)
        except FileNotFoundError:
            pass
        descriptor = os.open(report, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(descriptor, f"{raw} {stopped}\n".encode("ascii"))
        finally:
            os.close(descriptor)
    except OSError:  # a full disk: H still learns how L ended, from the exit code
        pass


def _read_report(report: str) -> tuple[int, int]:
    """(L's raw wait status, how many processes were stopped after it) from a report; ValueError when there is none
    or it is not one (read as what a host's processes could have replaced: bounded, a regular file only)."""
    try:
        fields = read_bounded(report, 64).split()
    except OSError:
        raise ValueError("no report") from None
    if len(fields) != 2 or not all(field.isdigit() and len(field) <= 9 for field in fields):
        raise ValueError("not a report")
    raw, stopped = int(fields[0]), int(fields[1])
    if raw > 0xFFFF:
        raise ValueError("not a wait status")
    return raw, stopped


def _run_host(report: str, command: list[str], pipe: int | None, lost: Callable[[], None] | None) -> int:
    """Run L as a child of this process (the namespace's init C, or H itself without a PID namespace) that dies with
    it, wait for it while reaping orphans, stop what it left below this process, write the report; L's raw status."""
    parent = os.getpid()
    launcher = os.fork()
    if launcher == 0:
        _die_with_parent(expected_parent=parent)
        _exec(command)
    _forward_to(launcher)
    raw = _wait_for(launcher, pipe, lost)
    _stop_forwarding()
    _write_report(report, raw, _stop_descendants(LEFT_GRACE_SECONDS))
    return raw


def _init(report: str, command: list[str]) -> None:
    """C: the host's PID 1."""
    _die_with_parent(expected_parent=0)  # H is in the parent namespace: getppid() is 0 here
    _check(_libc.mount(b"proc", b"/proc", b"proc", 0, None), "mount -t proc proc /proc")
    os._exit(_exit_code(_run_host(report, command, None, None)))


def _exit_code(raw: int) -> int:
    return 128 + os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def _end_as(raw: int) -> None:
    """H ends as L did: its exit code, or its signal."""
    if os.WIFSIGNALED(raw):
        number = os.WTERMSIG(raw)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 1)


def _enter_namespaces(flags: int) -> None:
    """Make the host's namespaces; with a user namespace, one of its own in which this user (and group) is root:
    what lets an unprivileged user make the others (they belong to it). Mounts made below stay the host's."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(flags), f"unshare({flags:#x})")
    if flags & CLONE_NEWUSER:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:  # setgroups first: gid_map needs it
                handle.write(text)
    if flags & CLONE_NEWNS:
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


# --- the container's process: no capability to mount ---------------------------------------------------------------
CAP_SYS_ADMIN = 21
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
#: The mode of this launcher that the host's mount script ends in: ``host_init.py without-mounts COMMAND...``.
WITHOUT_MOUNTS = "without-mounts"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_mount_capability() -> bool:
    """Take CAP_SYS_ADMIN out of what the next program can have: out of the bounding set (so neither root nor a
    set-uid program gets it at exec), the inheritable set and the ambient set. The host's mounts are made by then:
    without it a rank running as root (in the host's own user namespace, or the machine's root) cannot remount its
    read-only channels writable, move or undo the host's mounts, or enter another mount namespace; a user namespace it
    makes itself gets copies of the mounts with their flags locked. False when there was nothing this process could
    drop (an unprivileged user: it never had the capability)."""
    dropped = _libc.prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) == 0
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) == 0:
        data[0].inheritable &= ~(1 << CAP_SYS_ADMIN)
        _libc.capset(ctypes.byref(header), data)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    return dropped


def _exec_without_mounts(command: list[str]) -> None:
    """The host's entrypoint, run once its mounts are made, without the capability to change them."""
    drop_mount_capability()
    os.execv(command[0], command)


def _held(name: str) -> list[int]:
    """The descriptors the controller passed under ``name``, kept from the host's processes (a rank given a lock's
    descriptor could unlock it for every holder)."""
    descriptors = [int(part) for part in os.environ.pop(name, "").split(",") if part.isdigit()]
    for descriptor in descriptors:
        os.set_inheritable(descriptor, False)
    return descriptors


def main(argv: list[str]) -> int:
    if argv[:1] == [WITHOUT_MOUNTS] and len(argv) > 1:
        _exec_without_mounts(argv[1:])
    variant, report, command = argv[0], argv[1], argv[2:]
    if variant not in VARIANTS or not command:
        raise SystemExit(f"usage: host_init.py {{{','.join(VARIANTS)}}} REPORT COMMAND...")
    pipes, locks = _held(CONTROLLER_PIPE), _held(HELD_LOCKS)
    pipe = pipes[0] if pipes else None
    try:
        os.unlink(report)
    except FileNotFoundError:
        pass
    flags = VARIANTS[variant]
    if flags:
        _enter_namespaces(flags)
    if flags & CLONE_NEWPID:
        init = os.fork()
        if init == 0:
            try:
                for descriptor in [*pipes, *locks]:  # H holds them; C must not outlive its namespace holding them
                    os.close(descriptor)
                _init(report, command)
            except BaseException as error:  # noqa: BLE001 - said on the host's output, then the host fails
                sys.stderr.write(f"trainops: the emulated host could not start: {process_limit_note(error) or error}"
                                 "\n")
                sys.stderr.flush()
                os._exit(127)
        _forward_to(init)

        def lost() -> None:  # the init's end makes the kernel end the namespace; reaped once it is empty
            os.kill(init, signal.SIGKILL)
            os.waitpid(init, 0)
            os._exit(KILLED)

        raw = _wait_for(init, pipe, lost)
        _stop_forwarding()
        try:
            launcher_status = _read_report(report)[0]
        except ValueError:  # no report (a full disk): C's exit code says it, 128 + a signal
            code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else 1
            launcher_status = (code - 128) if 128 < code < 128 + 65 else code << 8
        _end_as(launcher_status)
        return 1
    if not become_subreaper():
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) refused")

    def kill_all() -> None:
        _stop_descendants(grace=0.0)
        os._exit(KILLED)

    _end_as(_run_host(report, command, pipe, kill_all))
    return 1


def stopped_in(report: str) -> int:
    """How many processes were stopped in a host after its launcher ended (0 when nothing said so)."""
    try:
        return _read_report(report)[1]
    except ValueError:
        return 0


def works(variant: str, command: list[str], env: dict[str, str], timeout: float = 20.0) -> bool:
    """Whether a host made this way starts here: this module run as the hosts will be (a fresh interpreter, the same
    namespaces) with ``command`` (a probe of the mounts the host's mount script makes) as the host's launcher."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="trainops-probe-") as directory:
        argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), variant, os.path.join(directory, "init"),
                *command]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, RuntimeError) as error:
        sys.stderr.write(f"trainops: the emulated host could not start: {process_limit_note(error) or error}\n")
        sys.exit(126 if getattr(error, "errno", None) == errno.EPERM else 127)
