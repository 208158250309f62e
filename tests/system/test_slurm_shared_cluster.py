"""What other users of a shared Slurm cluster, and a user's own settings, can do to trainops (issue 48 items 1, 2
and 4), on the real two-node cluster (`support.slurm_cluster`, started once for the module) with a real second
local user (`support.other_user`: made with useradd) submitting with sbatch as itself (a JWT of its own:
``AuthAltTypes=auth/jwt``), as any user of a shared cluster can.

Each test waits on conditions (a log line, a Slurm state), never on time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support import other_user
from support.slurm_cluster import missing, start_cluster, wait_until

pytestmark = [pytest.mark.system, pytest.mark.skipif(missing() is not None, reason=str(missing())),
              pytest.mark.skipif(not other_user.available(), reason="needs root, useradd and setpriv")]

SCRIPTS = Path(__file__).parent / "scripts" / "slurm"
TRAINOPS = [sys.executable, "-m", "trainops.cli"]
#: A job name and a comment of bytes that are not UTF-8 (and a delimiter and a line break of squeue's formats).
HOSTILE_NAME = b"rival\xff\xfe|\x1fname"
HOSTILE_COMMENT = b"trainops:\xfe\nforged"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster
    finally:
        cluster.stop()


def rival_sbatch(slurm, *argv: bytes | str) -> int:
    """``sbatch ARGV`` run as the other user (its own uid, a JWT of its own), a held job: its id."""
    uid, gid = other_user.rival()
    token = slurm.command("scontrol", "token", f"username={other_user.RIVAL}", "lifespan=3600").stdout
    env = {"PATH": os.environ["PATH"], "SLURM_CONF": str(slurm.conf), "SLURM_JWT": token.strip().split("=", 1)[1]}
    done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", "sbatch",
                           "--parsable", "--hold", "--output=/dev/null", "--chdir=/tmp", *argv, "--wrap", "true"],
                          capture_output=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().split(b";")[0])


def lose_state(slurm) -> None:
    """The controller restarted with none of its state (a lost StateSaveLocation, a fresh controller): every job
    forgotten and the ids given again from the first (``-c`` alone forgets the jobs but keeps counting)."""
    slurm.stop_controller()
    for path in (slurm.root / "state").iterdir():
        if path.name != "clustername":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    slurm.start_controller(clear=True)
    slurm.wait_ready()


def queue(slurm) -> dict[int, dict]:
    """Every job Slurm remembers, by id (squeue --json, decoded leniently: the test reads other users' names too)."""
    raw = subprocess.run(["squeue", "--json"], env=slurm.env, capture_output=True, timeout=60, check=True).stdout
    return {job["job_id"]: job for job in json.loads(raw.decode("utf-8", "replace"))["jobs"]}


def write_spec(tmp_path: Path, *, name: str, seconds: str, hosts: int = 1) -> Path:
    source = tmp_path / "src"
    source.mkdir(exist_ok=True)
    (source / "ticker.py").write_text((SCRIPTS / "ticker.py").read_text())
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"name: {name}\nentry_point: ticker.py\nsource_dir: {source}\ninstance_type: ml.c5.xlarge\n"
                    f"instance_count: {hosts}\nhealth_check: false\nmax_run: 600\n"
                    f"environment: {{SECONDS: '{seconds}', TICK: '0.2'}}\n")
    return spec


def options(shared: Path, *more: str) -> list[str]:
    return ["--backend", "slurm", "-o", f"shared_dir={shared}", "-o", f"python={sys.executable}", *more]


def trainops(slurm, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*TRAINOPS, *args], capture_output=True, text=True, timeout=timeout, env=env or slurm.env)


def test_another_users_job_with_a_name_of_bytes_that_are_not_utf8_breaks_no_command(slurm, tmp_path, monkeypatch):
    """Item 1: the other user queues a job whose name and comment are not UTF-8 (with squeue's delimiter and a line
    break in them); the wait inside run, status and stop go on working through both transports."""
    hostile = rival_sbatch(slurm, b"--job-name=" + HOSTILE_NAME, b"--comment=" + HOSTILE_COMMENT)
    try:
        assert queue(slurm)[hostile]["user_name"] == other_user.RIVAL
        shared = slurm.shared_dir
        done = trainops(slurm, "run", str(write_spec(tmp_path, name="plain", seconds="1")), *options(shared),
                        "--job-name", "among-1")
        assert done.returncode == 0 and "status:     Completed" in done.stdout, done.stdout + done.stderr
        shown = trainops(slurm, "status", "among-1", *options(shared)[:4], "--json")
        assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "Completed", shown.stderr

        ticking = trainops(slurm, "run", str(write_spec(tmp_path, name="ticker", seconds="0")), *options(shared),
                           "--job-name", "among-2", "--no-wait")
        assert ticking.returncode == 0, ticking.stdout + ticking.stderr
        log = shared / "jobs" / "among-2" / "logs" / "algo-1.log"
        wait_until(lambda: log.exists() and "tick 2" in log.read_text(), "among-2 to run")
        job_id = json.loads(trainops(slurm, "status", "among-2", *options(shared)[:4], "--json").stdout)["slurm_job_id"]
        stopped = trainops(slurm, "stop", "among-2", *options(shared)[:4])
        assert stopped.returncode == 0 and f"cancelled Slurm job {job_id}" in stopped.stdout, stopped.stdout + stopped.stderr
        wait_until(lambda: queue(slurm)[job_id]["job_state"] == "CANCELLED", "among-2 cancelled")

        rest = ["-o", "transport=rest", "-o", f"rest_url={slurm.rest_url}"]
        off = {**{key: value for key, value in slurm.env.items() if key != "SLURM_CONF"}, "SLURM_JWT": slurm.token()}
        shown = trainops(slurm, "status", "among-1", *options(shared)[:4], *rest, "--json", env=off)
        assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "Completed", shown.stderr
        # The look-ups by user and name (a submission whose id was never recorded) read the lists other users' jobs are in.
        from trainops.backends.slurm.cli import CommandTransport
        from trainops.backends.slurm.rest import RestTransport

        monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
        [own] = CommandTransport(user="root").named("root", "among-1")
        assert own.comment.startswith("trainops:") and own.state == "COMPLETED"
        [own] = RestTransport(slurm.rest_url, "root", environ={"SLURM_JWT": slurm.token()}).named("root", "among-1")
        assert own.comment.startswith("trainops:") and own.state == "COMPLETED"
        assert queue(slurm)[hostile]["job_state"] == "PENDING"  # theirs untouched
    finally:
        slurm.command("scancel", str(hostile))


def test_a_slurm_jwt_in_the_environment_of_transport_cli_stays_out_of_the_batch_step(slurm, tmp_path):
    """Item 2: a user with SLURM_JWT set (for slurmrestd) runs with transport cli: the job's srun authenticates with
    munge as the cluster's commands do, and the job completes."""
    env = {**slurm.env, "SLURM_JWT": slurm.token()}
    done = trainops(slurm, "run", str(write_spec(tmp_path, name="jwt", seconds="1")), *options(slurm.shared_dir),
                    "--job-name", "jwt-1", env=env)
    assert done.returncode == 0 and "status:     Completed" in done.stdout, done.stdout + done.stderr
    assert "tick 1 on algo-1" in done.stdout


def test_sbatch_and_slurm_variables_of_the_submitters_environment_move_nothing_of_the_job(slurm, tmp_path):
    """Item 2 (settings are input, the environment too): SBATCH_* variables override a script's #SBATCH lines, and
    sbatch hands SLURM_* variables (a submitter inside an allocation) to the batch step's srun. trainops' options go
    on sbatch's command line, which beats the environment; the variables no option undoes and the allocation's are
    left out and named."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**slurm.env, "SBATCH_JOB_NAME": "moved", "SBATCH_TIMELIMIT": "1", "SBATCH_NO_REQUEUE": "0",
           "SBATCH_OUTPUT": f"{elsewhere}/out-%j.log", "SBATCH_ERROR": f"{elsewhere}/err-%j.log",
           "SBATCH_OPEN_MODE": "truncate", "SBATCH_WAIT": "1",
           "SLURM_CPUS_PER_TASK": "4", "SLURM_JOB_ID": "999999"}
    done = trainops(slurm, "run", str(write_spec(tmp_path, name="env", seconds="1", hosts=2)),
                    *options(slurm.shared_dir), "--job-name", "env-1", env=env)
    assert done.returncode == 0 and "status:     Completed" in done.stdout, done.stdout + done.stderr
    job_id = json.loads((slurm.shared_dir / "jobs" / "env-1" / "slurm-job.json").read_text())["slurm_job_id"]
    job = queue(slurm)[job_id]
    assert job["name"] == "env-1" and job["comment"].startswith("trainops:"), job
    assert job["time_limit"] == 10, job  # minutes: max_run 600 s
    assert (slurm.shared_dir / "jobs" / "env-1" / "logs" / f"batch-{job_id}.log").is_file()
    assert list(elsewhere.iterdir()) == []
    assert ("[trainops] slurm: left out of sbatch's environment: SBATCH_ERROR, SBATCH_WAIT, SLURM_CPUS_PER_TASK, "
            "SLURM_JOB_ID") in done.stdout, done.stdout


def test_a_shared_dir_holding_a_percent_and_a_non_ascii_letter_keeps_the_job_and_its_model_inside(slurm, tmp_path):
    """Item 2: sbatch expands % in --output, and a file:// URI percent-encodes é: the job runs, its batch log and its
    model are under the shared directory, and nothing lands in an encoded sibling."""
    parent = slurm.root / "odd"
    parent.mkdir(mode=0o700)
    shared = parent / "sh%j-é"
    done = trainops(slurm, "run", str(write_spec(tmp_path, name="odd", seconds="1")), *options(shared),
                    "--job-name", "odd-1")
    assert done.returncode == 0 and "status:     Completed" in done.stdout, done.stdout + done.stderr
    record = json.loads((shared / "jobs" / "odd-1" / "slurm-job.json").read_text())
    assert (shared / "jobs" / "odd-1" / "logs" / f"batch-{record['slurm_job_id']}.log").is_file()
    archive = shared / "output" / "odd-1" / "output" / "model.tar.gz"
    with tarfile.open(archive) as tar:
        assert "ticks.txt" in tar.getnames()
    assert sorted(path.name for path in parent.iterdir()) == ["sh%j-é"]


def test_no_stop_path_cancels_another_users_job_that_got_the_id_after_the_controller_lost_its_state(
        slurm, tmp_path, monkeypatch):
    """Item 4: trainops' job 1 ended with nobody watching (its record still names id 1); the controller restarts
    without its state (every id given again) and the other user's job gets id 1. The seam's stop and stop_job (what a
    guard, Airflow's on_kill and the CLI's Ctrl-C handler call) and `trainops stop` look first and leave it alone."""
    lose_state(slurm)  # ids start again at 1
    done = trainops(slurm, "run", str(write_spec(tmp_path, name="mine", seconds="1")), *options(slurm.shared_dir),
                    "--job-name", "mine-1", "--no-wait")
    assert done.returncode == 0, done.stdout + done.stderr
    record_path = slurm.shared_dir / "jobs" / "mine-1" / "slurm-job.json"
    mine = wait_until(lambda: json.loads(record_path.read_text()).get("slurm_job_id"), "mine-1's Slurm job id")
    wait_until(lambda: queue(slurm).get(mine, {}).get("job_state") == "COMPLETED", "mine-1 to end", 120)
    lose_state(slurm)  # mine-1's id is given again
    theirs = rival_sbatch(slurm, "--job-name=mine-1", f"--comment=trainops:{'0' * 32}")
    assert theirs == mine and queue(slurm)[theirs]["user_name"] == other_user.RIVAL

    from trainops.backends import get_backend

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    backend = get_backend("slurm", options={"shared_dir": str(slurm.shared_dir)})
    handle = backend.handle("mine-1")
    try:
        for account in (backend.stop(handle, "a guard tripped"), backend.stop_job(handle, "training", "on_kill")):
            assert "not cancelled" in account and f"Slurm job {mine} is another job now" in account, account
            assert queue(slurm)[theirs]["job_state"] == "PENDING"  # never cancelled
        stopped = trainops(slurm, "stop", "mine-1", *options(slurm.shared_dir)[:4])
        assert stopped.returncode == 0 and "cancelled Slurm job" not in stopped.stdout, stopped.stdout + stopped.stderr
        assert queue(slurm)[theirs]["job_state"] == "PENDING"
    finally:
        slurm.command("scancel", str(theirs))


def test_ctrl_c_of_a_waiting_run_leaves_another_users_job_that_got_the_id_alone(slurm, tmp_path):
    """Item 4, live: `trainops run` waits on its job (one look an hour, so that the test decides when it looks);
    the controller restarts without its state and the other user's job gets the recorded id; Ctrl-C then makes the
    run's stop handler look first and leave that job alone, and a second Ctrl-C leaves the run."""
    lose_state(slurm)  # ids start again at 1
    spec = write_spec(tmp_path, name="held", seconds="0")  # ticks until stopped
    process = subprocess.Popen([*TRAINOPS, "run", str(spec), *options(slurm.shared_dir, "-o", "poll_seconds=3600"),
                                "--job-name", "ctrlc-1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=slurm.env)
    theirs = None
    try:
        log = slurm.shared_dir / "jobs" / "ctrlc-1" / "logs" / "algo-1.log"
        wait_until(lambda: log.exists() and "tick 2" in log.read_text(), "ctrlc-1 to run")
        mine = json.loads((slurm.shared_dir / "jobs" / "ctrlc-1" / "slurm-job.json").read_text())["slurm_job_id"]
        lose_state(slurm)  # ctrlc-1's id is given again
        theirs = rival_sbatch(slurm, "--job-name=ctrlc-1", f"--comment=trainops:{'0' * 32}")
        assert theirs == mine and queue(slurm)[theirs]["user_name"] == other_user.RIVAL
        assert process.poll() is None and process.stderr is not None
        process.send_signal(signal.SIGINT)
        said = []
        for line in process.stderr:  # the stop handler's account: the condition this test waits on
            said.append(line)
            if line.startswith("[trainops] "):
                break
        assert said and "not cancelled" in said[-1] and f"Slurm job {mine} is another job now" in said[-1], said
        assert queue(slurm)[theirs]["job_state"] == "PENDING"  # never cancelled
        process.send_signal(signal.SIGINT)  # the second Ctrl-C leaves at once
        assert process.wait(timeout=120) != 0
        assert queue(slurm)[theirs]["job_state"] == "PENDING"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if theirs is not None:
            slurm.command("scancel", str(theirs))
