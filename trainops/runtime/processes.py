"""Process bookkeeping for the launcher and the rank wrapper: is a pid still the process we started, signal it and
its process group, and ask the kernel to signal us when our parent dies. Linux first (``/proc``, ``prctl``), with
harmless fallbacks elsewhere. Standard library only.
"""

from __future__ import annotations

import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is the state, ``[1]`` the parent, ``[3]``
    the session, ``[19]`` the start time); None when the process does not exist or ``/proc`` is not there."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields that follow start after the last ')'.
    return text[text.rfind(")") + 2:].split()


def process_start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot, ``/proc/<pid>/stat`` field 22), to tell a pid from a reused
    one; None when the process does not exist or ``/proc`` is not there."""
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and bool(fields) and fields[0] in ("Z", "X")


def is_alive(pid: int, start_ticks: int | None = None) -> bool:
    """Whether ``pid`` runs and, when ``start_ticks`` is given, is still the same process (not a reused pid).
    Zombies (exited, not yet reaped) count as gone."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _is_zombie(pid):
        return False
    if start_ticks is not None:
        current = process_start_ticks(pid)
        if current is not None and current != start_ticks:
            return False
    return True


def signal_group(pgid: int, signum: int) -> bool:
    """Send a signal to a whole process group; False when the group is gone."""
    if pgid <= 1:
        return False
    try:
        os.killpg(pgid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_process(pid: int, signum: int, start_ticks: int | None = None, group: bool = True) -> bool:
    """Signal a process we started (checked against ``start_ticks``), and its whole group when it leads one (torchrun
    and Open MPI start every rank as a group leader, so the rank's own children go too)."""
    if not is_alive(pid, start_ticks):
        return False
    if group:
        try:
            if os.getpgid(pid) == pid:
                return signal_group(pid, signum)
        except ProcessLookupError:
            return False
    try:
        os.kill(pid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def set_parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``signum`` to this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a rank or
    an agent never outlives a launcher that was killed outright. False where unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def parent_death_signal_setter(signum: int = signal.SIGTERM):
    """A function that sets the parent-death signal in a child: a ``preexec_fn`` for ``subprocess.Popen``, or the
    first call of a bare ``os.fork`` child. The C function is looked up here, in the parent, so the child only makes
    one call (between fork and exec, for Popen)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    number = int(signum)

    def set_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, number, 0, 0, 0)

    return set_signal


def become_subreaper() -> bool:
    """Make orphaned descendants (the output relay of a rank that was killed, workers of a torchrun that died) this
    process's children, so :func:`reap_orphans` can collect them instead of leaving zombies behind (and so a launcher
    that is PID 1 in a container does its init's duty). False where unsupported."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(keep: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Collect this process's exited children other than those in ``keep`` (whose status someone else waits for,
    like a ``subprocess.Popen``); returns their pids."""
    me = os.getpid()
    reaped: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return reaped
    for entry in entries:
        if not entry.isdigit() or int(entry) in keep:
            continue
        fields = stat_fields(entry)
        if fields is None:
            continue
        if len(fields) > 1 and fields[0] == "Z" and fields[1] == str(me):
            try:
                if os.waitpid(int(entry), os.WNOHANG)[0]:
                    reaped.append(int(entry))
            except ChildProcessError:
                continue
    return reaped


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9, and so on; ``signal N`` for numbers Python does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --- the per-user process limit ----------------------------------------------------------------------------------
def user_tasks(uid: int | None = None) -> int | None:
    """How many tasks (processes and their threads: what RLIMIT_NPROC counts) the user ``uid`` (default: this
    process's real user) runs now, from /proc; None where /proc is not there."""
    uid = os.getuid() if uid is None else uid
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    count = 0
    for entry in entries:
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                text = handle.read(4096)
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.split(b":", 1) for line in text.splitlines() if b":" in line)
        try:
            if int(fields.get(b"Uid", b"-1").split()[0]) == uid:
                count += int(fields.get(b"Threads", b"1").strip() or 1)
        except (ValueError, IndexError):
            continue
    return count


def process_limit() -> int | None:
    """The soft per-user process limit (``ulimit -u``, RLIMIT_NPROC) that applies to this process, or None when it
    does not apply: unlimited, or the user is root (whose forks the kernel never refuses for it)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY or (os.getuid() == 0 and _in_first_user_namespace()):
        return None
    return int(soft)


def _in_first_user_namespace() -> bool:
    """Whether this process's user namespace is the machine's own (uid 0 there is root for the kernel's limits; uid 0
    of a user namespace made by someone else is that someone, whose limit applies)."""
    try:
        with open("/proc/self/uid_map", encoding="ascii") as handle:
            return handle.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True  # no /proc: not Linux, no user namespaces


def process_limit_note(error: BaseException) -> str | None:
    """What to tell the user when ``error`` is what reaching the per-user process limit raises (a fork refused with
    EAGAIN, a thread Python could not start), else None."""
    import errno

    forked = isinstance(error, OSError) and error.errno == errno.EAGAIN
    threaded = isinstance(error, RuntimeError) and "can't start new thread" in str(error)
    if not (forked or threaded):
        return None
    limit = process_limit()
    running = user_tasks()
    said = (f"the per-user process limit (ulimit -u, RLIMIT_NPROC: {limit}; every thread counts) was reached"
            + (f" with {running} of this user's processes and threads running" if running is not None else "")
            if limit is not None else
            "the machine refused to start another process or thread (the per-user process limit, ulimit -u, or a "
            "cgroup's pids.max)")
    return f"{said}: raise the limit or stop other processes of this user, then run the job again"
