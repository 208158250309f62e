"""How a Slurm job's status is decided: Slurm's state while it remembers the job, the records once it has forgotten
it; a look that cannot reach Slurm decides nothing. Also the states table, the failure classes of Slurm's ends, and
the node script (standard library only) the batch script runs on every node.

The transport here is an in-memory list of jobs: these tests are about the decisions; the real cluster's answers
are the system tests' (tests/system/test_slurm_backend.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from trainops.backends.slurm import node, records, status
from trainops.backends.slurm.transport import SlurmJob, SlurmUnreachable, Transport
from trainops.backends.slurm.vocabulary import slurm_status
from trainops.backends.states import JobStatus
from trainops.backends.vocabulary import classify_result


class Jobs(Transport):
    def __init__(self, jobs=(), down=False):
        self.listed, self.down = list(jobs), down

    def submit(self, script, script_path, job):  # pragma: no cover - not used here
        raise AssertionError

    def jobs(self):
        if self.down:
            raise SlurmUnreachable("Unable to contact slurm controller (connect failure)")
        return self.listed

    def cancel(self, job_id):  # pragma: no cover - not used here
        raise AssertionError


def job(state, **more):
    return SlurmJob(**{"job_id": 7, "name": "bert-1", "user": "alice", "comment": "trainops:abc", "state": state,
                       "nodes": "n[1-2]", "started": 1000.0, "ended": 1060.0, **more})


@pytest.fixture
def job_dir(tmp_path):
    path = tmp_path / "jobs" / "bert-1"
    path.mkdir(parents=True)
    records.write(path, records.JOB, {"job_name": "bert-1", "token": "abc", "user": "alice", "slurm_job_id": 7,
                                      "submitted": 990.0, "max_run": 600, "instance_count": 2})
    return path


@pytest.mark.parametrize(("state", "expected"), [
    ("PENDING", "InProgress"), ("RUNNING", "InProgress"), ("COMPLETING", "InProgress"), ("STOPPED", "InProgress"),
    ("COMPLETED", "Completed"), ("FAILED", "Failed"), ("CANCELLED", "Stopped"), ("TIMEOUT", "Stopped"),
    ("NODE_FAIL", "Failed"), ("PREEMPTED", "Failed"), ("BOOT_FAIL", "Failed"), ("OUT_OF_MEMORY", "Failed"),
    ("SOMETHING_NEW", "InProgress"), (None, "InProgress"),
])
def test_slurm_states_map_onto_training_job_statuses(state, expected):
    assert slurm_status(state).value == expected


@pytest.mark.parametrize(("state", "reason", "expected"), [
    ("NODE_FAIL", "Failed", "infrastructure"), ("BOOT_FAIL", "Failed", "infrastructure"),
    ("PREEMPTED", "Failed", "infrastructure"), ("TIMEOUT", "Stopped", "timeout"), ("CANCELLED", "Stopped", "stopped"),
    ("OUT_OF_MEMORY", "Failed", "user"),
])
def test_how_slurm_ended_a_job_is_its_failure_class(job_dir, state, reason, expected):
    record = status.read(job_dir, "bert-1", Jobs([job(state)]))
    assert record["status"] == reason
    verdict = classify_result(record)
    assert verdict is not None and verdict.failure_class == expected, verdict


def test_a_failed_rank_is_a_user_failure_with_the_failure_file_as_the_reason(job_dir):
    records.write(job_dir, records.ENDED, {"status": "Failed", "failure_reason": "rank 1 on host algo-2 exited with "
                                           "code 3\nTraceback (most recent call last):\nValueError: bad batch"})
    record = status.read(job_dir, "bert-1", Jobs([job("FAILED", exit_code=256)]))
    assert record["failure_reason"].startswith("rank 1 on host algo-2 exited with code 3")
    assert classify_result(record).failure_class == "user"


def test_a_running_job_reports_its_time_so_far_and_nothing_is_recorded(job_dir):
    record = status.read(job_dir, "bert-1", Jobs([job("RUNNING", started=time.time() - 30, ended=None)]))
    assert record["status"] == "InProgress" and record["secondary_status"] == "RUNNING"
    assert 29 <= record["billable_seconds"] <= 60
    assert "final" not in records.read(job_dir, records.JOB)


def test_the_end_a_look_saw_outlives_slurms_memory(job_dir):
    seen = status.read(job_dir, "bert-1", Jobs([job("NODE_FAIL", reason="NodeDown")]))
    later = status.read(job_dir, "bert-1", Jobs([]))  # Slurm forgot it
    assert later["status"] == seen["status"] == "Failed" and later["secondary_status"] == "NODE_FAIL"
    assert later["billable_seconds"] == 60 and "NodeDown" in later["failure_reason"]


@pytest.mark.parametrize(("written", "expected"), [
    ({records.ENDED: {"status": "Completed", "model_artifact": "/fsx/out/model.tar.gz", "ended": 1060.0}},
     ("Completed", None)),
    ({records.STOP: {"reason": "Stopped: trainops received SIGTERM"}}, ("Stopped", "Stopped: trainops received SIGTERM")),
    ({}, ("Failed", None)),
])
def test_a_job_nobody_saw_end_is_read_from_its_own_records(job_dir, written, expected):
    for name, value in written.items():
        records.write(job_dir, name, value)
    record = status.read(job_dir, "bert-1", Jobs([]))
    assert record["status"] == expected[0]
    if expected[1]:
        assert record["failure_reason"] == expected[1]
    if not written:
        assert record["secondary_status"] == "UNKNOWN" and "no longer knows job 7" in record["failure_reason"]
    if records.ENDED in written:
        assert record["model_artifact"] == "/fsx/out/model.tar.gz"


@pytest.mark.parametrize(("state", "line", "expected"), [
    ("TIMEOUT", "*** JOB 7 ON n1 CANCELLED AT 2026-12-05T06:03:54 DUE TO TIME LIMIT ***", ("Stopped", "timeout")),
    ("CANCELLED", "*** JOB 7 ON n1 CANCELLED AT 2026-12-05T06:01:36 ***", ("Stopped", "stopped")),
    ("NODE_FAIL", "*** JOB 7 ON n1 CANCELLED AT 2026-12-05T06:01:36 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR "
                  "DETAILS ***", ("Failed", "infrastructure")),
])
def test_how_slurm_ended_a_job_nobody_watched_is_read_from_the_jobs_own_record(job_dir, state, line, expected):
    """The batch shell's trap wrote the state slurmstepd's line gave (node script ``ended-by-slurm``): once Slurm
    has forgotten the job, its status is that end, never UNKNOWN."""
    records.write(job_dir, records.ENDED, {"slurm_job_id": "7", "ended": 1060.0, "slurm_state": state,
                                           "slurm_line": line, "nodes": "n[1-2]"})
    record = status.read(job_dir, "bert-1", Jobs([]))
    assert (record["status"], record["secondary_status"]) == (expected[0], state)
    assert classify_result(record).failure_class == expected[1]
    if state == "CANCELLED":
        assert "cancelled outside trainops" in record["failure_reason"]
    if state == "NODE_FAIL":
        assert "NODE FAILURE" in record["failure_reason"] and "n[1-2]" in record["failure_reason"]
    assert records.read(job_dir, records.JOB)["final"]["secondary_status"] == state


@pytest.mark.parametrize(("text", "expected"), [
    ("srun: Job step aborted\nslurmstepd-n1: error: *** STEP 30.0 ON n1 CANCELLED AT 2026-12-05T06:01:36 ***\n"
     "slurmstepd-n1: error: *** JOB 30 ON n1 CANCELLED AT 2026-12-05T06:01:36 ***\n", "CANCELLED"),
    ("slurmstepd-n1: error: *** JOB 32 ON n1 CANCELLED AT 2026-12-05T06:03:54 DUE TO TIME LIMIT ***\n"
     "slurmstepd-n1: error: *** STEP 32.0 ON n1 CANCELLED AT 2026-12-05T06:03:54 DUE TO TIME LIMIT ***\n", "TIMEOUT"),
    ("*** JOB 9 ON gpu-1 CANCELLED AT 2026-12-05T06:01:36 DUE TO PREEMPTION ***", "PREEMPTED"),
    ("*** JOB 9 ON gpu-1 CANCELLED AT 2026-12-05T06:01:36 DUE TO JOB REQUEUE ***", None),
    ("rank 0: CANCELLED AT nothing", None),
])
def test_the_node_script_reads_how_slurm_ended_the_job_from_slurmstepds_line(text, expected):
    found = node.slurm_ending(text)
    assert (found[0] if found else None) == expected


class EndsWhileLooked(Jobs):
    """Slurm answers the look with the job's end, and what the job's end writes lands while Slurm is asked: the batch
    host's ended.json, or trainops stop's request before its scancel (the system test's 2-node DDP job once ended
    between the two reads under load, and the status recorded final had no model)."""

    def __init__(self, job_dir, state, written):
        super().__init__([job(state)])
        self.job_dir, self.written = job_dir, written

    def jobs(self):
        for name, data in self.written.items():
            records.write(self.job_dir, name, data)
        return super().jobs()


@pytest.mark.parametrize(("state", "written", "expected"), [
    ("COMPLETED", {records.ENDED: {"status": "Completed", "model_artifact": "/fsx/out/bert-1/output/model.tar.gz"}},
     {"status": "Completed", "model_artifact": "/fsx/out/bert-1/output/model.tar.gz"}),
    ("CANCELLED", {records.STOP: {"reason": "stopped by trainops stop (alice)"}},
     {"status": "Stopped", "failure_reason": "stopped by trainops stop (alice)"}),
])
def test_what_the_end_wrote_while_slurm_was_asked_is_in_the_status_and_stays(job_dir, state, written, expected):
    record = status.read(job_dir, "bert-1", EndsWhileLooked(job_dir, state, written))
    assert {key: record.get(key) for key in expected} == expected
    later = status.read(job_dir, "bert-1", Jobs([]))  # the final record, once Slurm forgot the job
    assert {key: later.get(key) for key in expected} == expected


def test_a_look_that_cannot_reach_slurm_decides_nothing(job_dir):
    with pytest.raises(SlurmUnreachable):
        status.read(job_dir, "bert-1", Jobs(down=True))
    assert "final" not in records.read(job_dir, records.JOB)


def test_another_users_job_under_the_recorded_id_is_not_this_job(job_dir):
    record = status.read(job_dir, "bert-1", Jobs([job("RUNNING", user="mallory")]))
    assert record["secondary_status"] == "UNKNOWN"  # not taken for this job's: Slurm forgot this one


def test_a_submission_whose_id_was_never_recorded_is_found_by_its_comment(job_dir):
    data = records.read(job_dir, records.JOB)
    records.write(job_dir, records.JOB, {**data, "slurm_job_id": None, "submitted": time.time()})
    listed = [job("RUNNING", job_id=8, comment="trainops:abc", user="mallory", ended=None),
              job("RUNNING", job_id=9, comment="trainops:abc", ended=None)]
    record = status.read(job_dir, "bert-1", Jobs(listed))
    assert record["status"] == "InProgress" and records.read(job_dir, records.JOB)["slurm_job_id"] == 9


def test_no_record_is_no_job(tmp_path):
    assert status.read(tmp_path, "absent", Jobs([])) is None


# --- the node script: standard library only, run as a file -----------------------------------------------------------

@pytest.mark.parametrize(("text", "names"), [
    ("n1", ["n1"]), ("n[1-3]", ["n1", "n2", "n3"]), ("gpu-[01-02,07],cpu1", ["gpu-01", "gpu-02", "gpu-07", "cpu1"]),
    ("ip-10-0-1-[8-9]", ["ip-10-0-1-8", "ip-10-0-1-9"]), ("r[1-2]-n[1-2]", ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]),
    ("", []),
])
def test_the_node_script_expands_slurms_node_lists(text, names):
    assert node.expand_hostlist(text) == names


def test_each_host_reaches_host_1_at_the_batch_hosts_address_and_keeps_no_stale_contract_variable():
    inherited = {"PATH": "/usr/bin", "PYTHONPATH": "/home/x", "SM_HOSTS": "stale", "SAGEMAKER_BASE_DIR": "/opt/x",
                 "SLURM_STEP_NODELIST": "gpu-[3-4]", "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.3",
                 "SLURMD_NODENAME": "gpu-4", "HOME": "/home/alice"}
    overlay = {"PATH": "/fsx/env/bin", "SAGEMAKER_BASE_DIR": "/fsx/jobs/j/hosts/algo-2", "PYTHONPATH": "/fsx/rt"}
    environment = node.node_environment(overlay, inherited, ["algo-1", "algo-2"])
    assert json.loads(environment["TRAINOPS_HOST_ADDRESSES"]) == {"algo-1": "10.0.0.3", "algo-2": "gpu-4"}
    assert environment["PATH"] == "/fsx/env/bin:/usr/bin" and environment["PYTHONPATH"] == "/fsx/rt"
    assert environment["SAGEMAKER_BASE_DIR"] == "/fsx/jobs/j/hosts/algo-2" and "SM_HOSTS" not in environment
    assert environment["HOME"] == "/home/alice" and environment["TRAINOPS_SLURM_NODE"] == "gpu-4"


def test_the_node_script_runs_alone_and_finishes_a_job(tmp_path):
    job_dir = tmp_path / "job"
    (job_dir / "slurm").mkdir(parents=True)
    (job_dir / "hosts" / "algo-1" / "model").mkdir(parents=True)
    (job_dir / "hosts" / "algo-1" / "output" / "data").mkdir(parents=True)
    (job_dir / "hosts" / "algo-1" / "model" / "weights.bin").write_bytes(b"w")
    (job_dir / "slurm" / "job.json").write_text(json.dumps({"job_name": "j", "hosts": ["algo-1"], "argv": [],
                                                            "output_dir": str(tmp_path / "out" / "j" / "output"),
                                                            "output_root": str(tmp_path / "out"),
                                                            "output_parts": ["j", "output"]}))
    from trainops.backends.request.code import runtime_files

    for path, name in runtime_files():  # the runtime's file set, as a job's runtime directory holds it
        (tmp_path / "runtime" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "runtime" / name).write_bytes(path.read_bytes())
    copied = tmp_path / "runtime" / "trainops_slurm_node.py"
    copied.write_bytes(open(node.__file__, "rb").read())
    clean = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "12"}
    port = subprocess.run([sys.executable, "-I", "-S", str(copied), "free-port"], capture_output=True, text=True,
                          env=clean, timeout=60)
    assert port.returncode == 0 and 0 < int(port.stdout) < 65536
    done = subprocess.run([sys.executable, "-I", "-S", str(copied), "finish", str(job_dir), "0"], capture_output=True,
                          text=True, env=clean, timeout=60)
    assert done.returncode == 0, done.stderr
    ended = json.loads((job_dir / "ended.json").read_text())
    assert ended["status"] == "Completed" and ended["slurm_job_id"] == "12"
    with tarfile.open(ended["model_artifact"]) as tar:
        assert tar.getnames() == ["weights.bin"]
    failed = subprocess.run([sys.executable, "-I", "-S", str(copied), "finish", str(job_dir), "3"],
                            capture_output=True, text=True, env=clean, timeout=60)
    assert failed.returncode == 3
    ended = json.loads((job_dir / "ended.json").read_text())
    assert ended["status"] == "Failed" and "exit code 3" in ended["failure_reason"]
    (job_dir / "logs").mkdir()
    (job_dir / "logs" / "batch-12.log").write_text("srun: error: n2: task 1: Exited with exit code 2\n")
    subprocess.run([sys.executable, "-I", "-S", str(copied), "finish", str(job_dir), "2"], env=clean, timeout=60)
    assert "srun: error: n2: task 1" in json.loads((job_dir / "ended.json").read_text())["failure_reason"]
    # Slurm ended the job (the batch shell's trap): the state slurmstepd's line gives, unless the job's end is there.
    (job_dir / "logs" / "batch-12.log").write_text("slurmstepd-n1: error: *** JOB 12 ON n1 CANCELLED AT "
                                                   "2026-12-05T06:03:54 DUE TO TIME LIMIT ***\n")
    (job_dir / "ended.json").unlink()
    signalled = subprocess.run([sys.executable, "-I", "-S", str(copied), "ended-by-slurm", str(job_dir)],
                               capture_output=True, text=True, env=clean, timeout=60)
    assert signalled.returncode == 0, signalled.stderr
    ended = json.loads((job_dir / "ended.json").read_text())
    assert ended["slurm_state"] == "TIMEOUT" and "DUE TO TIME LIMIT" in ended["slurm_line"]
    subprocess.run([sys.executable, "-I", "-S", str(copied), "finish", str(job_dir), "2"], env=clean, timeout=60)
    # On HyperPod, a host whose GPU health check failed is named as its Slurm node, with HyperPod's replace request.
    plan = json.loads((job_dir / "slurm" / "job.json").read_text())
    (job_dir / "slurm" / "job.json").write_text(json.dumps({**plan, "hyperpod": True}))
    (job_dir / "hosts" / "algo-1" / "output" / "failure").write_text("health check failed on host algo-1: GPU 3 ...")
    subprocess.run([sys.executable, "-I", "-S", str(copied), "finish", str(job_dir), "1"], capture_output=True,
                   env={**clean, "SLURM_JOB_NODELIST": "ip-10-0-1-[8-9]"}, timeout=60)
    ended = json.loads((job_dir / "ended.json").read_text())
    assert ended["failed_node"] == "ip-10-0-1-8" and ended["failure_reason"].startswith("health check failed")
    assert "scontrol update node=ip-10-0-1-8 state=fail reason=Action:Replace" in ended["failure_reason"]
    assert classify_result(ended).failure_class == "infrastructure"


def test_a_forgotten_status_is_a_status_not_a_running_job():
    assert JobStatus.parse("Failed").terminal and not JobStatus.parse("InProgress").terminal


def test_an_expired_or_missing_token_is_refused_before_any_call(tmp_path):
    import base64

    from trainops.backends.slurm.rest import read_token
    from trainops.errors import SpecError

    def jwt(expires: float) -> str:
        claims = base64.urlsafe_b64encode(json.dumps({"exp": expires, "sun": "alice"}).encode()).decode().rstrip("=")
        return f"eyJhbGciOiJIUzI1NiJ9.{claims}.signature"

    fresh = jwt(time.time() + 600)
    assert read_token(None, {"SLURM_JWT": fresh}) == fresh
    assert read_token(None, {"SLURM_JWT": f"SLURM_JWT={fresh}\n"}) == fresh  # as `scontrol token` prints it
    (tmp_path / "token").write_text(fresh)
    assert read_token(str(tmp_path / "token"), {}) == fresh
    with pytest.raises(SpecError, match="SLURM_JWT: the Slurm token expired"):
        read_token(None, {"SLURM_JWT": jwt(time.time() - 5)})
    with pytest.raises(SpecError, match="rest_token_file: no Slurm token"):
        read_token(None, {})
    with pytest.raises(SpecError, match="rest_token_file"):
        read_token(str(tmp_path / "absent"), {})


def test_the_guards_stop_a_slurm_job_that_stalled_or_spent_its_budget(tmp_path):
    """The watch a wait and the Airflow trigger apply once a poll: a job whose hosts wrote nothing for stall_timeout,
    or whose nodes x time x price reached the budget, is stopped with the guard's sentence (its failure reason)."""
    from trainops.backends.guards import JobGuards
    from trainops.backends.slurm.following import SlurmWatch

    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "algo-1.log"
    log.write_text("step 1\n")
    os.utime(log, (time.time() - 120, time.time() - 120))

    class Backend:
        def __init__(self):
            self.stopped = []

        def stop(self, handle, reason):
            self.stopped.append(reason)
            return "stopping"

    record = {"status": "InProgress", "slurm_state": "RUNNING", "started": time.time() - 200,
              "submitted": time.time() - 210, "billable_seconds": 200, "job_dir": str(tmp_path), "max_run": 3600}
    backend = Backend()
    tripped = SlurmWatch(backend, None, JobGuards(stall_timeout=60)).look(record)
    assert tripped.kind == "stalled" and backend.stopped == [tripped.message]
    assert classify_result({"status": "Stopped", "failure_reason": tripped.message}).failure_class == "infrastructure"
    backend = Backend()
    tripped = SlurmWatch(backend, None, JobGuards(budget_usd=0.1, hourly_usd=3.6)).look(record)  # 200 s: $0.20
    assert tripped.kind == "budget" and backend.stopped[0].startswith("budget:")
    backend = Backend()
    assert SlurmWatch(backend, None, JobGuards(stall_timeout=600)).look(record) is None and backend.stopped == []
