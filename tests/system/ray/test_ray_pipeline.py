"""The retraining pipeline on the ray engine, from the two orchestrators, on the real test cluster: the repository's
retraining DAG (dags/retrain_pipeline.py) under ``dag.test()``, and ``trainops kfp run-local``, each given a pipeline
file whose backend is ray. Both run where an Airflow worker or a KFP pod runs: outside the cluster, reaching its Jobs
API through an address of their own (the ``jobs_api`` relay), with no Ray node of their own. Prepare, stage and
evaluate run there; train is one 2-host Ray job of the step's name; the evaluation reads the model host 1 packed.

The pipeline's scripts are the Slurm pipeline test's (tests/system/scripts/slurm/pipeline): the steps, not the
training, are tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "slurm" / "pipeline"

PIPELINE = """\
name: tiny-retrain
backend: ray
backend_options: {{address: "{address}", gpus_per_host: 0}}
steps:
  prepare:
    script: prepare.py
    args: ["--out", "${{workdir}}/raw"]
  stage:
    source: ${{workdir}}/raw
    destination: ${{workdir}}/data/tiny
  train:
    spec:
      name: tiny
      entry_point: train.py
      source_dir: .
      instance_type: ml.c5.xlarge
      instance_count: 2
      max_run: 600
      output_path: file://${{workdir}}/models
      inputs: {{train: "s3://trainops-example-data/tiny/train/"}}  # read from where stage put it (channels)
    channels:
      train: ${{workdir}}/data/tiny/train
  evaluate:
    entry_point: evaluate.py
    source_dir: .
    channels:
      test: ${{workdir}}/data/tiny/test
    gate: "accuracy >= 0.95"
  register:
    group: tiny
    approval: Approved
"""


def pipeline_file(directory: Path, address: str) -> Path:
    directory.mkdir()
    for name in ("prepare.py", "train.py", "evaluate.py"):
        (directory / name).write_text((SCRIPTS / name).read_text())
    (directory / "pipeline.yaml").write_text(PIPELINE.format(address=address))
    return directory / "pipeline.yaml"


def ray_job(ray_cluster, name: str) -> dict:
    found = ray_cluster.get(f"/api/jobs/{name}")
    assert isinstance(found, dict), f"no Ray job {name}"
    return found


def test_the_retraining_dag_trains_on_the_ray_cluster(ray_cluster, jobs_api, tmp_path,
                                                      airflow_home):  # noqa: F811
    from support.airflow_home import REPO, AirflowHome

    pipeline = pipeline_file(tmp_path / "pipelines", jobs_api)
    work = tmp_path / "airflow-work"
    env = {**airflow_home.env, "AIRFLOW_VAR_TRAINOPS_PIPELINE_DIRS": str(pipeline.parent),
           "AIRFLOW_VAR_TRAINOPS_WORKDIR": str(work)}
    env.pop("RAY_ADDRESS", None)  # the pipeline file says where the cluster is
    home = AirflowHome(airflow_home.path, env)
    outcome, done = home.dag_test(REPO / "dags" / "retrain_pipeline.py", "retrain_pipeline",
                                  {"pipeline_file": str(pipeline)})
    assert outcome is not None, f"dag.test() failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    assert outcome["tasks"] == {task: "success" for task in ("prepare", "stage", "train", "evaluate", "gate",
                                                              "register")}, (outcome["tasks"], done.stdout[-8000:],
                                                                             done.stderr[-8000:])
    train = outcome["xcom"]["train"]["return_value"]
    assert (train["backend"], train["status"]) == ("ray", "Completed"), train
    job = ray_job(ray_cluster, train["job_name"])  # one Ray job of the step's name, trainops'
    assert job["status"] == "SUCCEEDED" and job["metadata"]["trainops_token"] == "trainops-ray-v1", job
    assert train["model_artifact"] == (work / "models" / train["job_name"] / "output" / "model.tar.gz").as_uri()
    assert outcome["xcom"]["evaluate"]["return_value"]["passed"] is True
    assert outcome["xcom"]["register"]["return_value"]["version"] == 1


def test_kfp_run_local_trains_on_the_ray_cluster(ray_cluster, jobs_api, tmp_path):
    pipeline = pipeline_file(tmp_path / "pipelines", jobs_api)
    work = tmp_path / "kfp-work"
    env = {key: value for key, value in ray_cluster.client_env().items() if key != "RAY_ADDRESS"}
    env["TRAINOPS_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "trainops.cli", "kfp", "run-local", str(pipeline), "--workdir",
                           str(work), "--backend", "ray"], capture_output=True, text=True, timeout=500, env=env)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    assert "[kfp] pipeline tiny-retrain: SUCCEEDED" in done.stdout, done.stdout[-6000:]
    models = sorted((work / "models").glob("*/output/model.tar.gz"))
    assert len(models) == 1, models  # one training job, on the cluster
    job = ray_job(ray_cluster, models[0].parents[1].name)
    assert job["status"] == "SUCCEEDED" and job["metadata"]["trainops_token"] == "trainops-ray-v1", job
    assert "training on algo-1" in job_logs(ray_cluster, job["submission_id"])
    registered = list(work.rglob("registry/tiny/v1/model.tar.gz"))
    assert registered, sorted(str(path) for path in work.rglob("*"))[:80]


def job_logs(ray_cluster, name: str) -> str:
    found = ray_cluster.get(f"/api/jobs/{name}/logs")
    return str(found.get("logs", "")) if isinstance(found, dict) else ""
