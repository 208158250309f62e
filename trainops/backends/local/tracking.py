"""Every process of a local job, found by something it cannot shed, and stopped without touching anything else.

An environment marker is not enough: a helper started with a minimal environment and `start_new_session=True`
carries no marker and leaves the launcher's session. Where the kernel gives each emulated host a PID namespace
(`host_init`, the default), the kernel ends every process of a host with it, whatever it did to its session or
environment. Beside that, and alone where no namespace can be made, a job's processes are tracked by:

1. **the process tree**, recorded while the job runs: the controller is made a child subreaper for the job's
   duration (an orphan double-forked away from a rank is handed to the controller, not to init), and a scan of
   `/proc` every half second (every 5 s beside PID namespaces) records each descendant (pid and start time, so a
   reused pid is never mistaken for one of ours), plus the sessions they lead;
2. the **marker** (`TRAINOPS_LOCAL_JOB_ID` in the environment).

What was recorded is kept in `<job dir>/processes.json`, so that `trainops status` / `stop`, the guard of a job whose
controller was killed, and a re-run can count and stop what is left. Nothing is signalled unless it is provably the
job's: pid 1, the caller itself and its ancestors, and pids whose start time differs from the recorded one are
never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainops.backends.local.processes import MARKER, job_processes
from trainops.runtime.processes import signal_process, stat_fields

RECORD = "processes.json"
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37

# One controller process may run several jobs at once (threads of a test runner, an Airflow worker, a notebook).
# All their launchers and guards are children of that one process, so "a child of the controller" alone would make
# every job claim the others' launchers and stop them when it ends. Each direct child is therefore registered with
# its job while the lock is held from before its fork until it is registered, and an adopted orphan already
# recorded by another job of this process stays that job's.
_CHILDREN_LOCK = threading.RLock()
_CHILDREN: dict[int, str] = {}  # pid of a launcher or guard started by this process -> its job id
_ACTIVE: dict[str, JobProcesses] = {}  # jobs this process controls now, by job id
_SUBREAPER_USERS = 0
_SUBREAPER_PREVIOUS: bool | None = None


# --- the process table ------------------------------------------------------------------------------------------
class _Process:
    __slots__ = ("pid", "state", "ppid", "session", "ticks")

    def __init__(self, pid: int, state: str, ppid: int, session: int, ticks: int):
        self.pid, self.state, self.ppid, self.session, self.ticks = pid, state, ppid, session, ticks


def process_table() -> dict[int, _Process]:
    """Every process visible in /proc: state, parent, session and start time."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)
        if fields is None:
            continue
        try:
            table[int(entry)] = _Process(int(entry), fields[0], int(fields[1]), int(fields[3]), int(fields[19]))
        except (IndexError, ValueError):
            continue
    return table


def _ancestors(table: dict[int, _Process], pid: int) -> set[int]:
    seen = {pid}
    while pid in table and table[pid].ppid not in seen and table[pid].ppid > 0:
        pid = table[pid].ppid
        seen.add(pid)
    return seen


def _signal(pid: int, signum: int) -> bool:
    """Signal one process of the job: never init or this process itself."""
    return pid > 1 and pid != os.getpid() and signal_process(pid, signum, group=False)


# --- a job's processes ------------------------------------------------------------------------------------------
class JobProcesses:
    """The processes of one job: the controller's live view (`adopter` = the controller's pid, a subreaper) or an
    outsider's view rebuilt from `processes.json` (`load`)."""

    def __init__(self, job_dir: Path, job_id: str, *, known: dict[int, int] | None = None,
                 sessions: dict[int, int] | None = None, exclude: set[int] | None = None, adopter: int | None = None,
                 since_ticks: int = 0):
        self.job_dir = Path(job_dir)
        self.job_id = job_id
        self.known = dict(known or {})  # pid -> start ticks
        self.sessions = dict(sessions or {})  # session id -> its leader's start ticks
        self.exclude = set(exclude or ())
        self.adopter = adopter
        self.since_ticks = since_ticks
        self.listener: Callable[[dict], None] | None = None  # told every saved record (the guard's pipe)
        self._lock = threading.Lock()

    # --- the record ---
    @classmethod
    def load(cls, job_dir: Path, record: dict, reported: dict | None = None) -> JobProcesses:
        """An outsider's view of a recorded job: the processes carrying its marker. The pids and sessions a file
        lists are never taken as the job's (anyone who can write the file could name any process); ``reported`` is
        what the controller itself told its guard over their pipe (`trainops.backends.local.guard`), and only that
        is."""
        from trainops.backends.local.identity import boot_id
        from trainops.backends.local.safe_fs import open_state_file

        job_id = record.get("job_id") if isinstance(record.get("job_id"), str) else None
        if reported is not None:
            saved = reported
            job_id = reported.get("job_id") if isinstance(reported.get("job_id"), str) else job_id
        else:
            try:
                with open(open_state_file(Path(job_dir) / RECORD, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
                    saved = json.loads(handle.read(16 * 1024 * 1024))
                if not isinstance(saved, dict) or saved.get("job_id") != job_id:
                    saved = {}
            except (OSError, ValueError):
                saved = {}
        same_boot = saved.get("boot_id") is not None and saved.get("boot_id") == boot_id()
        known = sessions = {}
        if same_boot and reported is not None:
            known = {int(pid): int(ticks) for pid, ticks in (saved.get("known") or {}).items()
                     if str(pid).isdigit() and isinstance(ticks, int)}
            sessions = {int(sid): int(ticks) for sid, ticks in (saved.get("sessions") or {}).items()
                        if str(sid).isdigit() and isinstance(ticks, int)}
        recorded = record.get("controller")
        controller: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        exclude = {controller["pid"]} if isinstance(controller.get("pid"), int) and same_boot else set()
        return cls(Path(job_dir), job_id or "", known=known, sessions=sessions, exclude=exclude)

    def save(self) -> None:
        """Record what is tracked: in `processes.json` (for `trainops status`: counted, never signalled from
        there) and, through `listener`, to the job's guard, whose copy is the one it may act on."""
        from trainops.backends.local.identity import boot_id

        data = {"job_id": self.job_id, "boot_id": boot_id(),
                "known": {str(pid): ticks for pid, ticks in sorted(self.known.items())},
                "sessions": {str(sid): ticks for sid, ticks in sorted(self.sessions.items())}}
        if self.listener is not None:
            self.listener(data)
        from trainops.backends.local.safe_fs import write_atomically

        try:
            write_atomically(self.job_dir / RECORD, json.dumps(data).encode("utf-8"))
        except OSError:
            pass  # a full disk: the live view in memory still tracks everything

    # --- finding them ---
    def members(self, table: dict[int, _Process] | None = None) -> dict[int, int]:
        """The job's live processes (zombies excluded): pid -> start ticks."""
        table = process_table() if table is None else table
        never = _ancestors(table, os.getpid()) | self.exclude | {1}
        found: dict[int, int] = {}

        def take(pid: int) -> None:
            process = table.get(pid)
            if process is not None and process.state not in ("Z", "X") and pid not in never:
                found[pid] = process.ticks

        for pid, ticks in self.known.items():
            if pid in table and table[pid].ticks == ticks:
                take(pid)
        if self.job_id:
            for pid in job_processes(self.job_id):
                take(pid)
        if self.adopter is not None:  # orphans handed to the controller (a subreaper) since the job started
            # Every process of the job runs outside the controller's own session (each launcher starts one), so a
            # child in that session is the host program's own (a test runner's, an Airflow worker's), not ours.
            own_session = os.getsid(0)
            with _CHILDREN_LOCK:  # no launch of another job is between its fork and its registration now
                for process in table.values():
                    if process.ppid == self.adopter and process.ticks >= self.since_ticks \
                            and process.session != own_session and not self._another_jobs(process):
                        take(process.pid)
        sessions = {sid for sid, ticks in self.sessions.items() if
                    (sid in table and table[sid].ticks == ticks) or any(table[p].session == sid for p in found)}
        own_session = os.getsid(0)  # the caller's session (a shell's, a test runner's) is never the job's
        changed = True
        while changed:  # descendants and session members of what was found, until nothing new
            changed = False
            sessions |= {table[pid].session for pid in found if table[pid].session == pid}
            sessions.discard(own_session)
            for process in table.values():
                if process.pid not in found and (process.ppid in found or process.session in sessions):
                    before = len(found)
                    take(process.pid)
                    changed = changed or len(found) != before
        return found

    def _another_jobs(self, process: _Process) -> bool:
        """Whether a child of this controller belongs to another job it controls at the same time: a launcher or
        guard registered for that job, or an orphan that job recorded or that carries its marker."""
        owner = _CHILDREN.get(process.pid)
        if owner is not None:
            return owner != self.job_id
        for job_id, other in list(_ACTIVE.items()):
            if other is not self and job_id != self.job_id and (
                    other.known.get(process.pid) == process.ticks or process.session in other.sessions):
                return True
        marker = _marker_of(process.pid)
        return marker is not None and marker != self.job_id

    # --- this controller's jobs ---
    def activate(self) -> None:
        """Count this job among those this process controls (so the others never claim its processes)."""
        with _CHILDREN_LOCK:
            _ACTIVE[self.job_id] = self

    def deactivate(self) -> None:
        with _CHILDREN_LOCK:
            if _ACTIVE.get(self.job_id) is self:
                del _ACTIVE[self.job_id]
            for pid in [pid for pid, job_id in _CHILDREN.items() if job_id == self.job_id]:
                del _CHILDREN[pid]

    def scan(self) -> dict[int, int]:
        """Record what is alive now (the controller calls this while the job runs); returns it."""
        table = process_table()
        found = self.members(table)
        with self._lock:
            new = {pid: ticks for pid, ticks in found.items() if self.known.get(pid) != ticks}
            led = {pid: ticks for pid, ticks in found.items() if table[pid].session == pid and pid not in self.sessions}
            self.known.update(new)
            self.sessions.update(led)
            if new or led:
                self.save()
        self._reap_adopted(table)
        return found

    def _reap_adopted(self, table: dict[int, _Process]) -> None:
        """Wait for the zombies of orphans the controller adopted. Never for a launcher or guard it started itself
        (`_CHILDREN`): their exit status belongs to their `Popen`, and a launcher reaped here would read as exit 0
        there (ECHILD), a failed host taken for a finished one while the others wait until max_run."""
        if self.adopter is None:
            return
        with _CHILDREN_LOCK:
            started_here = set(_CHILDREN)
        for process in table.values():
            if process.ppid == self.adopter and process.state == "Z" and process.pid in self.known \
                    and process.pid not in started_here:
                try:
                    os.waitpid(process.pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    # --- stopping them ---
    def stop(self, grace_seconds: float = 5.0) -> tuple[int, int]:
        """SIGTERM every process of the job, SIGKILL what is left after `grace_seconds`; returns (how many were
        found running, how many are still alive after all that)."""
        found = self.members()
        if not found:
            return 0, 0
        stopped = set(found)
        for pid in found:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if self.adopter is not None:
                self._reap_adopted(process_table())
            current = self.members()
            for pid in set(current) - stopped:  # started meanwhile (a launcher restarting a rank)
                _signal(pid, signal.SIGTERM)
            stopped |= set(current)
            if not current:
                return len(stopped), 0
        for pid in self.members():
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        left = self.members()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            if self.adopter is not None:
                self._reap_adopted(process_table())
            left = self.members()
        return len(stopped | set(left)), len(left)


def live_processes(record: dict, job_dir: Path | None = None) -> list[int]:
    """The processes of a recorded job still alive (what a dead controller left behind)."""
    directory = Path(job_dir or record.get("job_dir") or ".")
    return sorted(JobProcesses.load(directory, record).members())


def stop_processes(job_dir: Path, record: dict, grace_seconds: float = 5.0) -> tuple[int, int]:
    """Stop what is left of a recorded job; returns (found running, still alive)."""
    return JobProcesses.load(job_dir, record).stop(grace_seconds)


def _marker_of(pid: int) -> str | None:
    """The job id in a process's environment marker, or None (no marker, or not readable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    prefix = f"{MARKER}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode(errors="replace")
    return None


# --- the controller's side --------------------------------------------------------------------------------------
def clock_ticks_now() -> int:
    """Clock ticks since boot, as process start times are counted (so `since_ticks` compares with them)."""
    try:
        with open("/proc/uptime", encoding="ascii") as handle:
            return int(float(handle.read().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def _prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def launcher_preexec(parent_death: bool) -> Callable[[], None] | None:
    """A `preexec_fn` for a launcher: die with the controller (`PR_SET_PDEATHSIG`). The parent-death signal follows
    the *thread* that forked, so it is only asked for when the launcher is started from the main thread (a worker
    thread's exit would otherwise kill the job)."""
    prctl = _prctl() if parent_death else None
    if prctl is None:
        return None

    def prepare() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return prepare


class launching:
    """Held around the fork of a launcher or guard of `job_id` until `register(pid)`: while it is held, no other
    job of this process decides whether that child is its own."""

    def __init__(self, job_id: str):
        self.job_id = job_id

    def __enter__(self) -> launching:
        _CHILDREN_LOCK.acquire()
        return self

    def register(self, pid: int) -> None:
        _CHILDREN[pid] = self.job_id

    def __exit__(self, *exc) -> None:
        _CHILDREN_LOCK.release()


def hold_subreaper() -> None:
    """Make this process a child subreaper while any of its jobs runs (counted: jobs of one process overlap)."""
    global _SUBREAPER_USERS, _SUBREAPER_PREVIOUS
    with _CHILDREN_LOCK:
        if _SUBREAPER_USERS == 0:
            _SUBREAPER_PREVIOUS = set_subreaper(True)
        _SUBREAPER_USERS += 1


def release_subreaper() -> None:
    """The last running job of this process gives the flag back as it found it."""
    global _SUBREAPER_USERS
    with _CHILDREN_LOCK:
        _SUBREAPER_USERS = max(0, _SUBREAPER_USERS - 1)
        if _SUBREAPER_USERS == 0 and _SUBREAPER_PREVIOUS is False:
            set_subreaper(False)


def set_subreaper(enabled: bool) -> bool | None:
    """Turn this process's child-subreaper flag on or off; returns its previous value (None where unsupported)."""
    prctl = _prctl()
    if prctl is None:
        return None
    import ctypes

    previous = ctypes.c_int(0)
    if prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0) != 0:
        return None
    if prctl(_PR_SET_CHILD_SUBREAPER, 1 if enabled else 0, 0, 0, 0) != 0:
        return None
    return bool(previous.value)


__all__ = ["MARKER", "JobProcesses", "hold_subreaper", "launcher_preexec", "launching",
           "live_processes", "process_table", "release_subreaper", "set_subreaper", "stop_processes"]
