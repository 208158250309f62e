"""`stop` of a running 2-host job through the ray backend on the real test cluster: the job ends Stopped with the
stop's reason, and no rank, runtime or host actor of it is left (looked for among the processes of the cluster's
namespace and Ray's live actors, waited on as conditions)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from support.ray_cluster import wait_until

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

TRAIN = textwrap.dedent("""
    import os, time
    print("RANK-UP", os.environ["SM_CURRENT_HOST"], flush=True)
    while True:
        time.sleep(1)
""")

SUBMIT_AND_STOP = textwrap.dedent("""
    import json, sys, time
    from trainops.backends import get_backend
    from trainops.spec.loader import parse_job_spec

    code = sys.argv[1]
    backend = get_backend("ray", options={"gpus_per_host": 0}, poll_seconds=0.5)
    spec = parse_job_spec({"name": "forever", "entry_point": "train.py", "source_dir": code,
                           "instance_type": "ml.g5.xlarge", "instance_count": 2, "max_run": 600,
                           "output_path": "file://" + code + "-out",
                           "distribution": {"type": "torch_distributed", "processes_per_host": 1}})
    handle = backend.submit(spec, "forever-1", log=print)
    deadline = time.monotonic() + 300
    while sum("RANK-UP" in line for line in backend.log_lines(handle)[0]) < 2:
        if time.monotonic() > deadline:
            raise SystemExit("the two ranks did not start: " + "\\n".join(backend.log_lines(handle)[0][-40:]))
        time.sleep(0.5)
    print(json.dumps({"running": handle.job_name}))
""")

STOP = textwrap.dedent("""
    import json
    from trainops.backends import get_backend

    backend = get_backend("ray", poll_seconds=0.5)
    handle = backend.handle("forever-1")
    said = backend.stop(handle, "stopped by the test")
    result = backend.wait(handle)
    print(json.dumps({"said": said, "status": result.status.value, "reason": result.failure_reason}))
""")

#: Ray's state API (what ``ray.util.state.list_actors`` asks), read over HTTP: no Python importing Ray per look.
LIVE_ACTORS = "/api/v0/actors?limit=1000&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"


def job_processes(cluster, code: Path) -> list[str]:
    found = []
    for pid in cluster.pids():
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "train.py" in command or "trainops.runtime" in command or "HostRunner" in command:
            found.append(f"{pid}: {command}")
    return found


def actor_names(cluster) -> list[str] | None:
    """The names of Ray's live actors (None while the dashboard does not answer)."""
    listed = cluster.get(LIVE_ACTORS)
    if not isinstance(listed, dict):
        return None
    actors = listed["data"]["result"]["result"]
    assert all(actor["state"] == "ALIVE" for actor in actors), actors  # the filter was applied
    return [actor.get("name") or "" for actor in actors]


def test_stop_ends_the_job_and_leaves_no_rank_or_actor(ray_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    done = ray_cluster.run([sys.executable, "-c", SUBMIT_AND_STOP, str(code)], timeout=500,
                           env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    running = job_processes(ray_cluster, code)
    assert len([line for line in running if "train.py" in line]) >= 2, running  # both hosts' ranks run
    assert {"forever-1:algo-1", "forever-1:algo-2"} <= set(actor_names(ray_cluster) or [])  # the look below sees them
    done = ray_cluster.run([sys.executable, "-c", STOP], timeout=300, env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["said"] == "forever-1: stopping (stopped by the test)"
    assert seen["status"] == "Stopped" and seen["reason"] == "stopped by the test"
    wait_until(lambda: not job_processes(ray_cluster, code), "every rank and runtime of the stopped job to end",
               timeout=120)

    def no_actor_of_the_job() -> bool:
        names = actor_names(ray_cluster)
        return names is not None and not [name for name in names if name.startswith("forever-1:")]

    wait_until(no_actor_of_the_job, "the stopped job's host actors to be gone", timeout=120)
