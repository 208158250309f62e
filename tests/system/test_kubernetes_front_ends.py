"""The kubernetes engine driven from each front end, as a user drives it, on one emulated Kubeflow Trainer cluster for
the module (`support.k8s_cluster`: the API emulator, the stand-in controller running each node's command on this
machine with the PET_* variables, a shared volume): issue 44 item 4's front-end cases.

- ``trainops run --retries``: a node lost under a running 2-node job is an `infrastructure` failure by the engine's
  own rule (NodeLost), retried as ``<name>-2``, which resumes from the checkpoint the first attempt left on the
  shared volume;
- the retraining DAG (dags/retrain_pipeline.py) under ``dag.test()``: stage onto the shared volume, a deferred
  2-node TrainJob, evaluation and registration where trainops runs;
- ``trainops kfp run-local`` of the same pipeline file: the KFP components (kfp.local subprocesses) train on it.

Each test waits on conditions (a checkpoint written, a process ended), never on time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.airflow_home import REPO, AirflowHome
from support.k8s_api import PODS, TRAINJOBS
from support.k8s_cluster import NAMESPACE, EmulatedCluster, emulated_cluster

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

SCRIPTS = Path(__file__).parent / "scripts" / "slurm"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]
IMAGE = "example.org/python:3"


@pytest.fixture(scope="module")
def k8s(tmp_path_factory) -> EmulatedCluster:
    with emulated_cluster(tmp_path_factory.mktemp("k8s")) as cluster:
        yield cluster


def trainops(k8s: EmulatedCluster, home: Path, *args: str, timeout: float = 420) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=timeout, env=k8s.env(home))


def settings(k8s: EmulatedCluster) -> list[str]:
    return ["--backend", "kubernetes", *[part for key, value in k8s.settings().items()
                                         for part in ("-o", f"{key}={value}")]]


def wait_until(condition, what: str, limit: float = 180.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"waited {limit:.0f} s for {what}"
        time.sleep(0.1)


def kubernetes_pipeline(k8s: EmulatedCluster, directory: Path) -> Path:
    """The tiny retraining pipeline of the slurm tests (prepare, stage, train on 2 nodes, evaluate, register) with
    the kubernetes backend and this cluster's settings in its ``backend_options``, in ``directory``."""
    directory.mkdir()
    for path in (SCRIPTS / "pipeline").iterdir():
        (directory / path.name).write_text(path.read_text())
    text = (directory / "pipeline.yaml").read_text().replace(
        "backend: slurm\n", f"backend: kubernetes\nbackend_options: {json.dumps(k8s.settings())}\n")
    (directory / "pipeline.yaml").write_text(text)
    with open(directory / "train.yaml", "a") as spec:
        spec.write(f"image_uri: {IMAGE}\n")
    return directory / "pipeline.yaml"


def owned_train_job(k8s: EmulatedCluster, name: str) -> dict:
    """The one TrainJob of ``name``, checked to be trainops' (its marks)."""
    found = k8s.store.get(TRAINJOBS, NAMESPACE, name)
    assert found is not None, f"no TrainJob {name}: {k8s.store.listed(TRAINJOBS, NAMESPACE)}"
    assert found["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainops"
    assert found["status"]["conditions"][0]["type"] == "Complete", found["status"]
    return found


def test_a_two_node_torchrun_job_sees_the_contract_on_every_rank(k8s, tmp_path):
    """torch_distributed over 2 nodes (gloo): each pod's node script maps Trainer's PET_* to host algo-<rank+1>, the
    ranks all-reduce across the nodes and each reports the SageMaker contract it sees."""
    source, data = tmp_path / "src", tmp_path / "data"
    source.mkdir()
    data.mkdir()
    (source / "contract_probe.py").write_text((SCRIPTS / "contract_probe.py").read_text())
    (data / "part-0.txt").write_text("0\n")
    spec = tmp_path / "ddp.yaml"
    spec.write_text(f"name: ddp\nentry_point: contract_probe.py\nsource_dir: {source}\ninstance_type: ml.c5.xlarge\n"
                    f"instance_count: 2\nimage_uri: {IMAGE}\nmax_run: 600\ninputs: {{train: {data}}}\n"
                    "distribution: {type: torch_distributed, processes_per_host: 1}\nhyperparameters: {epochs: 3}\n")
    done = trainops(k8s, tmp_path / "home", "run", str(spec), *settings(k8s), "--job-name", "ddp-1")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    records = [json.loads(line.split("CONTRACT ", 1)[1]) for line in done.stdout.splitlines() if "CONTRACT " in line]
    assert sorted((record["rank"], record["sm_current_host"], record["node"]) for record in records) == [
        (0, "algo-1", "ddp-1-node-0-0"), (1, "algo-2", "ddp-1-node-0-1")], done.stdout[-6000:]
    for record in records:
        assert record["world_size"] == 2 and record["sum"] == 3.0  # the all-reduce crossed the two nodes
        assert record["sm_hosts"] == record["hosts"] == ["algo-1", "algo-2"]
        assert record["channels"] == ["train"] and record["train_files"] == ["part-0.txt"]
        assert record["hp_epochs"] == "3" and record["argv"] == ["--epochs", "3"]
    assert owned_train_job(k8s, "ddp-1")["spec"]["trainer"]["numProcPerNode"] == 1


def test_a_lost_node_is_an_infrastructure_failure_and_the_retry_resumes_from_the_checkpoint(k8s, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "lockstep.py").write_text((SCRIPTS / "lockstep.py").read_text())
    spec = tmp_path / "lockstep.yaml"
    spec.write_text(f"name: lockstep\nentry_point: lockstep.py\nsource_dir: {source}\ninstance_type: ml.c5.xlarge\n"
                    f"instance_count: 2\nimage_uri: {IMAGE}\nmax_run: 600\n"
                    "environment: {STEPS: '12', SECONDS_PER_STEP: '0.3'}\n")
    home = tmp_path / "home"
    run = subprocess.Popen([*TRAINOPS, "run", str(spec), *settings(k8s), "--job-name", "lost-1",
                            "--retries", "infrastructure=1,backoff_seconds=0"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, env=k8s.env(home))
    try:
        state = k8s.shared / "checkpoints" / "lost-1" / "state.json"  # lost-1-2 resumes from lost-1's
        wait_until(lambda: state.exists() and json.loads(state.read_text())["step"] >= 2, "two steps checkpointed")
        k8s.trainer.lose_node("lost-1", 1)  # its pod disrupted (the node tainted away), the JobSet failed
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, output
    assert "attempt:    lost-1 Failed (infrastructure" in output and "NodeLost" in output, output
    assert "attempt:    lost-1-2 Completed" in output, output
    resumed = [line for line in output.splitlines() if "resumed after step" in line]
    assert resumed and all(int(line.rsplit(" ", 1)[1]) >= 2 for line in resumed), output
    assert len(resumed) == 2  # both hosts of the retry resumed
    done = trainops(k8s, home, "status", "lost-1", *settings(k8s), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)
    assert [item["failure_class"] for item in record["attempts"]] == ["infrastructure", None], record
    # The first attempt's TrainJob failed as JobSet fails it (its lost pod kept), the retry's completed: two jobs.
    assert k8s.store.get(TRAINJOBS, NAMESPACE, "lost-1")["status"]["conditions"][0]["type"] == "Failed"
    owned_train_job(k8s, "lost-1-2")
    assert (k8s.shared / "jobs" / "lost-1-2" / "hosts" / "algo-1" / "model" / "steps.txt").read_text() == "12"


def test_the_retraining_dag_runs_on_kubernetes_with_the_train_task_deferred(k8s, tmp_path, airflow_home):
    """dags/retrain_pipeline.py under dag.test(), its conf naming a pipeline file whose backend is kubernetes: every
    task succeeds, the train task defers on its TrainJob (the trigger looks through the official client)."""
    pipeline = kubernetes_pipeline(k8s, tmp_path / "pipelines")
    work = k8s.shared / "airflow-work"
    env = {"KUBECONFIG": str(k8s.kubeconfig), "AIRFLOW_VAR_TRAINOPS_PIPELINE_DIRS": str(pipeline.parent),
           "AIRFLOW_VAR_TRAINOPS_WORKDIR": str(work)}
    home = AirflowHome(airflow_home.path, {**airflow_home.env, **env})
    outcome, done = home.dag_test(REPO / "dags" / "retrain_pipeline.py", "retrain_pipeline",
                                  {"pipeline_file": str(pipeline)})
    output = done.stdout + done.stderr
    assert outcome is not None, f"dag.test() failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    assert outcome["tasks"] == {task: "success" for task in ("prepare", "stage", "train", "evaluate", "gate",
                                                              "register")}, outcome["tasks"]
    assert "deferring: the triggerer waits for kubernetes training job" in output, output[-6000:]
    train = outcome["xcom"]["train"]["return_value"]
    assert (train["backend"], train["status"]) == ("kubernetes", "Completed"), train
    made = owned_train_job(k8s, train["job_name"])
    assert made["spec"]["trainer"]["numNodes"] == 2
    assert (work / "fsx" / "tiny" / "train" / "data.txt").is_file()  # staged onto the shared volume
    assert outcome["xcom"]["evaluate"]["return_value"]["passed"] is True
    assert outcome["xcom"]["register"]["return_value"]["version"] == 1
    assert (work / "registry" / "tiny" / "v1" / "model.tar.gz").is_file()


def test_the_kfp_pipeline_runs_on_kubernetes(k8s, tmp_path):
    """`trainops kfp run-local` of the same pipeline file: the KFP components (subprocesses of kfp.local) stage,
    train on the cluster, evaluate and register."""
    pipeline = kubernetes_pipeline(k8s, tmp_path / "pipelines")
    before = {job["metadata"]["name"] for job in k8s.store.listed(TRAINJOBS, NAMESPACE)}
    done = trainops(k8s, tmp_path / "home", "kfp", "run-local", str(pipeline), "--workdir",
                    str(k8s.shared / "kfp-work"), "--backend", "kubernetes")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    assert "[kfp] pipeline tiny-retrain: SUCCEEDED" in done.stdout, done.stdout[-6000:]
    assert "[kfp]   register-model  SUCCEEDED: version 1" in done.stdout, done.stdout[-6000:]
    [name] = {job["metadata"]["name"] for job in k8s.store.listed(TRAINJOBS, NAMESPACE)} - before
    owned_train_job(k8s, name)
    assert f"job {name} Completed" in done.stdout, done.stdout[-6000:]
    assert all(pod["status"]["phase"] == "Succeeded" for pod in k8s.store.listed(PODS, NAMESPACE)
               if pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == name)
