"""The retraining DAG under the real Airflow components: ``airflow api-server``, ``scheduler`` (LocalExecutor),
``dag-processor`` and ``triggerer``, each its own process group, on a temporary Airflow home (SQLite) and 127.0.0.1.

``retrain_pipeline`` is triggered by hand and must succeed. On the local backend the train task submits its job to
a detached supervisor and defers: the test sees it in state ``deferred`` while the job is InProgress, sees the job's
hosts' log lines in the train task's log while it is still deferred (the trigger streams them), kills the triggerer
(SIGKILL to its process group, as a crash would) and starts a new one, which takes the trigger over. Then the train
task is cleared while its job runs (the UI's *Clear*, through the REST API): Airflow cancels the trigger "by user
action" and calls its ``on_kill``, which leaves the job running because the task runs again; the second try
re-attaches to the same job and the run succeeds with that one job, never stopped. A second run whose conf names a pipeline file outside the DAG's directories is refused by its
prepare task, and that file's prepare script never runs. Every process is stopped after, and no process of this
Airflow home is left.

The run time is printed (``-s`` shows it); the job trains a few epochs only (DAG parameter ``hyperparameters``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.airflow_db import answer
from support.airflow_db import rows as query  # for waits: no rows while the database is busy
from support.airflow_home import REPO, airflow_environment, copy_migrated_database

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

DAG_ID = "retrain_pipeline"
RUN_ID = "manual__scheduler_test"
TASKS = ("prepare", "stage", "train", "evaluate", "gate", "register")
EVIL_RUN_ID = "manual__another_pipeline_file"
#: A valid pipeline file outside the DAG's pipeline directories, whose prepare script would mark that it ran.
EVIL_PIPELINE = """name: elsewhere
steps:
  prepare:
    script: export.py
  stage: {source: ., destination: ./staged}
  train: {spec: {name: x, entry_point: export.py, source_dir: ., instance_type: ml.m5.large, instance_count: 1}}
  evaluate: {entry_point: export.py, source_dir: ., channels: {test: .}}
  register: {group: elsewhere}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Components:
    """The Airflow processes of one home, each in a session of its own; logs under ``<home>/component-logs``."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = home / "component-logs"
        self.logs.mkdir()
        self.started = 0

    def start(self, name: str, *arguments: str) -> subprocess.Popen:
        self.started += 1
        log = open(self.logs / f"{name}-{self.started}.log", "wb")
        process = subprocess.Popen([sys.executable, "-m", "airflow", *arguments], env=self.env, cwd=str(self.home),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.processes[name] = process
        return process

    def kill(self, name: str, how: int = signal.SIGKILL) -> None:
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, how)
        except ProcessLookupError:
            pass
        process.wait(timeout=60)

    def stop_all(self) -> None:
        for process in list(self.processes.values()):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        for process in list(self.processes.values()):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group, not only the leader: LocalExecutor workers and task supervisors are in it
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=30)
        self.processes.clear()

    def tail(self) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            parts.append(f"--- {path.name} ---\n" + path.read_text(errors="replace")[-2500:])
        return "\n".join(parts)


def processes_of(home: Path) -> list[str]:
    """Every live process whose environment names this Airflow home (components, tasks, supervisors, job hosts)."""
    marker = f"AIRFLOW_HOME={home}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(f"{entry}: " + Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                                 .decode(errors="replace")[:160])
        except OSError:
            continue
    return found




def task_states(database: Path, run_id: str = RUN_ID) -> dict[str, str]:
    rows = answer(database, "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?", DAG_ID, run_id)
    return {task: state for task, state in rows}


def run_state(database: Path, run_id: str = RUN_ID) -> str | None:
    rows = answer(database, "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", DAG_ID, run_id)
    return rows[0][0] if rows else None


def task_log(home: Path, run_id: str = RUN_ID, task_id: str = "train") -> str:
    """Everything Airflow wrote for a task of a run: the worker's log and the triggerer's part of it."""
    parts = []
    for path in sorted((home / "logs").glob(f"dag_id={DAG_ID}/run_id={run_id}/task_id={task_id}/**/*")):
        if path.is_file():
            parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def trigger_logs(home: Path, attempt: int, run_id: str = RUN_ID, task_id: str = "train") -> list[Path]:
    """The triggerers' log files of one try of a task (one per triggerer that ran its trigger)."""
    folder = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    return sorted(folder.glob(f"attempt={attempt}.log.trigger.*"))


def log_events(home: Path, run_id: str, task_id: str) -> list[str]:
    """The messages of every structured line Airflow wrote for a task of a run, its triggerers' parts included."""
    events = []
    for line in task_log(home, run_id, task_id).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            events.append(record["event"])
    return events


def train_log(home: Path) -> str:
    return task_log(home, RUN_ID, "train")


def rest(env: dict[str, str], method: str, path: str, body: dict | None = None) -> dict:
    """A call to the api-server's REST API as the UI makes it (``/api/v2/...``), with an admin's token."""
    import urllib.request

    base = env["AIRFLOW__API__BASE_URL"]

    def call(verb: str, route: str, payload: dict | None, token: str | None) -> dict:
        request = urllib.request.Request(base + route, method=verb,
                                         data=None if payload is None else json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json",
                                                  **({"Authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read() or b"{}")

    token = call("GET", "/auth/token", None, None)["access_token"]  # [core] simple_auth_manager_all_admins
    return call(method, path, body, token)


def fetch(env: dict[str, str], url: str, token: str | None = None) -> tuple[int, dict[str, str], str]:
    """(status, headers, text) of a GET as a browser signed in to the UI makes it (its session cookie, an admin's),
    or with ``token`` as its bearer token."""
    import urllib.error
    import urllib.request

    headers = ({"Authorization": f"Bearer {token}"} if token
               else {"Cookie": f"_token={rest(env, 'GET', '/auth/token')['access_token']}"})
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as answer:
            return answer.status, {key.lower(): value for key, value in answer.headers.items()}, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, {key.lower(): value for key, value in error.headers.items()}, ""


def clear_task(env: dict[str, str], dag_id: str, run_id: str, task_id: str) -> dict:
    """The UI's *Clear* of one task instance (not its downstream): Airflow's everyday "run this task again"."""
    return rest(env, "POST", f"/api/v2/dags/{dag_id}/clearTaskInstances",
                {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False,
                 "reset_dag_runs": True})


def mark_failed(env: dict[str, str], dag_id: str, run_id: str, task_id: str) -> dict:
    """The UI's *Mark as failed* of one task instance."""
    return rest(env, "PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}",
                {"new_state": "failed"})


def try_number(database: Path, dag_id: str, run_id: str, task_id: str) -> int:
    rows = answer(database, "SELECT try_number FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = ?",
                 dag_id, run_id, task_id)
    return int(rows[0][0] or 0) if rows else 0


def airflow_cli(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow", *arguments], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def airflow(tmp_path_factory, airflow_db_template):
    home = tmp_path_factory.mktemp("airflow-scheduler")
    dags = home / "dags"
    dags.mkdir()
    (dags / "retrain_pipeline.py").symlink_to(REPO / "dags" / "retrain_pipeline.py")  # only this DAG is parsed
    port = free_port()
    env = airflow_environment(home)
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        # Tasks talk to the API server's execution API; every component signs and checks the same tokens.
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
        # A task's calls to the execution API wait up to 30 s for an answer, not 5 (Airflow's docs: raise it under
        # high load). Here the API server shares 2 cores with the other test modules and a CPU hog, and answers from
        # a SQLite database the scheduler and DAG processor write too: a task's start once took 31 s to answer
        # (a run with three test workers), and the task, giving up after 5 s and its retries, failed before it ran.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
        # The REST API as a UI user acts through it (clear, mark failed): the simple auth manager's admin token.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        # Only the run this test triggers (no scheduled run; test_airflow_scheduler_unpause.py has those).
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        # A killed triggerer's triggers go to another one once its heartbeat is this old.
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "5",
    })
    copy_migrated_database(airflow_db_template, home)  # the run's one `airflow db migrate`, copied
    components = Components(home, env)
    try:
        yield home, env, components
    finally:
        components.stop_all()
        jobs = home / "trainops" / "jobs"
        for job in sorted(jobs.iterdir()) if jobs.is_dir() else []:  # a failed test must not leave training behind
            subprocess.run([sys.executable, "-m", "trainops.cli", "stop", job.name], env=env, capture_output=True,
                           timeout=120, cwd=str(home))
        deadline = time.monotonic() + 30
        while processes_of(home) and time.monotonic() < deadline:
            time.sleep(0.5)


def test_retrain_pipeline_under_the_real_scheduler_survives_a_triggerer_restart(airflow):
    home, env, components = airflow
    database = home / "airflow.db"
    started = time.monotonic()
    components.start("api-server", "api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"])
    components.start("dag-processor", "dag-processor")
    components.start("scheduler", "scheduler")
    components.start("triggerer", "triggerer")

    deadline = time.monotonic() + 240
    while not query(database, "SELECT dag_id FROM dag WHERE dag_id = ?", DAG_ID):
        assert time.monotonic() < deadline, "the DAG processor never stored the DAG\n" + components.tail()
        time.sleep(2)
    for arguments in (("dags", "unpause", DAG_ID),
                      ("dags", "trigger", DAG_ID, "--run-id", RUN_ID, "--conf",
                       json.dumps({"hyperparameters": {"epochs": 16}}))):
        done = airflow_cli(env, *arguments)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    seen: dict[str, set[str]] = {task: set() for task in TASKS}
    job_status_at_kill = None
    cleared_while = None
    logs_before_restart: set[Path] = set()
    logs_while_deferred: list[str] = []
    deadline = time.monotonic() + 900
    while run_state(database) not in ("success", "failed"):
        assert time.monotonic() < deadline, f"the run did not end: {task_states(database)}\n" + components.tail()
        states = task_states(database)
        for task, state in states.items():
            seen[task].add(str(state))
        if states.get("train") == "deferred" and not logs_while_deferred:
            lines = [line for line in train_log(home).splitlines() if "[algo-" in line]
            if lines and task_states(database).get("train") == "deferred":  # still deferred after the read
                logs_while_deferred = lines
        if states.get("train") == "deferred" and job_status_at_kill is None:
            jobs = list((home / "trainops" / "jobs").iterdir())
            assert len(jobs) == 1, jobs
            job_status_at_kill = json.loads((jobs[0] / "status.json").read_text())["status"]
            components.kill("triggerer")  # mid-job, as a crash would
            logs_before_restart = set(trigger_logs(home, 1))
            components.start("triggerer", "triggerer")
        taken_over = set(trigger_logs(home, 1)) - logs_before_restart
        if job_status_at_kill and not cleared_while and states.get("train") == "deferred" and taken_over:
            # the new triggerer took the trigger over (a log file of its own): now the UI's Clear of the task
            jobs = list((home / "trainops" / "jobs").iterdir())
            cleared_while = json.loads((jobs[0] / "status.json").read_text())["status"]
            clear_task(env, DAG_ID, RUN_ID, "train")
        time.sleep(1)
    seconds = time.monotonic() - started
    print(f"\nreal scheduler: retrain_pipeline {run_state(database)} after {seconds:.0f} s "
          f"(components started, DAG parsed, run triggered, triggerer restarted)")

    assert run_state(database) == "success", f"{task_states(database)}\n{components.tail()}"
    assert task_states(database) == {task: "success" for task in TASKS}
    assert "deferred" in seen["train"], seen["train"]
    assert job_status_at_kill == "InProgress", "the triggerer was not killed mid-job"
    # cleared while its job ran: the next try re-attached, the first try's trigger left the job running
    assert cleared_while == "InProgress", "the task was not cleared mid-job"
    assert try_number(database, DAG_ID, RUN_ID, "train") == 2
    assert "re-attaching to local job" in task_log(home, RUN_ID, "train")
    assert "which is left running" in "\n".join(path.read_text() for path in trigger_logs(home, 1))
    [(value,)] = answer(database, "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = 'train' "
                                 "AND key = 'return_value'", DAG_ID, RUN_ID)
    result = json.loads(value) if isinstance(value, (str, bytes)) else value
    assert (result["backend"], result["status"], result["reattached"]) == ("local", "Completed", True)
    assert Path(result["model_artifact"]).is_file() and Path(result["model_artifact"]).is_relative_to(home)
    # one job for the run: neither the deferral, the triggerer restart nor the clear started another (or stopped it)
    assert len(list((home / "trainops" / "jobs").iterdir())) == 1
    # the job's hosts' lines reached the task log while the task was deferred (not only after the job ended)
    assert any("[algo-1" in line for line in logs_while_deferred), train_log(home)[-3000:]
    # ... and every line of the job is in the train task's log exactly once, across the first try's two triggerers
    # and the second try that re-attached after the clear: none repeated, none lost, the tail included
    from collections import Counter

    from trainops.backends.api import JobHandle, get_backend

    [job] = list((home / "trainops" / "jobs").iterdir())
    handle = JobHandle("local", job.name, workdir=str(home / "trainops"))
    written, _ = get_backend("local", workdir=str(home / "trainops")).log_lines(handle, None, limit=1_000_000)
    logged = Counter(event for event in log_events(home, RUN_ID, "train") if event.startswith("[algo-"))
    assert written and logged == Counter(written), (Counter(written) - logged, logged - Counter(written))
    assert not answer(database, "SELECT key FROM variable WHERE key LIKE 'trainops_log_mark%'")  # forgotten at the end

    # The evaluate task's "Evaluation report" link opens the report on the API server, for a signed-in user only.
    links = rest(env, "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances/evaluate/links")
    url = links["extra_links"]["Evaluation report"]
    assert url == f"{env['AIRFLOW__API__BASE_URL']}/trainops/reports/{DAG_ID}/{RUN_ID}/evaluate?map_index=-1", links
    status, headers, page = fetch(env, url)
    assert status == 200 and "sandbox" in headers["content-security-policy"], (status, headers)
    assert "Quality gate passed" in page and "Digits classifier evaluation" in page  # the verdict, report.md
    assert "<h1>Digits classifier evaluation</h1>" in page and "# Digits" not in page  # rendered, not raw Markdown
    [curve] = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)  # the loss curve, inlined
    assert base64.b64decode(curve).startswith(b"\x89PNG")
    # Airflow's own check guards it: a forged token is refused (this deployment makes a request without one an
    # admin's, so that is the check that can fail here)
    assert fetch(env, url, token="forged")[0] in (401, 403)

    # A conf naming another pipeline file: the prepare task refuses it; its prepare script never runs.
    marker = home / "taken-over"
    evil = home / "elsewhere" / "pipeline.yaml"
    evil.parent.mkdir()
    (evil.parent / "export.py").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n")
    evil.write_text(EVIL_PIPELINE)
    done = airflow_cli(env, "dags", "trigger", DAG_ID, "--run-id", EVIL_RUN_ID, "--conf",
                       json.dumps({"pipeline_file": str(evil)}))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    deadline = time.monotonic() + 300
    while run_state(database, EVIL_RUN_ID) not in ("success", "failed"):
        assert time.monotonic() < deadline, "the second run did not end\n" + components.tail()
        time.sleep(1)
    assert run_state(database, EVIL_RUN_ID) == "failed"
    assert task_states(database, EVIL_RUN_ID)["prepare"] == "failed"
    assert "is not inside a directory this DAG reads pipeline files from" in task_log(home, EVIL_RUN_ID, "prepare")
    assert not marker.exists(), "the conf's prepare script ran on the worker"

    components.stop_all()
    deadline = time.monotonic() + 30
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert processes_of(home) == [], "processes of this Airflow home are still running"
