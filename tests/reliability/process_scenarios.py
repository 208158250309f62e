"""Process and log scenarios of the local backend (issue 15 items 1-5, issue 16 item 2), shared by
test_reliability_processes.py (which checks the bounds) and bench/reliability.py (section `processes`, which records
the figures in RELIABILITY.md).

Each scenario runs the real thing (`trainops run` / `status` / `stop` as commands, one simulated host, the stand-in
`scripts/process_stand_in.py`) and returns a dict of what it measured plus `problems`: what broke a promise (empty
when every promise held). Processes are counted by a token in their command line, found in /proc, so a helper that
shed the job's marker is counted too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

SCRIPTS = Path(__file__).parent / "scripts"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]
MEMORY_BOUND_MB = 100


# --- helpers ----------------------------------------------------------------------------------------------------
def write_job(tmp: Path, environment: dict[str, str], *, max_run: int | None = None) -> Path:
    source = tmp / "src"
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCRIPTS / "process_stand_in.py", source / "train.py")
    spec = tmp / "job.yaml"
    lines = ["name: stand-in", "entry_point: train.py", "source_dir: src", "instance_type: ml.m5.large",
             "instance_count: 1", "output_path: out", f"environment: {json.dumps(environment)}"]
    if max_run:
        lines.append(f"max_run: {max_run}")
    spec.write_text("\n".join(lines) + "\n")
    return spec


def processes_with(token: str, directory: Path | None = None) -> list[int]:
    """Live (not zombie) processes whose command line holds `token`, or (with `directory`) whose working directory
    is in it (the launchers and ranks of a job run in its directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{entry}/cwd") if directory is not None else ""
        except (OSError, IndexError):
            continue
        inside = directory is not None and (cwd + "/").startswith(str(directory) + "/")
        if (token.encode() in command or inside) and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def cli(*arguments: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *arguments], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def wait_for(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def lock_free(path: Path) -> bool:
    import fcntl

    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return True
    except OSError:
        return False
    finally:
        os.close(descriptor)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def status_json(name: str, workdir: Path) -> dict:
    result = cli("status", name, "--workdir", str(workdir), "--backend", "local", "--json")
    try:
        return json.loads(result.stdout)
    except ValueError:
        return {"exit": result.returncode, "stderr": result.stderr}


# --- item 1: recorded pids are never trusted --------------------------------------------------------------------
def untrusted_records(tmp: Path) -> dict:
    """A reused pid, pid 1, -1 and corrupt records: status reports honestly, stop signals nothing, bad values exit 2.

    `stop` on the `-1` record runs in a new pid namespace (`unshare --pid`) where that is possible, so that a
    regression signals only that namespace, never the machine."""
    workdir, problems, figures = tmp / "work", [], {}
    token = f"bystander-{uuid.uuid4().hex}"
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", token])

    def record(name: str, data) -> None:
        directory = workdir / "jobs" / name
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "status.json").write_text(json.dumps(data))

    try:
        record("reused", {"job_name": "reused", "status": "InProgress", "controller_pid": bystander.pid,
                          "job_id": "reused-job"})
        record("init", {"job_name": "init", "status": "InProgress", "controller_pid": 1, "job_id": "init-job"})
        started = time.monotonic()
        reused_status = status_json("reused", workdir)
        figures["reused_pid_status"] = reused_status.get("status")
        stop = cli("stop", "reused", "--workdir", str(workdir), "--backend", "local", timeout=90)
        figures["reused_pid_stop_seconds"] = round(time.monotonic() - started, 2)
        figures["bystander_alive_after_stop"] = bystander.poll() is None
        if reused_status.get("status") != "Failed":
            problems.append(f"a record naming a live unrelated pid reads {reused_status.get('status')}, not Failed")
        if bystander.poll() is not None:
            problems.append(f"trainops stop killed an unrelated process (exit {stop.returncode}: {stop.stdout})")
        init_status = status_json("init", workdir)
        figures["pid_1_status"] = init_status.get("status")
        if init_status.get("status") != "Failed":
            problems.append(f"a record naming pid 1 reads {init_status.get('status')} (alive forever)")
        for label, data in (("list", [1, 2]), ("text-pid", {"job_name": "x", "status": "InProgress",
                                                            "controller_pid": "123"}),
                            ("minus-one", {"job_name": "x", "status": "InProgress", "controller_pid": -1}),
                            ("zero", {"job_name": "x", "status": "InProgress", "controller_pid": 0})):
            record(label, data)
            result = cli("status", label, "--workdir", str(workdir), "--backend", "local")
            figures[f"{label}_status_exit"] = result.returncode
            if result.returncode != 2 or "status record" not in result.stderr:
                problems.append(f"status of a {label} record: exit {result.returncode}, {result.stderr.strip()!r}")
        unshare = shutil.which("unshare")
        if unshare and os.geteuid() == 0:
            result = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", *TRAINOPS, "stop", "minus-one",
                                     "--workdir", str(workdir), "--backend", "local"], capture_output=True,
                                    text=True, timeout=90)
            figures["minus_one_stop_exit"] = result.returncode
            if result.returncode != 2:
                problems.append(f"stop of a controller_pid -1 record: exit {result.returncode}, "
                                f"{result.stderr.strip()!r}")
        else:
            figures["minus_one_stop_exit"] = "not run (needs root and unshare)"
    finally:
        bystander.kill()
        bystander.wait()
    figures["problems"] = problems
    return figures


# --- items 2 and 3: the controller killed outright; a helper that shed the marker -------------------------------
def controller_killed(tmp: Path, mechanism: str = "namespace") -> dict:
    """`kill -9` of `trainops run` while a rank and a marker-less helper run: every process of the job must die,
    the checkpoint directory stay locked while any lives, and the status say Failed with the cause."""
    token = f"helper-{uuid.uuid4().hex}"
    spec = write_job(tmp, {"MODE": "helper", "TOKEN": token, "STEPS": "1500"})
    workdir, env = tmp / "work", ({"TRAINOPS_LOCAL_PID_NAMESPACE": "0"} if mechanism == "process-tree" else {})
    controller = subprocess.Popen([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "killed"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, **env})
    problems, figures = [], {"mechanism": mechanism}
    try:
        seen = ""
        while "step 5" not in seen:  # the helper runs and the controller has scanned it at least once
            line = controller.stdout.readline()
            if not line:
                break
            seen += line
        helpers = processes_with(token)
        figures["running_before_kill"] = len(processes_with(token, tmp))
        if not helpers:
            problems.append(f"the helper never started: {seen[-400:]}")
        record = json.loads((workdir / "jobs" / "killed" / "status.json").read_text())
        checkpoint_lock = Path(record["checkpoint_dir"]).parent / f".{Path(record['checkpoint_dir']).name}.lock"
        killed_at = time.monotonic()
        controller.kill()
        controller.wait()
        violations, gone_after = 0, None
        while time.monotonic() - killed_at < 30:
            # The lock first, then the processes: a lock seen free while a process is seen alive after it was free
            # then too (the dead do not come back). The other order counted a process that died between the two
            # reads, releasing the lock as it went, as a violation.
            free = lock_free(checkpoint_lock)
            alive = processes_with(token, tmp)
            if alive and free:
                violations += 1
            if not alive and gone_after is None:
                gone_after = round(time.monotonic() - killed_at, 2)
            if gone_after is not None and lock_free(checkpoint_lock):
                break
            time.sleep(0.05)
        figures["seconds_until_all_gone"] = gone_after
        figures["lock_free_while_alive_samples"] = violations
        left = processes_with(token, tmp)
        figures["left_after_30_s"] = len(left)
        kill_all(left)
        wait_for(lambda: lock_free(workdir / "jobs" / "killed" / ".controller.lock"), 15)
        final = status_json("killed", workdir)
        figures["status"] = final.get("status")
        figures["processes_left"] = final.get("processes_left")
        figures["processes_stopped"] = final.get("processes_stopped")
        figures["failure_reason"] = final.get("failure_reason")
        if left:
            problems.append(f"{len(left)} process(es) of the job still ran 30 s after its controller was killed")
        if violations:
            problems.append(f"the checkpoint directory was unlocked while the job's processes ran ({violations} "
                            "samples)")
        if final.get("status") != "Failed" or "controlling this job" not in (final.get("failure_reason") or ""):
            problems.append(f"status after the kill: {final.get('status')}: {final.get('failure_reason')}")
        if final.get("processes_left") not in (0, None) or (final.get("processes_left") == 0 and left):
            problems.append(f"status says {final.get('processes_left')} left, {len(left)} were")
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
        kill_all(processes_with(token, tmp))
    figures["problems"] = problems
    return figures


def helper_outlives_job(tmp: Path, mechanism: str = "namespace") -> dict:
    """A job that completes while a helper it started (no marker, own session, double fork) still runs: the helper
    is stopped and the record counts it."""
    token = f"helper-{uuid.uuid4().hex}"
    spec = write_job(tmp, {"MODE": "helper", "TOKEN": token, "STEPS": "8"})
    workdir, env = tmp / "work", ({"TRAINOPS_LOCAL_PID_NAMESPACE": "0"} if mechanism == "process-tree" else {})
    problems, figures = [], {"mechanism": mechanism}
    try:
        started = time.monotonic()
        result = cli("run", str(spec), "--workdir", str(workdir), "--job-name", "helper", env=env)
        figures["seconds"] = round(time.monotonic() - started, 2)
        figures["exit"] = result.returncode
        left = processes_with(token)
        figures["helpers_left"] = len(left)
        final = status_json("helper", workdir)
        figures["status"] = final.get("status")
        figures["processes_stopped"] = final.get("processes_stopped")
        figures["processes_left"] = final.get("processes_left")
        if result.returncode != 0:
            problems.append(f"the job failed: {result.stdout[-400:]} {result.stderr[-400:]}")
        if left:
            problems.append(f"the helper outlived the job ({len(left)} left, status says "
                            f"{final.get('processes_left')} left)")
        if not final.get("processes_stopped"):
            problems.append("the status does not count the helper it stopped")
    finally:
        kill_all(processes_with(token))
    figures["problems"] = problems
    return figures


# --- item 4: losing log lines never stops a job ----------------------------------------------------------------
CONTROLLER_WITH_FILE_LIMIT = r'''
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
import trainops.cli
sys.exit(trainops.cli.main(sys.argv[2:]))
'''


def log_sink_fails(tmp: Path) -> dict:
    """The controller cannot write the host's log past 256 KiB (a file-size limit on the controller: its writes fail
    with EFBIG as a full disk fails them with ENOSPC) while the rank prints 5 MB: the job must still end on its own,
    count what was lost and say so. max_run is 120 s: a pump that stopped would leave the job hanging until then."""
    spec = write_job(tmp, {"MODE": "flood", "LINES": "50000"}, max_run=120)
    workdir = tmp / "work"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", CONTROLLER_WITH_FILE_LIMIT, str(256 * 1024), "run", str(spec),
                             "--workdir", str(workdir), "--job-name", "flood"], capture_output=True, text=True,
                            timeout=300)
    figures = {"seconds": round(time.monotonic() - started, 2), "exit": result.returncode}
    final = status_json("flood", workdir)
    figures["status"] = f"{final.get('status')} / {final.get('secondary_status')}"
    figures["log_lines_lost"] = final.get("log_lines_lost")
    figures["said_so"] = "log output lost" in result.stdout
    problems = []
    if final.get("status") != "Completed":
        problems.append(f"the job ended {figures['status']}: {final.get('failure_reason')}")
    if not final.get("log_lines_lost"):
        problems.append("the status does not count the lost log lines")
    if not figures["said_so"]:
        problems.append("the console does not say that log output was lost")
    figures["problems"] = problems
    return figures


RELAY_WITH_FAILURE = r'''
import os, sys
from trainops.runtime import output_relay
original, calls = output_relay._Stream.take, []
def failing(self, chunk):
    calls.append(1)
    if len(calls) == 2:
        raise MemoryError("planted")
    return original(self, chunk)
output_relay._Stream.take = failing
relay = output_relay.OutputRelay(prefix=b"[rank] ")
relay.start()
for number in range(5):
    os.write(2, f"line {number}\n".encode())
    import time; time.sleep(0.3)
relay.stop(timeout=5)
print("script survived", flush=True)
'''


def relay_survives(tmp: Path) -> dict:
    """The in-container relay of a rank meets an exception (a planted MemoryError) on its second read: the rank
    goes on, the lines after it still arrive, and the loss is reported."""
    result = subprocess.run([sys.executable, "-c", RELAY_WITH_FAILURE], capture_output=True, text=True, timeout=60,
                            cwd=str(tmp))
    arrived = [number for number in range(5) if f"[rank] line {number}" in result.stderr]
    figures = {"exit": result.returncode, "lines_arrived": len(arrived), "script_survived":
               "script survived" in result.stdout, "loss_reported": "were lost" in result.stderr}
    problems = []
    if not figures["script_survived"] or result.returncode != 0:
        problems.append(f"the rank died with its relay (exit {result.returncode})")
    if arrived[-1:] != [4]:
        problems.append(f"lines after the failure did not arrive (arrived: {arrived})")
    if not figures["loss_reported"]:
        problems.append("the lost output is not reported")
    figures["problems"] = problems
    return figures


def disk_fills(tmp: Path, size_mb: int = 24) -> dict:
    """The job's own disk fills (its work directory on a `size_mb` MiB tmpfs; the script writes its model until
    the write fails): the job fails, and the failure file and the status name the cause; no internal error or
    traceback from trainops, no empty failure file. Needs root to mount (CI runs as root); skipped otherwise."""
    disk = tmp / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        return {"skipped": f"cannot mount a small disk: {mounted.stderr.strip()}", "problems": []}
    try:
        spec = write_job(tmp, {"MODE": "fill"})
        workdir = disk / "work"
        started = time.monotonic()
        result = cli("run", str(spec), "--workdir", str(workdir), "--job-name", "full", timeout=180)
        figures = {"seconds": round(time.monotonic() - started, 2), "exit": result.returncode}
        final = status_json("full", workdir)
        failure_file = workdir / "jobs" / "full" / "failure"
        failure = failure_file.read_text(errors="replace") if failure_file.exists() else None
        figures["status"] = final.get("status")
        figures["failure_reason"] = (final.get("failure_reason") or "")[:200]
        figures["failure_file_bytes"] = len(failure or "")
        problems = []
        names_cause = ("No space left" in (final.get("failure_reason") or "")
                       or "disk is full" in (final.get("failure_reason") or ""))
        if result.returncode != 1 or final.get("status") != "Failed":
            problems.append(f"exit {result.returncode}, status {final.get('status')}: {result.stderr[-300:]}")
        if not names_cause:
            problems.append(f"the status does not name the full disk: {final.get('failure_reason')!r}")
        if not failure or not ("No space left" in failure or "disk is full" in failure):
            problems.append(f"the failure file does not name the full disk: {failure!r}")
        # trainops' own traceback, not the job's (whose frames are under /opt/ml: the failure reason quotes them)
        own_traceback = re.search(r'^Traceback \(most recent call last\):\n\s+File "(?!/opt/ml/)', result.stderr,
                                  re.MULTILINE)
        if "internal error" in result.stderr or own_traceback:
            problems.append(f"trainops itself failed: {result.stderr[-300:]}")
        figures["problems"] = problems
        return figures
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


# --- item 5: output without newlines; progress bars ------------------------------------------------------------
def no_newline_output(tmp: Path, megabytes: int = 300) -> dict:
    """A rank writes `megabytes` MiB without a newline: the controller's peak resident memory stays under 100 MB
    and the output is in the host's log, split into marked pieces."""
    spec = write_job(tmp, {"MODE": "no_newline", "MEGABYTES": str(megabytes)})
    workdir = tmp / "work"
    started = time.monotonic()
    controller = subprocess.Popen([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "wide"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    while controller.poll() is None:
        peak = max(peak, peak_rss_mb(controller.pid))
        time.sleep(0.1)
    stderr = controller.stderr.read().decode(errors="replace")
    figures = {"megabytes": megabytes, "seconds": round(time.monotonic() - started, 2),
               "exit": controller.returncode, "controller_peak_rss_mb": round(peak, 1)}
    log = workdir / "jobs" / "wide" / "logs" / "algo-1.log"
    size = log.stat().st_size if log.exists() else 0
    figures["log_mb"] = round(size / (1 << 20), 1)
    with open(log, "rb") if log.exists() else open(os.devnull, "rb") as handle:
        head = handle.read(70 * 1024)
    figures["split_marked"] = b"continued on the next line" in head
    shutil.rmtree(workdir / "jobs" / "wide" / "logs", ignore_errors=True)  # 300 MB: not kept
    problems = []
    if controller.returncode != 0:
        problems.append(f"the job failed (exit {controller.returncode}): {stderr[-400:]}")
    if peak >= MEMORY_BOUND_MB:
        problems.append(f"the controller peaked at {peak:.0f} MB (bound {MEMORY_BOUND_MB} MB)")
    if size < megabytes * (1 << 20):
        problems.append(f"the host log holds {size} bytes of {megabytes} MiB")
    if not figures["split_marked"]:
        problems.append("the long line's split is not marked")
    figures["problems"] = problems
    return figures


def progress_bar_live(tmp: Path) -> dict:
    """A `\\r` progress bar (12 states, 0.25 s apart, then a last line): its states reach `trainops run`'s console
    while it is drawn, not when the line ends."""
    spec = write_job(tmp, {"MODE": "progress"})
    workdir = tmp / "work"
    controller = subprocess.Popen([*TRAINOPS, "run", str(spec), "--workdir", str(workdir), "--job-name", "bar"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    arrivals = []
    for raw in iter(controller.stdout.readline, b""):
        arrivals.append((time.monotonic(), raw.decode(errors="replace")))
    controller.wait()
    first_progress = next((at for at, line in arrivals if "progress" in line), None)
    finished = next((at for at, line in arrivals if "finished" in line), None)
    states = sum("progress" in line for _, line in arrivals)
    figures = {"exit": controller.returncode, "progress_lines_shown": states,
               "first_state_before_end_s": round(finished - first_progress, 2) if first_progress and finished
               else None}
    problems = []
    if controller.returncode != 0:
        problems.append(f"the job failed: {''.join(line for _, line in arrivals)[-400:]}")
    if first_progress is None or finished is None or finished - first_progress < 1.0:
        problems.append(f"the progress bar reached the console only at its end ({figures})")
    figures["problems"] = problems
    return figures


# --- issue 16 item 2: detached local jobs ----------------------------------------------------------------------
def detached_job(tmp: Path) -> dict:
    """`trainops run --no-wait` returns while the job runs under a supervisor that is nobody's child; a second
    submit re-attaches; `logs --follow` follows it to the end; `stop` stops another detached job."""
    token = f"helper-{uuid.uuid4().hex}"
    spec = write_job(tmp, {"MODE": "helper", "TOKEN": token, "STEPS": "25"})
    workdir = tmp / "work"
    problems, figures = [], {}
    try:
        started = time.monotonic()
        first = cli("run", str(spec), "--no-wait", "--workdir", str(workdir), "--job-name", "detached")
        figures["submit_seconds"] = round(time.monotonic() - started, 2)
        record = status_json("detached", workdir)
        figures["status_after_submit"] = record.get("status")
        supervisor = (record.get("controller") or {}).get("pid")
        try:
            parent = int(Path(f"/proc/{supervisor}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError, TypeError):
            parent = None
        figures["supervisor_parent_is_caller"] = parent == os.getpid()
        second = cli("run", str(spec), "--no-wait", "--workdir", str(workdir), "--job-name", "detached")
        again = status_json("detached", workdir)
        figures["resubmit_same_job"] = again.get("job_id") == record.get("job_id")
        follow = cli("logs", "detached", "--workdir", str(workdir), "--follow", timeout=120)
        final = status_json("detached", workdir)
        figures["follow_saw_end"] = "finished" in follow.stdout
        figures["final_status"] = final.get("status")
        figures["total_seconds"] = round(time.monotonic() - started, 2)
        if first.returncode != 0 or record.get("status") != "InProgress":
            problems.append(f"submit: exit {first.returncode}, status {record.get('status')}: {first.stderr[-300:]}")
        if figures["submit_seconds"] > 15:
            problems.append(f"submit took {figures['submit_seconds']} s")
        if figures["supervisor_parent_is_caller"]:
            problems.append("the supervisor is a child of the caller")
        if second.returncode != 0 or not figures["resubmit_same_job"] or len(list((workdir / "jobs").iterdir())) != 1:
            problems.append(f"a second submit did not re-attach: {second.stdout} {second.stderr}")
        if not figures["follow_saw_end"] or final.get("status") != "Completed":
            problems.append(f"follow / final: {final.get('status')} {follow.stdout[-300:]}")
        cli("run", str(spec), "--no-wait", "--workdir", str(workdir), "--job-name", "detached-stop")
        wait_for(lambda: bool(processes_with(token)), 30)
        stop_started = time.monotonic()
        stop = cli("stop", "detached-stop", "--workdir", str(workdir))
        figures["stop_seconds"] = round(time.monotonic() - stop_started, 2)
        stopped = status_json("detached-stop", workdir)
        figures["stopped_status"] = stopped.get("status")
        wait_for(lambda: not processes_with(token), 10)
        figures["left_after_stop"] = len(processes_with(token))
        if stopped.get("status") != "Stopped" or figures["left_after_stop"]:
            problems.append(f"stop: {stop.stdout} {stop.stderr}; status {stopped.get('status')}, "
                            f"{figures['left_after_stop']} left")
    finally:
        kill_all(processes_with(token))
    figures["problems"] = problems
    return figures


# (what is measured, the scenario, its options, the issue item, the promise it is held to)
SCENARIOS = [
    ("untrusted status records (reused pid, pid 1, -1, list, text pid)", untrusted_records, {}, "15.1",
     "a controller is alive only while it holds the job's lock; nothing unproven is signalled; corrupt values exit 2"),
    ("kill -9 of trainops run (PID namespace)", controller_killed, {"mechanism": "namespace"}, "15.2",
     "every process of the job gone; checkpoints locked while any lives; status Failed naming the cause"),
    ("kill -9 of trainops run (no PID namespace)", controller_killed, {"mechanism": "process-tree"}, "15.2",
     "as above, without a PID namespace (each host's launcher a child subreaper)"),
    ("helper without marker outlives the job (PID namespace)", helper_outlives_job, {"mechanism": "namespace"}, "15.3",
     "the helper is stopped with the job and counted"),
    ("helper without marker outlives the job (no PID namespace)", helper_outlives_job, {"mechanism": "process-tree"},
     "15.3", "as above, without a PID namespace (each host's launcher a child subreaper)"),
    ("host log cannot be written (file-size limit)", log_sink_fails, {}, "15.4",
     "the job ends on its own (not at max_run); lost lines counted and reported"),
    ("in-container relay meets a MemoryError", relay_survives, {}, "15.4",
     "the rank lives on; later lines arrive; the loss is reported"),
    ("the job's own disk fills", disk_fills, {}, "15.4",
     "Failed; the status and the failure file name the full disk; no internal error"),
    ("300 MiB without a newline", no_newline_output, {}, "15.5",
     f"controller peak < {MEMORY_BOUND_MB} MB; all output kept, splits marked"),
    ("\\r progress bar reaches the console live", progress_bar_live, {}, "15.5",
     "states reach the console while the bar is drawn"),
    ("detached job: --no-wait, re-submit, logs --follow, stop", detached_job, {}, "16.2",
     "returns while the job runs, supervisor not the caller's child; no duplicate; follow to the end; stop works"),
]


def bench_section() -> dict:
    """Every scenario once, for bench/reliability.py."""
    rows = []
    for name, scenario, options, item, bound in SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="reliability-processes-") as scratch:
            started = time.monotonic()
            figures = scenario(Path(scratch), **options)
            rows.append({"name": name, "seconds": round(time.monotonic() - started, 1), "figures": figures,
                         "item": item, "bound": bound})
    return {"rows": rows}


def render_rows(section: dict) -> list[str]:
    """RELIABILITY.md rows (items 15.1-15.5 and 16.2 of the table: processes and job state)."""
    lines = []
    for row in section["rows"]:
        figures = dict(row["figures"])
        problems = figures.pop("problems", [])
        measured = "; ".join(f"{key.replace('_', ' ')} {value}" for key, value in figures.items()
                             if key != "failure_reason").replace("|", "\\|")
        verdict = "pass" if not problems else "FAIL: " + "; ".join(problems).replace("|", "\\|")
        lines.append(f"| {row['item']} | {row['name']} | {measured} (scenario {row['seconds']} s) | {row['bound']} | "
                     f"{verdict} | `test_reliability_processes.py` |")
    return lines


__all__ = ["SCENARIOS", "bench_section", "render_rows"]
