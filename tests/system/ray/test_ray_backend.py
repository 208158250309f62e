"""The ray backend's calls on the real test cluster (`support.ray_cluster`), each run inside the cluster's network
namespace as trainops would run there: a job of the name that trainops did not submit is refused and left running;
a trainops submission is looked at, its logs read after a cursor, stopped with its reason recorded, and a second
submit of its name follows it (one Ray job).

These jobs carry trainops' rendered submission (its id, metadata and runtime_env) with a plain script as the
entrypoint, so that each call is seen on a job of known lines and length (the driver: test_ray_torch.py)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

PRELUDE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from ray.job_submission import JobSubmissionClient
    from trainops.backends import get_backend
    from trainops.backends.ray.jobs_api import JobsApi
    from trainops.backends.ray.submission import render
    from trainops.spec.loader import parse_job_spec

    client = JobSubmissionClient("http://127.0.0.1:8265")
    backend = get_backend("ray", options={"gpus_per_host": 0}, poll_seconds=0.5)
    code = Path(sys.argv[1])
    spec = parse_job_spec({"name": "t", "entry_point": "train.py", "source_dir": str(code),
                           "instance_type": "ml.c5.xlarge", "instance_count": 2, "max_run": 600,
                           "output_path": "s3://bucket/out"})

    def until(predicate, what, seconds=240):
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.3)

    def submit_with(entrypoint, name):
        submission = render(spec, name, backend.options({"gpus_per_host": 0}), owner=backend.owner,
                            shared_dir=None)
        JobsApi("http://127.0.0.1:8265").submit({**submission, "entrypoint": entrypoint})
""")

ANOTHER_OWNER = PRELUDE + textwrap.dedent("""
    client.submit_job(entrypoint="python -c \\"import time; print('theirs', flush=True); time.sleep(600)\\"",
                      submission_id="theirs-1", metadata={"owner": "someone"})
    until(lambda: str(client.get_job_status("theirs-1").value) == "RUNNING", "their job to run")
    try:
        backend.submit(spec, "theirs-1", log=print)
        refused = None
    except Exception as error:
        refused = str(error)
    try:
        backend.stop(backend.handle("theirs-1"), "not mine")
        stop_refused = None
    except Exception as error:
        stop_refused = str(error)
    status = str(client.get_job_status("theirs-1").value)
    client.stop_job("theirs-1")
    print(json.dumps({"refused": refused, "stop_refused": stop_refused, "status": status,
                      "count": [job.submission_id for job in client.list_jobs()].count("theirs-1")}))
""")

FOLLOW_AND_STOP = PRELUDE + textwrap.dedent("""
    submit_with("python -c \\"import time; [print('line', i, flush=True) for i in range(3)]; time.sleep(600)\\"",
                "ours-1")
    handle = backend.handle("ours-1")
    until(lambda: backend.describe(handle).secondary_status == "RUNNING", "our job to run")
    until(lambda: "line 2" in backend.log_lines(handle)[0], "the script's three lines")
    whole = backend.log_lines(handle)[0]  # Ray's job log: its job manager's lines, then the script's
    first, cursor = backend.log_lines(handle, limit=whole.index("line 1") + 1)
    rest, _ = backend.log_lines(handle, cursor)
    again = backend.submit(spec, "ours-1", log=print)  # a retried submit: follows the running job
    stopped = backend.stop(handle, "the wait bound passed")
    result = backend.wait(handle)
    print(json.dumps({"first": first[-2:], "rest": rest[:1], "again_created": again.created,
                      "again_name": again.job_name, "stopped": stopped, "status": result.status.value,
                      "reason": result.failure_reason, "ray_status": result.secondary_status,
                      "count": [job.submission_id for job in client.list_jobs()].count("ours-1"),
                      "metadata": client.get_job_info("ours-1").metadata}))
""")


def run(cluster, script, tmp_path):
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "train.py").write_text("print('training')\n")
    done = cluster.run([sys.executable, "-c", script, str(code)], timeout=400,
                       env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_job_trainops_did_not_submit_is_refused_and_left_running(ray_cluster, tmp_path):
    seen = run(ray_cluster, ANOTHER_OWNER, tmp_path)
    assert seen["refused"] and "theirs-1" in seen["refused"] and "did not submit" in seen["refused"]
    assert seen["stop_refused"] and "neither follows nor stops" in seen["stop_refused"]
    assert seen["status"] == "RUNNING"  # untouched by both calls
    assert seen["count"] == 1


def test_a_trainops_job_is_followed_read_and_stopped_with_its_reason(ray_cluster, tmp_path):
    seen = run(ray_cluster, FOLLOW_AND_STOP, tmp_path)
    assert seen["first"] == ["line 0", "line 1"] and seen["rest"] == ["line 2"]  # the cursor goes on from line 2
    assert seen["again_name"] == "ours-1" and seen["again_created"] is False  # followed, not submitted again
    assert seen["count"] == 1
    assert seen["stopped"] == "ours-1: stopping (the wait bound passed)"
    assert seen["status"] == "Stopped" and seen["ray_status"] == "STOPPED"
    assert seen["reason"] == "the wait bound passed"
    assert seen["metadata"]["trainops_token"] == "trainops-ray-v1"
