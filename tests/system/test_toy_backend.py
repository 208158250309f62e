"""A third backend, installed as a package, runs through every front end with no edit to trainops (issue 38, item 1).

``tests/support/toy_backend`` is a package as a third party would publish one: its own options type, its own context
(``root``), one entry point in the ``trainops.backends`` group. It is installed with ``pip install --target`` into a
directory that only this module's processes see (PYTHONPATH): trainops finds it through the entry point alone. Its
jobs are honest: each is a process of this machine with a state file and a log, so status, logs and stop are real.

The same toy then runs through the command line (run, status, logs, stop with ``-o`` options and a named backend),
an Airflow DAG under ``dag.test()`` (the train task defers, its first try loses the answer to the create call, the
retry re-attaches to the job that runs and defers on it), a pipeline file whose train channel is a persistent volume
claim (``pvc://``, text to trainops, mounted by the toy), and ``kfp.local`` (``trainops kfp run-local``) on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tests" / "support" / "toy_backend"
#: The job's script: prints its colour, waits (jobs named long-*) or for a release file (release-*), then writes a
#: model.
TRAIN = """\
import os, pathlib, sys, time
print("colour", os.environ["TOY_COLOUR"], "job", os.environ["TOY_JOB_NAME"], flush=True)
job = pathlib.Path(os.environ["TOY_JOB_DIR"])
if os.environ["TOY_JOB_NAME"].startswith("long"):
    (job / "started").write_text("started")
    time.sleep(3600)
if os.environ.get("TOY_CHANNEL_TRAIN"):
    print("read", pathlib.Path(os.environ["TOY_CHANNEL_TRAIN"], "data.txt").read_text().strip(), "from the train channel",
          flush=True)
if os.environ.get("TOY_WAIT_FOR_RELEASE"):
    while not (job / "release").exists():
        time.sleep(0.1)
pathlib.Path(os.environ["TOY_MODEL_DIR"], "model.txt").write_text("trained")
"""


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory) -> Path:
    """The toy package installed the way pip installs a distribution (its dist-info holds the entry point), into a
    directory of its own."""
    target = tmp_path_factory.mktemp("toy-site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(PACKAGE)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_NO_CACHE_DIR": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(target.glob("trainops_toy_backend-*.dist-info/entry_points.txt"))
    return target


@pytest.fixture
def toy_env(toy_path, tmp_path) -> dict[str, str]:
    """The environment of a process that sees the toy package (and no file of named backends)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(toy_path), os.environ.get("PYTHONPATH")])),
            "TRAINOPS_HOME": str(tmp_path / "home"), "TRAINOPS_BACKENDS": os.devnull}


@pytest.fixture
def spec(tmp_path) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: toy\nentry_point: train.py\nsource_dir: {tmp_path / 'code'}\ninstance_type: ml.m5.large\n")
    return path


def trainops(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainops.cli", *arguments], capture_output=True, text=True,
                          timeout=240, env=env, cwd=str(ROOT))


def wait_for(predicate, what: str, limit: float = 120.0) -> None:
    """Poll until ``predicate()`` holds; fail naming ``what`` if it never does (a bound, not a timing check)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.1)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def record(root: Path, name: str) -> dict:
    path = root / "jobs" / name / "status.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_the_toys_own_spec_rules_and_price_bind_its_jobs_and_only_its_jobs(toy_env, spec):
    """The toy declares a spec rule through the kit (`spec_rule`, bound by its vocabulary): a machine type it does not
    have is refused before anything is created, naming the field; its own ``toy.small`` (no ``ml.*`` type, which
    SageMaker's rules would refuse) renders, forecast at the toy's own price list; the same spec on local is refused
    by SageMaker's rules, which do not bind the toy."""
    foreign = spec.read_text().replace("instance_type: ml.m5.large", "instance_type: ml.p4d.24xlarge")
    spec.write_text(foreign)
    refused = trainops("render", str(spec), "--backend", "toy", env=toy_env)
    assert refused.returncode == 2, refused.stderr
    assert "instance_type: 'ml.p4d.24xlarge' is not a machine type of the toy engine" in refused.stderr
    assert refused.stdout == ""
    spec.write_text(foreign.replace("instance_type: ml.p4d.24xlarge", "instance_type: toy.small"))
    rendered = trainops("render", str(spec), "--backend", "toy", env=toy_env)
    assert rendered.returncode == 0, rendered.stderr
    assert json.loads(rendered.stdout)["instance_type"] == "toy.small"
    assert "toy.small at $0.0010/h; us-east-1, the toy's own price list" in rendered.stderr
    on_local = trainops("render", str(spec), "--backend", "local", env=toy_env)
    assert on_local.returncode == 2 and "instance_type" in on_local.stderr and "toy.small" in on_local.stderr


def test_the_cli_runs_shows_follows_and_stops_toy_jobs_with_its_options(toy_env, spec, tmp_path):
    root = tmp_path / "toy-root"
    listed = trainops("backends", "--json", env=toy_env)
    assert listed.returncode == 0, listed.stderr
    toy = {row["name"]: row for row in json.loads(listed.stdout)}["toy"]
    assert toy["source"].startswith("package") and toy["settings"] == {
        "colour": "str", "priority": "int", "root": "str", "channel_overrides": "mapping", "checkpoint_key": "str"}

    ran = trainops("run", str(spec), "--backend", "toy", "--job-name", "toy-1", "-o", f"root={root}",
                   "-o", "colour=blue", "-o", "priority=3", env=toy_env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "toy-1 (toy)" in ran.stdout and "Completed" in ran.stdout
    assert (root / "jobs" / "toy-1" / "model" / "model.txt").read_text() == "trained"
    shown = trainops("status", "toy-1", "--backend", "toy", "-o", f"root={root}", "--json", env=toy_env)
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert (status["status"], status["colour"], status["priority"]) == ("Completed", "blue", 3)
    logs = trainops("logs", "toy-1", "--backend", "toy", "-o", f"root={root}", env=toy_env)
    assert logs.returncode == 0 and "[toy] colour blue job toy-1" in logs.stdout, logs.stderr
    again = trainops("run", str(spec), "--backend", "toy", "--job-name", "toy-1", "-o", f"root={root}", env=toy_env)
    assert again.returncode == 0 and (root / "jobs" / "toy-1" / "attached.log").is_file()  # followed, not re-run
    assert sorted(path.name for path in (root / "jobs").iterdir()) == ["toy-1"]

    # What the toy does not take, or text that is not its type, is refused naming the setting and the backend.
    refused = trainops("run", str(spec), "--backend", "toy", "--job-name", "toy-2", "-o", f"root={root}",
                       "-o", "priority=high", "-o", "preflight=false", env=toy_env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "priority: 'high' is not a whole number (a setting of the toy backend)" in refused.stderr
    assert "preflight: is not a setting of the toy backend (its settings: channel_overrides, checkpoint_key, colour, priority, root)" in refused.stderr
    missing = trainops("status", "toy-9", "--backend", "toy", "-o", f"root={root}", env=toy_env)
    assert missing.returncode == 2 and f"no job 'toy-9' on the toy backend (looked in {root / 'jobs'})" in \
        missing.stderr


def test_a_named_toy_backend_runs_a_job_detached_and_stop_ends_its_processes(toy_env, spec, tmp_path):
    root = tmp_path / "team-root"
    named = tmp_path / "backends.yaml"
    named.write_text(f"team-toy:\n  backend: toy\n  options: {{root: {root}, colour: red}}\n")
    env = {**toy_env, "TRAINOPS_BACKENDS": str(named)}
    started = trainops("run", str(spec), "--backend", "team-toy", "--job-name", "long-1", "--no-wait", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    wait_for(lambda: (root / "jobs" / "long-1" / "started").exists(), "the job's script started")
    shown = trainops("status", "long-1", "--backend", "team-toy", "--json", env=env)
    assert json.loads(shown.stdout)["status"] == "InProgress" and json.loads(shown.stdout)["colour"] == "red"
    pids = [record(root, "long-1")["runner_pid"], record(root, "long-1")["child_pid"]]
    assert all(alive(pid) for pid in pids)
    stopped = trainops("stop", "long-1", "--backend", "team-toy", env=env)
    assert stopped.returncode == 0 and "long-1: stopping" in stopped.stdout, stopped.stderr
    wait_for(lambda: record(root, "long-1").get("status") == "Stopped", "the job recorded Stopped")
    wait_for(lambda: not any(alive(pid) for pid in pids), "every process of the job ended")
    final = json.loads(trainops("status", "long-1", "--backend", "team-toy", "--json", env=env).stdout)
    assert final["status"] == "Stopped" and final["failure_reason"] == "stopped by SIGTERM"


#: A job whose node is lost once: its first attempt kills its runner (the toy's node: the process that records how
#: the job ends) and itself, so nothing records an end; the attempt after it (its marker is in the shared code
#: directory) trains. ``TOY_FAIL`` set: the script fails instead (a user error).
LOSES_ITS_NODE = """\
import os, pathlib, signal, sys
if os.environ.get("TOY_FAIL"):
    print("the script fails on purpose", flush=True)
    sys.exit(3)
marker = pathlib.Path("node-lost-once")
if not marker.exists():
    marker.write_text(os.environ["TOY_JOB_NAME"])
    print("losing the node", flush=True)
    os.kill(os.getppid(), signal.SIGKILL)
    os._exit(1)
pathlib.Path(os.environ["TOY_MODEL_DIR"], "model.txt").write_text("trained")
"""


def test_a_lost_toy_node_is_infrastructure_and_retried_while_a_failed_script_is_not(toy_env, tmp_path):
    """The toy's own vocabulary classifies its own evidence: a lost node (``NodeLost``) is infrastructure, and
    ``trainops run --retries`` starts ``<name>-2``, which trains; a script that exits non-zero is user, not retried."""
    root, code = tmp_path / "toy-root", tmp_path / "lost-code"
    code.mkdir()
    (code / "train.py").write_text(LOSES_ITS_NODE)
    spec = tmp_path / "lost.yaml"
    spec.write_text(f"name: toy\nentry_point: train.py\nsource_dir: {code}\ninstance_type: ml.m5.large\n")
    ran = trainops("run", str(spec), "--backend", "toy", "--job-name", "lost", "-o", f"root={root}",
                   "--retries", "infrastructure=1,backoff_seconds=0", env=toy_env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (code / "node-lost-once").read_text() == "lost"
    assert record(root, "lost")["status"] == "NodeLost" and "node was lost" in record(root, "lost")["failure_reason"]
    assert record(root, "lost-2")["status"] == "Completed"
    assert (root / "jobs" / "lost-2" / "model" / "model.txt").read_text() == "trained"
    assert "attempt:    lost Failed (infrastructure (the toy job's node (its runner process) went away" in ran.stdout
    assert "secondary_status: NodeLost" in ran.stdout and "attempt:    lost-2 Completed" in ran.stdout
    shown = trainops("status", "lost", "--backend", "toy", "-o", f"root={root}", "--json", env=toy_env)
    assert json.loads(shown.stdout)["status"] == "Failed", shown.stderr

    failing = tmp_path / "failing.yaml"
    failing.write_text(spec.read_text() + "environment:\n  TOY_FAIL: '1'\n")
    failed = trainops("run", str(failing), "--backend", "toy", "--job-name", "fails", "-o", f"root={root}",
                      "--retries", "infrastructure=1,backoff_seconds=0", env=toy_env)
    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert "why:        user failure: the toy job's script exited non-zero" in failed.stdout, failed.stdout
    assert record(root, "fails")["status"] == "Failed" and not (root / "jobs" / "fails-2").exists()


DAG_FILE = """\
import datetime

from airflow.sdk import DAG

from trainops.operators.training import DistributedTrainingOperator

SPEC = {{"name": "toy", "entry_point": "train.py", "source_dir": {code!r}, "instance_type": "ml.m5.large",
        "environment": {{"TOY_WAIT_FOR_RELEASE": "1"}}}}

with DAG(dag_id="toy_training", schedule=None) as toy_training:
    DistributedTrainingOperator(task_id="train", spec=SPEC, backend="toy",
                                backend_options={{"root": {root!r}, "colour": "green", "priority": "7"}},
                                deferrable=True, check_interval=0.2, retries=1,
                                retry_delay=datetime.timedelta(seconds=0))
"""


def test_a_dag_defers_on_a_toy_job_and_its_retry_reattaches(airflow_home, toy_env, tmp_path):  # noqa: F811
    root = tmp_path / "dag-root"
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    root.mkdir()
    (root / "lose-next-create-answer").write_text("the first try's create call loses its answer")
    dag_file = tmp_path / "toy_dags.py"
    dag_file.write_text(DAG_FILE.format(code=str(tmp_path / "code"), root=str(root)))
    outcome: list = []
    env = {key: toy_env[key] for key in ("PYTHONPATH", "TRAINOPS_BACKENDS")}
    runner = threading.Thread(target=lambda: outcome.append(airflow_home.dag_test(
        dag_file, "toy_training", timeout=480, env=env)))
    runner.start()
    try:
        # The retry found the job the first try created (it runs, held by its release file), re-attached, looked
        # once and deferred: the trigger's look is the second one after the re-attach.
        def looked_twice() -> bool:
            looks = list((root / "jobs").glob("*/looks-after-attach.log")) if (root / "jobs").exists() else []
            return bool(looks) and len(looks[0].read_text().splitlines()) >= 2

        wait_for(lambda: not runner.is_alive() or looked_twice(), "the trigger looked at the re-attached job",
                 limit=420)
    finally:
        for job in (root / "jobs").iterdir() if (root / "jobs").exists() else []:
            (job / "release").write_text("go")  # the job may complete now (and never outlives the test)
        runner.join(timeout=480)
    assert outcome, "dag.test() did not return"
    result, done = outcome[0]
    output = done.stdout + done.stderr
    assert result is not None, output[-6000:]
    assert result["tasks"] == {"train": "success"} and result["tries"] == {"train": 2}, output[-6000:]
    xcom = result["xcom"]["train"]["return_value"]
    assert (xcom["backend"], xcom["status"], xcom["reattached"]) == ("toy", "Completed", True)
    jobs = sorted(path.name for path in (root / "jobs").iterdir())
    assert jobs == [xcom["job_name"]]  # one job: the retry followed it, never created another
    assert record(root, jobs[0])["status"] == "Completed"
    assert json.loads((root / "jobs" / jobs[0] / "job.json").read_text())["priority"] == 7  # coerced from "7"
    assert "the answer to creating" in output  # the first try failed after the job was created
    assert "deferring: the triggerer waits for toy training job" in output
    assert not (root / "lose-next-create-answer").exists()


def claim_pipeline(tmp_path: Path, root: Path, job_name: str, claim: str = "pvc://team-a/datasets/digits") -> Path:
    """A pipeline file whose train step runs on the toy with its ``train`` channel on a persistent volume claim, and
    the claim's data where the toy mounts it (``<root>/claims/<namespace>/<claim>/<path>``)."""
    (tmp_path / "train.py").write_text(TRAIN)
    mounted = root / "claims" / "team-a" / "datasets" / "digits"
    mounted.mkdir(parents=True)
    (mounted / "data.txt").write_text("42\n")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(f"name: toy-retrain\nbackend: toy\nworkdir: {tmp_path / 'work'}\n"
                        f"backend_options: {{root: {root}, colour: purple}}\n"
                        f"steps:\n  train:\n    job_name: {job_name}\n    channels: {{train: '{claim}'}}\n"
                        "    spec: {entry_point: train.py, source_dir: ., instance_type: ml.m5.large}\n")
    return pipeline


def test_a_pipeline_file_trains_on_the_toy_from_a_pvc_channel(toy_env, tmp_path):
    root = tmp_path / "root"
    pipeline = claim_pipeline(tmp_path, root, "toy-pipe-1")
    done = trainops("run", str(pipeline), env=toy_env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert record(root, "toy-pipe-1")["status"] == "Completed"
    settings = json.loads((root / "jobs" / "toy-pipe-1" / "job.json").read_text())
    assert settings["channels"] == {"train": str(root / "claims" / "team-a" / "datasets" / "digits")}
    assert settings["checkpoint_key"] == "toy-pipe-1"  # the runner's key, which the toy's vocabulary takes
    assert "read 42 from the train channel" in (root / "jobs" / "toy-pipe-1" / "output.log").read_text()


def test_a_claim_path_that_climbs_out_of_its_claim_is_refused_naming_the_channel(toy_env, tmp_path):
    root = tmp_path / "root"
    pipeline = claim_pipeline(tmp_path, root, "toy-pipe-2", claim="pvc://team-a/datasets/../../../etc")
    done = trainops("run", str(pipeline), env=toy_env)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "channel_overrides.train" in output and "no '..'" in output, output[-6000:]
    assert not (root / "jobs" / "toy-pipe-2").exists()  # refused before anything was created


def test_kfp_local_runs_a_pipeline_on_the_toy_backend_from_a_pvc_channel(toy_env, tmp_path):
    root = tmp_path / "kfp-root"
    pipeline = claim_pipeline(tmp_path, root, "toy-kfp-1")
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "kfp", "run-local", str(pipeline), "--backend",
                           "toy", "-o", "priority=5"], capture_output=True, text=True, timeout=420,
                          cwd=str(ROOT), env=toy_env)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "[kfp] pipeline toy-retrain: SUCCEEDED" in done.stdout
    assert record(root, "toy-kfp-1")["status"] == "Completed"
    settings = json.loads((root / "jobs" / "toy-kfp-1" / "job.json").read_text())
    assert (settings["colour"], settings["priority"]) == ("purple", 5)  # the file's options and the run's
    assert (root / "jobs" / "toy-kfp-1" / "model" / "model.txt").read_text() == "trained"
    assert "read 42 from the train channel" in (root / "jobs" / "toy-kfp-1" / "output.log").read_text()
