"""The slurm backend on a real two-node Slurm cluster (`support.slurm_cluster`: munged, slurmctld, slurmd n1 and n2,
slurmrestd, started once for the module), driven as a user drives it: `trainops run / status / logs / stop
--backend slurm -o shared_dir=...` in a subprocess, with the Slurm commands of SLURM_CONF (transport cli).

Each test waits on conditions (a log line, a Slurm state, a process gone), never on time; the two that inject
faults hold them for as long as the fault is meant to last (a controller down 30 s), then wait for the outcome.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from support.airflow_home import airflow_home  # noqa: F401 - the session fixture
from support.slurm_cluster import missing, start_cluster, wait_until

pytestmark = [pytest.mark.system, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

SCRIPTS = Path(__file__).parent / "scripts" / "slurm"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def write_spec(tmp_path: Path, script: str, *, name: str, hosts: int = 2, distribution: str = "{type: none}",
               extra: str = "", max_run: int = 600) -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / script).write_text((SCRIPTS / script).read_text())
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "part-0.txt").write_text("0\n")
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\nentry_point: {script}\nsource_dir: {source}\ninstance_type: ml.g5.12xlarge\n"
                    f"instance_count: {hosts}\ndistribution: {distribution}\nhealth_check: false\nmax_run: {max_run}\n"
                    f"inputs: {{train: {data}}}\n" + extra)
    return spec


def options(slurm) -> list[str]:
    return ["--backend", "slurm", "-o", f"shared_dir={slurm.shared_dir}", "-o", f"python={sys.executable}"]


def trainops(slurm, *args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=timeout, env=env or slurm.env)


def status(slurm, name: str) -> dict:
    done = trainops(slurm, "status", name, *options(slurm)[:4], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def slurm_jobs(slurm, name: str | None = None) -> list[dict]:
    jobs = json.loads(slurm.command("squeue", "--json").stdout)["jobs"]
    return [job for job in jobs if name is None or job["name"] == name]


@contextlib.contextmanager
def running(slurm, *args: str):
    """`trainops ARGS` running in the background while the block injects a fault; killed if the block fails."""
    process = subprocess.Popen([*TRAINOPS, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=slurm.env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_two_node_ddp_job_sees_the_contract_on_every_rank_and_a_second_run_reattaches(slurm, tmp_path):
    spec = write_spec(tmp_path, "contract_probe.py", name="probe",
                      distribution="{type: torch_distributed, processes_per_host: 1}",
                      extra="hyperparameters: {epochs: 2}\n")
    # Another user's job of the same name (held, so it never runs): trainops never takes it over.
    other = slurm.command("sbatch", "--parsable", "--uid=nobody", "--hold", "-J", "ddp-1", "--output=/dev/null",
                          "--chdir=/tmp", "--wrap", "true").stdout.strip()
    done = trainops(slurm, "run", str(spec), *options(slurm), "--job-name", "ddp-1")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads(line.split("CONTRACT ", 1)[1]) for line in done.stdout.splitlines() if "CONTRACT " in line]
    assert sorted(record["rank"] for record in seen) == [0, 1], done.stdout
    shared = slurm.shared_dir
    for record in seen:
        host = f"algo-{record['rank'] + 1}"
        base = shared / "jobs" / "ddp-1" / "hosts" / host
        assert record["world_size"] == 2 and record["sum"] == 3.0
        assert record["node"] == f"n{record['rank'] + 1}"  # node i of the allocation is host algo-<i+1>
        assert record["current_host"] == record["sm_current_host"] == host
        assert record["hosts"] == record["sm_hosts"] == ["algo-1", "algo-2"]
        assert record["channels"] == ["train"] and record["train_files"] == ["part-0.txt"]
        assert record["model_dir"] == str(base / "model") and record["output_data_dir"] == str(base / "output/data")
        assert record["hp_epochs"] == "2" and record["argv"] == ["--epochs", "2"]
        assert json.loads(record["hyperparameters"]["epochs"]) == 2
        assert Path(record["checkpoint_dir"]).resolve() == shared / "checkpoints" / "ddp-1"  # the job's own
    for host in ("algo-1", "algo-2"):  # every line of the job's log came through, each prefixed with its host
        assert f"[{host} rank {int(host[-1]) - 1}] CONTRACT " in done.stdout
    archive = shared / "output" / "ddp-1" / "output" / "model.tar.gz"
    with tarfile.open(archive) as tar:
        assert json.load(tar.extractfile("model.json")) == {"sum": 3.0}
    # Slurm has no price list: never SageMaker's price for ml.g5.12xlarge (issue 43), the cost is unknown.
    assert "cost:       cost unknown over 1 attempt (the slurm backend has no price list" in done.stdout

    again = trainops(slurm, "run", str(spec), *options(slurm), "--job-name", "ddp-1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "re-attaching" in again.stdout + again.stderr and str(archive) in again.stdout
    mine = [job for job in slurm_jobs(slurm, "ddp-1") if job["user_name"] == "root"]
    assert len(mine) == 1, mine  # one Slurm job for the name: the second run followed it
    held = [job for job in slurm_jobs(slurm, "ddp-1") if str(job["job_id"]) == other]
    assert held and held[0]["user_name"] == "nobody" and held[0]["job_state"] == "PENDING"
    slurm.command("scancel", other)
    record = status(slurm, "ddp-1")
    assert record["status"] == "Completed" and record["slurm_job_id"] == mine[0]["job_id"]
    assert record["cost"]["total"] is None and "no price list" in record["cost"]["no_price"]


def test_a_link_planted_at_the_jobs_output_directory_is_refused_before_submitting(slurm, tmp_path):
    """Whoever can write the shared output root makes ``<job>/output`` a link to a directory of the job's user: the
    run is refused (exit 2) naming the link, nothing is submitted and nothing lands where the link points (the node
    packs through the same open-directory helper: tests/unit/backends/test_slurm_layout_files.py)."""
    spec = write_spec(tmp_path, "contract_probe.py", name="planted")
    victim = tmp_path / "victims-directory"
    victim.mkdir()
    planted = slurm.shared_dir / "output" / "planted-1" / "output"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    done = trainops(slurm, "run", str(spec), *options(slurm), "--job-name", "planted-1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{planted} is a symbolic link" in done.stderr and "output_path" in done.stderr, done.stderr
    assert list(victim.iterdir()) == [] and planted.is_symlink() and not slurm_jobs(slurm, "planted-1")


def test_an_mpi_job_runs_mpirun_across_the_nodes_with_the_contract_on_every_rank(slurm, tmp_path):
    """distribution mpi on 2 nodes: the runtime on host algo-1 runs mpirun, which reaches node n2 through the job's
    agent (srun inside the job); every rank sees the SageMaker contract and Open MPI's rank, then the job ends."""
    spec = write_spec(tmp_path, "contract_probe.py", name="mpiprobe",
                      distribution="{type: mpi, processes_per_host: 1}")
    done = trainops(slurm, "run", str(spec), *options(slurm), "--job-name", "mpi-1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "trainops: mpirun on host algo-1: mpirun --host algo-1:1,algo-2:1 -np 2" in done.stdout, done.stdout
    seen = {int(record["rank"]): record for record in
            (json.loads(line.split("CONTRACT ", 1)[1]) for line in done.stdout.splitlines() if "CONTRACT " in line)}
    assert sorted(seen) == [0, 1], done.stdout
    for rank, record in seen.items():
        host = f"algo-{rank + 1}"
        assert (record["ompi_rank"], record["pmix_rank"], record["ompi_size"]) == (str(rank), str(rank), "2")
        assert record["ompi_local_rank"] == "0" and record["world_size"] == 2 and record["sum"] == 3.0
        assert record["node"] == f"n{rank + 1}"  # the rank runs on its host's node, not beside mpirun
        assert record["current_host"] == record["sm_current_host"] == host
        assert record["hosts"] == record["sm_hosts"] == ["algo-1", "algo-2"]
        assert record["model_dir"] == str(slurm.shared_dir / "jobs" / "mpi-1" / "hosts" / host / "model")
    assert status(slurm, "mpi-1")["status"] == "Completed"
    wait_until(lambda: not slurm.job_processes(), "every process of the job (mpirun, its daemons) to end", 60)


def test_stop_ends_every_process_of_the_job(slurm, tmp_path):
    spec = write_spec(tmp_path, "ticker.py", name="ticker", extra="environment: {TICK: '0.2'}\n")
    done = trainops(slurm, "run", str(spec), *options(slurm), "--job-name", "stop-1", "--no-wait")
    assert done.returncode == 0, done.stdout + done.stderr

    def ticking() -> bool:
        logs = trainops(slurm, "logs", "stop-1", *options(slurm)[:4]).stdout
        return "tick 2 on algo-1" in logs and "tick 2 on algo-2" in logs

    wait_until(ticking, "both hosts to tick")
    job_id = status(slurm, "stop-1")["slurm_job_id"]
    assert slurm.job_processes(), "the job's processes should be running"
    stopped = trainops(slurm, "stop", "stop-1", *options(slurm)[:4])
    assert stopped.returncode == 0 and f"cancelled Slurm job {job_id}" in stopped.stdout, stopped.stdout
    wait_until(lambda: not [pid for pid in slurm.job_processes()], "every process of the job to end", 60)
    record = wait_until(lambda: (found := status(slurm, "stop-1"))["status"] == "Stopped" and found, "Stopped")
    assert record["secondary_status"] == "CANCELLED" and record["failure_class"] == "stopped", record


def test_a_lost_node_is_an_infrastructure_failure_and_the_retry_resumes_from_the_checkpoint(slurm, tmp_path):
    spec = write_spec(tmp_path, "lockstep.py", name="lockstep",
                      extra="environment: {STEPS: '12', SECONDS_PER_STEP: '0.5'}\n")
    with running(slurm, "run", str(spec), *options(slurm), "--job-name", "lost-1",
                 "--retries", "infrastructure=1,backoff_seconds=0") as run:
        state = slurm.shared_dir / "checkpoints" / "lost-1" / "state.json"  # lost-1-2 resumes from lost-1's
        wait_until(lambda: state.exists() and json.loads(state.read_text())["step"] >= 2, "two steps checkpointed")
        frozen = slurm.lose_node("n2")  # slurmd killed; the node's job processes frozen, as a dead host's
        wait_until(lambda: [job for job in slurm_jobs(slurm, "lost-1") if job["job_state"] == "NODE_FAIL"],
                   "Slurm to declare the job NODE_FAIL", 90)
        slurm.release_lost(frozen)
        slurm.start_node("n2")  # the node comes back (ReturnToService=2): the retry gets two nodes
        output, _ = run.communicate(timeout=240)
    assert run.returncode == 0, output
    assert "attempt:    lost-1 Failed (infrastructure" in output and "NODE_FAIL" in output, output
    assert "attempt:    lost-1-2 Completed" in output, output
    resumed = [line for line in output.splitlines() if "resumed after step" in line]
    assert resumed and all(int(line.rsplit(" ", 1)[1]) >= 2 for line in resumed), output
    record = status(slurm, "lost-1")
    assert [item["failure_class"] for item in record["attempts"]] == ["infrastructure", None]
    # The batch host outlived n2: its shell recorded how Slurm ended the job, for when Slurm has forgotten it.
    assert json.loads((slurm.shared_dir / "jobs" / "lost-1" / "ended.json").read_text())["slurm_state"] == "NODE_FAIL"


def test_a_controller_down_for_30_s_fails_no_look_and_forgotten_jobs_stay_readable(slurm, tmp_path):
    spec = write_spec(tmp_path, "ticker.py", name="outage", hosts=1, extra="environment: {SECONDS: '33'}\n")
    quick = write_spec(tmp_path, "ticker.py", name="quick", hosts=1, extra="environment: {SECONDS: '1'}\n")
    detached = trainops(slurm, "run", str(quick), *options(slurm), "--job-name", "quick-1", "--no-wait")
    assert detached.returncode == 0, detached.stdout + detached.stderr
    wait_until(lambda: (slurm.shared_dir / "jobs" / "quick-1" / "ended.json").exists(), "the detached job to end")
    with running(slurm, "run", str(spec), *options(slurm), "--job-name", "outage-1") as run:
        log = slurm.shared_dir / "jobs" / "outage-1" / "logs" / "algo-1.log"
        wait_until(lambda: log.exists() and "tick 2" in log.read_text(), "the job to run")
        slurm.stop_controller()
        down = time.monotonic()
        while time.monotonic() - down < 30:  # the outage lasts 30 s; the waiting run must not give up
            assert run.poll() is None, run.communicate()[0]
            time.sleep(1)
        slurm.start_controller()
        output, _ = run.communicate(timeout=240)
    assert run.returncode == 0, output
    assert "could not look at Slurm job outage-1" in output and "status:     Completed" in output, output
    assert len(slurm_jobs(slurm, "outage-1")) == 1  # nothing was submitted again
    assert not (slurm.shared_dir / "jobs" / "outage-1-2").exists()
    # Slurm forgets ended jobs (MinJobAge; here its whole state is cleared): their status stays readable.
    slurm.stop_controller()
    slurm.start_controller(clear=True)
    slurm.wait_ready()
    assert slurm_jobs(slurm) == []
    for name in ("outage-1", "quick-1"):  # outage-1 ended under a wait; nobody looked at quick-1 before
        record = status(slurm, name)
        assert record["status"] == "Completed" and record["model_artifact"].endswith("model.tar.gz"), record


def test_jobs_slurm_ended_unwatched_keep_their_end_after_slurm_forgets_them(slurm, tmp_path):
    """Nobody waits on these two: one is cancelled with scancel outside trainops, the other reaches its time limit
    (max_run 60 s: Slurm's shortest, a minute). Each writes how Slurm ended it from its batch shell's trap; once
    Slurm has forgotten both (its state cleared), `trainops status` reads Stopped, cancelled and timeout."""
    ticker = write_spec(tmp_path, "ticker.py", name="unwatched", hosts=1, max_run=60)
    for name in ("cancelled-1", "timeout-1"):  # one node each: both run at once
        done = trainops(slurm, "run", str(ticker), *options(slurm), "--job-name", name, "--no-wait")
        assert done.returncode == 0, done.stdout + done.stderr
    jobs = slurm.shared_dir / "jobs"
    for name in ("cancelled-1", "timeout-1"):
        log = jobs / name / "logs" / "algo-1.log"
        wait_until(lambda log=log: log.exists() and "tick 2" in log.read_text(), f"{name} to run")
    [cancelled] = slurm_jobs(slurm, "cancelled-1")
    slurm.command("scancel", str(cancelled["job_id"]))
    ended = {name: jobs / name / "ended.json" for name in ("cancelled-1", "timeout-1")}
    wait_until(lambda: all(path.exists() for path in ended.values()), "both jobs to record their end", 150)
    wait_until(lambda: {job["name"]: job["job_state"] for job in slurm_jobs(slurm) if job["name"] in ended}
               == {"cancelled-1": "CANCELLED", "timeout-1": "TIMEOUT"}, "Slurm to end both jobs", 60)
    slurm.stop_controller()
    slurm.start_controller(clear=True)  # as MinJobAge after their end, without slurmdbd: Slurm forgot them
    slurm.wait_ready()
    assert not slurm_jobs(slurm, "cancelled-1") and not slurm_jobs(slurm, "timeout-1")
    record = status(slurm, "cancelled-1")
    assert (record["status"], record["secondary_status"], record["failure_class"]) == ("Stopped", "CANCELLED",
                                                                                        "stopped"), record
    assert "cancelled outside trainops" in record["failure_reason"]
    record = status(slurm, "timeout-1")
    assert (record["status"], record["secondary_status"], record["failure_class"]) == ("Stopped", "TIMEOUT",
                                                                                        "timeout"), record
    assert "time limit" in record["failure_reason"]


def test_the_rest_transport_runs_and_follows_a_job_from_off_the_cluster(slurm, tmp_path):
    """An Airflow worker or a KFP pod off the cluster: no slurm.conf (the Slurm commands reach nothing), only
    slurmrestd's address and a JWT; the job's files through the shared directory."""
    spec = write_spec(tmp_path, "ticker.py", name="rest", extra="environment: {SECONDS: '1'}\n")
    off = {key: value for key, value in slurm.env.items() if key != "SLURM_CONF"}
    off["SLURM_JWT"] = slurm.token()
    rest = ["--backend", "slurm", "-o", f"shared_dir={slurm.shared_dir}", "-o", "transport=rest",
            "-o", f"rest_url={slurm.rest_url}"]
    done = trainops(slurm, "run", str(spec), *rest, "-o", f"python={sys.executable}", "--job-name", "rest-1", env=off)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tick 1 on algo-1" in done.stdout and "tick 1 on algo-2" in done.stdout, done.stdout
    shown = trainops(slurm, "status", "rest-1", *rest, "--json", env=off)
    record = json.loads(shown.stdout)
    assert record["status"] == "Completed" and record["transport"] == "rest", record
    [job] = slurm_jobs(slurm, "rest-1")
    assert job["job_id"] == record["slurm_job_id"] and job["comment"].startswith("trainops:")
    refused = trainops(slurm, "run", str(spec), *rest, "--job-name", "rest-2", env={**off, "SLURM_JWT": ""})
    assert refused.returncode == 2 and "SLURM_JWT" in refused.stderr, refused.stderr
    assert not (slurm.shared_dir / "jobs" / "rest-2" / "slurm-job.json").exists()  # nothing submitted: name free


def test_a_pipeline_file_on_the_slurm_backend_runs_every_step(slurm, tmp_path):
    """prepare, stage into the shared file system, train on Slurm, evaluate and register where trainops runs."""
    pipeline = SCRIPTS / "pipeline" / "pipeline.yaml"
    work = slurm.shared_dir / "pipeline-work"
    done = trainops(slurm, "run", str(pipeline), "--workdir", str(work), "-o", f"shared_dir={slurm.shared_dir}",
                    "-o", f"python={sys.executable}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tiny-retrain: Succeeded" in done.stdout, done.stdout
    assert "training on algo-1 node n1 ['data.txt']" in done.stdout and "training on algo-2 node n2" in done.stdout
    result = json.loads((work / "pipelines" / "tiny-retrain" / "last-run.json").read_text())
    train = result["steps"]["train"]
    assert (train["backend"], train["status"]) == ("slurm", "Completed") and train["slurm_job_id"]
    assert (work / "fsx" / "tiny" / "train" / "data.txt").is_file()  # staged into the shared directory
    assert (work / "registry" / "tiny" / "v1" / "model.tar.gz").is_file()
    assert "gate passed: accuracy = 0.99 >= 0.95" in done.stdout and "tiny version 1 (Approved)" in done.stdout


def rest_pipeline(slurm, directory: Path) -> Path:
    """The tiny pipeline, reaching the cluster through slurmrestd (the file's backend_options), in ``directory``."""
    directory.mkdir()
    for path in (SCRIPTS / "pipeline").iterdir():
        (directory / path.name).write_text(path.read_text())
    settings = {"shared_dir": str(slurm.shared_dir), "python": sys.executable, "transport": "rest",
                "rest_url": slurm.rest_url}
    text = (directory / "pipeline.yaml").read_text().replace("backend: slurm\n",
                                                           f"backend: slurm\nbackend_options: {json.dumps(settings)}\n")
    (directory / "pipeline.yaml").write_text(text)
    return directory / "pipeline.yaml"


def test_the_retraining_dag_runs_on_slurm_from_an_airflow_worker_off_the_cluster(slurm, tmp_path,
                                                                                airflow_home):  # noqa: F811
    """dags/retrain_pipeline.py under dag.test(), its conf naming a pipeline file whose backend is slurm, reached
    through slurmrestd with a JWT (no slurm.conf on the worker): stage, a deferred 2-node training job, evaluation
    and registration."""
    from support.airflow_home import REPO, AirflowHome

    pipeline = rest_pipeline(slurm, tmp_path / "pipelines")
    work = slurm.shared_dir / "airflow-work"
    env = {key: value for key, value in airflow_home.env.items() if key != "SLURM_CONF"}
    env.update({"SLURM_JWT": slurm.token(), "AIRFLOW_VAR_TRAINOPS_PIPELINE_DIRS": str(pipeline.parent),
                "AIRFLOW_VAR_TRAINOPS_WORKDIR": str(work)})
    home = AirflowHome(airflow_home.path, env)
    outcome, done = home.dag_test(REPO / "dags" / "retrain_pipeline.py", "retrain_pipeline",
                                  {"pipeline_file": str(pipeline)})
    assert outcome is not None, f"dag.test() failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    assert outcome["tasks"] == {task: "success" for task in ("prepare", "stage", "train", "evaluate", "gate",
                                                              "register")}, outcome["tasks"]
    train = outcome["xcom"]["train"]["return_value"]
    assert (train["backend"], train["status"]) == ("slurm", "Completed"), train
    [job] = slurm_jobs(slurm, train["job_name"])  # one Slurm job, submitted through slurmrestd
    assert job["job_state"] == "COMPLETED" and job["comment"].startswith("trainops:")
    record = json.loads((slurm.shared_dir / "jobs" / train["job_name"] / "slurm-job.json").read_text())
    assert record["transport"] == "rest"
    assert outcome["xcom"]["evaluate"]["return_value"]["passed"] is True
    assert outcome["xcom"]["register"]["return_value"]["version"] == 1


def test_the_kfp_pipeline_runs_on_slurm(slurm, tmp_path):
    """`trainops kfp run-local` of the same pipeline file: the KFP components (subprocesses) stage, train on the
    cluster through slurmrestd, evaluate and register."""
    pipeline = rest_pipeline(slurm, tmp_path / "pipelines")
    env = {key: value for key, value in slurm.env.items() if key != "SLURM_CONF"}
    env.update({"SLURM_JWT": slurm.token(), "TRAINOPS_HOME": str(tmp_path / "home")})
    done = trainops(slurm, "kfp", "run-local", str(pipeline), "--workdir", str(slurm.shared_dir / "kfp-work"),
                    "--backend", "slurm", timeout=420, env=env)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    trained = [line for line in done.stdout.splitlines() if "train" in line and "SUCCEEDED" in line]
    assert trained, done.stdout
    jobs = [job for job in slurm_jobs(slurm) if job["name"].startswith("tiny-")
            and (slurm.shared_dir / "jobs" / job["name"]).is_dir()
            and json.loads((slurm.shared_dir / "jobs" / job["name"] / "slurm-job.json").read_text())["transport"]
            == "rest"]
    assert jobs and all(job["job_state"] == "COMPLETED" for job in jobs)


def test_torchrun_on_a_cpu_partition_runs_without_naming_a_gpu_instance_type(slurm, tmp_path):
    """The nodes are described as the cluster names them (``instance_type: cpu``, no ``ml.*`` type), the partition
    is a CPU one (``debug``: n1 and n2 have no GPU) and the job is torchrun (gloo): Slurm's own spec rules bind it, not
    the SageMaker request's, which refuse torch_distributed on CPU instance types (issue 43)."""
    spec = write_spec(tmp_path, "contract_probe.py", name="cpu-ddp",
                      distribution="{type: torch_distributed, processes_per_host: 1}")
    spec.write_text(spec.read_text().replace("instance_type: ml.g5.12xlarge", "instance_type: cpu"))
    assert "ml." not in spec.read_text()
    done = trainops(slurm, "run", str(spec), *options(slurm), "-o", "partition=debug", "--job-name", "cpu-ddp-1")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads(line.split("CONTRACT ", 1)[1]) for line in done.stdout.splitlines() if "CONTRACT " in line]
    assert sorted(record["rank"] for record in seen) == [0, 1], done.stdout
    assert all(record["world_size"] == 2 and record["sum"] == 3.0 for record in seen), seen
    assert sorted(record["node"] for record in seen) == ["n1", "n2"]
    assert "cost unknown" in done.stdout and "no price list" in done.stdout
    record = status(slurm, "cpu-ddp-1")
    assert record["status"] == "Completed" and record["instance_type"] == "cpu"
    # The same spec is refused where the job would run as the SageMaker request (local here: nothing starts).
    refused = trainops(slurm, "run", str(spec), "--workdir", str(tmp_path / "local"), "--job-name", "cpu-ddp-local")
    assert refused.returncode != 0 and "is not an instance type" in refused.stdout + refused.stderr


def test_a_v3_command_job_gets_gzip_and_shuffled_sharded_channels_and_per_group_channels_are_refused(slurm, tmp_path):
    """A spec in the SDK v3's names (issue 46), started as SourceCode.command with args, on 2 nodes: a Gzip channel
    reaches every host decompressed, a ShardedByS3Key channel with a ShuffleConfig seed splits its files between the
    hosts after shuffling them (not the sorted split), hyperparameters reach the command in SM_HPS only. A channel for
    one instance group is refused before anything is submitted: the slurm engine runs one homogeneous set of hosts."""
    import gzip

    source = tmp_path / "src"
    source.mkdir()
    (source / "channel_probe.py").write_text((SCRIPTS / "channel_probe.py").read_text())
    compressed = tmp_path / "gz"
    compressed.mkdir()
    for name, text in (("a.txt.gz", "alpha\n"), ("nested/b.txt.gz", "beta\n")):
        (compressed / name).parent.mkdir(exist_ok=True)
        (compressed / name).write_bytes(gzip.compress(text.encode()))
    shards = tmp_path / "shards"
    shards.mkdir()
    names = [f"part-{index}.txt" for index in range(8)]
    for name in names:
        (shards / name).write_text(name)
    spec = {"base_job_name": "v3-channels", "output_data_config": {"s3_output_path": str(tmp_path / "out")},
            "source_code": {"source_dir": str(source), "command": f"{sys.executable} channel_probe.py",
                            "args": ["--note", "a b; echo injected"]},
            "compute": {"instance_type": "ml.g5.12xlarge", "instance_count": 2}, "hyperparameters": {"lr": 0.1},
            "health_check": False,  # trainops' own field: no GPU on the test nodes
            "input_data_config": [
                {"channel_name": "gz", "data_source": str(compressed), "compression_type": "Gzip",
                 "input_mode": "FastFile"},
                {"channel_name": "shards", "data_source": {"s3_data_source": {
                    "s3_uri": str(shards), "s3_data_type": "S3Prefix",
                    "s3_data_distribution_type": "ShardedByS3Key"}}, "shuffle_config": {"seed": 7}}]}
    path = tmp_path / "v3.yaml"
    path.write_text(json.dumps(spec))
    done = trainops(slurm, "run", str(path), *options(slurm), "--job-name", "v3-channels-1")
    assert done.returncode == 0, done.stdout + done.stderr
    seen = {record["host"]: record for record in
            (json.loads(line.split("CHANNELS ", 1)[1]) for line in done.stdout.splitlines() if "CHANNELS " in line)}
    assert sorted(seen) == ["algo-1", "algo-2"], done.stdout
    shares = []
    for host, record in seen.items():
        assert record["node"] == f"n{host[-1]}" and record["cwd"].endswith("/code")
        assert record["argv"] == ["--note", "a b; echo injected"] and record["hps"] == {"lr": 0.1}
        assert record["channels"]["gz"] == {"a.txt": "alpha\n", os.path.join("nested", "b.txt"): "beta\n"}
        shares.append(sorted(record["channels"]["shards"]))
        assert all(record["channels"]["shards"][name] == name for name in shares[-1])
    assert sorted(shares[0] + shares[1]) == names and len(shares[0]) == len(shares[1]) == 4  # a split, disjoint
    assert sorted(names[0::2]) not in shares  # shuffled with the seed before the split, not the sorted listing
    assert "injected\n" not in done.stdout.replace("echo injected", "")
    assert status(slurm, "v3-channels-1")["status"] == "Completed"

    spec["input_data_config"][1]["data_source"]["s3_data_source"]["instance_group_names"] = ["gpu"]
    spec["compute"] = {"instance_groups": [{"instance_group_name": "gpu", "instance_type": "ml.g5.12xlarge",
                                            "instance_count": 1},
                                           {"instance_group_name": "data", "instance_type": "ml.c5.xlarge",
                                            "instance_count": 1}]}
    path.write_text(json.dumps(spec))
    refused = trainops(slurm, "run", str(path), *options(slurm), "--job-name", "v3-groups-1")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "compute.instance_groups: the slurm backend runs one homogeneous set of hosts" in refused.stderr, \
        refused.stderr
    assert not slurm_jobs(slurm, "v3-groups-1") and not (slurm.shared_dir / "jobs" / "v3-groups-1").exists()
