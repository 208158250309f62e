"""A node lost mid-job on the real test cluster: `trainops run --retries infrastructure=1` of a 2-host job whose hosts
advance in lock step and checkpoint each step (the Slurm test's lockstep.py). Once two steps are checkpointed, the
worker node dies as a machine does (every process of it frozen, then killed); Ray finds out by its own health checks,
the host's actor dies with it (Ray's ActorDiedError: its node has died), the driver reports the host lost and the job FAILED, which the ray engine's rules
class `infrastructure`. The train step retries (`lost-1-2`) on the same checkpoint key; the test brings the node
back (a session cluster's other tests need it, and the retry's STRICT_SPREAD placement waits for a second node), and
the retry resumes after the checkpointed step and completes.

Every wait is on a condition: the checkpoint's step, Ray's count of alive nodes, the first attempt's Ray state."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.ray_cluster import wait_until

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

LOCKSTEP = Path(__file__).parent.parent / "scripts" / "slurm" / "lockstep.py"


def test_a_lost_node_is_infrastructure_and_the_retry_resumes_from_the_checkpoint(ray_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "lockstep.py").write_text(LOCKSTEP.read_text())
    spec = tmp_path / "lockstep.yaml"
    spec.write_text(f"name: lockstep\nentry_point: lockstep.py\nsource_dir: {code}\ninstance_type: ml.c5.xlarge\n"
                    f"instance_count: 2\nmax_run: 600\noutput_path: file://{tmp_path / 'output'}\n"
                    "environment: {STEPS: '10', SECONDS_PER_STEP: '0.5'}\n")
    env = {**ray_cluster.client_env(), "TRAINOPS_HOME": str(tmp_path / "home")}
    run = subprocess.Popen(ray_cluster.inside([sys.executable, "-m", "trainops.cli", "run", str(spec), "--backend",
                                               "ray", "--job-name", "lost-1", "--retries",
                                               "infrastructure=1,backoff_seconds=0"]),
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The hosts share the key's directory (the job's name, which the train step gives its attempts).
        state = ray_cluster.root / "tmp" / "trainops-ray" / "checkpoints" / "lost-1" / "state.json"
        wait_until(lambda: state.exists() and json.loads(state.read_text())["step"] >= 2, "two steps checkpointed")
        ray_cluster.lose_worker()
        try:
            wait_until(lambda: (ray_cluster.get("/api/jobs/lost-1") or {}).get("status") == "FAILED",
                       "Ray to fail the first attempt", timeout=180)
        finally:
            ray_cluster.start_worker()  # the node comes back, for the retry and the session's other tests
        output, _ = run.communicate(timeout=400)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, output
    assert "attempt:    lost-1 Failed (infrastructure" in output, output
    # Ray's own verdict, not the broken call's "temporarily unavailable": the node missed its health checks.
    assert "was lost: The actor died" in output and "its node has died" in output, output
    assert "attempt:    lost-1-2 Completed" in output, output
    resumed = [line for line in output.splitlines() if "resumed after step" in line]
    assert resumed and all(int(line.rsplit(" ", 1)[1]) >= 2 for line in resumed), output
    assert json.loads(state.read_text())["step"] == 10
    status = subprocess.run(ray_cluster.inside([sys.executable, "-m", "trainops.cli", "status", "lost-1",
                                                "--backend", "ray", "--json"]),
                            env=env, capture_output=True, text=True, timeout=120)
    record = json.loads(status.stdout)
    assert [item["failure_class"] for item in record["attempts"]] == ["infrastructure", None], record
