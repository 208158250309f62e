"""The Ray test cluster itself (`support.ray_cluster`): two nodes alive in a private network namespace, nothing of
it listening outside the namespace, and the Jobs API keeping a caller's submission_id to one job (what the ray
backend's idempotent submit rests on)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

SUBMIT_TWICE = textwrap.dedent("""
    import json, sys
    from ray.job_submission import JobStatus, JobSubmissionClient
    client = JobSubmissionClient("http://127.0.0.1:8265")
    chosen = sys.argv[1]
    first = client.submit_job(entrypoint="python -c \\"print('hello from ray')\\"", submission_id=chosen)
    try:
        client.submit_job(entrypoint="python -c \\"print('second')\\"", submission_id=chosen)
        second = None
    except Exception as error:  # Ray refuses the id with a RuntimeError carrying the server's answer
        second = f"{type(error).__name__}: {error}"
    import time
    deadline = time.monotonic() + 240
    while not client.get_job_status(chosen).is_terminal() and time.monotonic() < deadline:
        time.sleep(0.5)
    print(json.dumps({"first": first, "second": second, "status": str(client.get_job_status(chosen).value),
                      "logs": client.get_job_logs(chosen),
                      "jobs": [job.submission_id for job in client.list_jobs()]}))
""")


def test_two_nodes_in_a_private_namespace(ray_cluster):
    nodes = ray_cluster.alive_nodes()
    assert len(nodes) == 2
    assert {node["is_head_node"] for node in nodes} == {True, False}
    assert all(node["resources_total"]["CPU"] == 2 for node in nodes)
    assert os.readlink(ray_cluster.netns) != os.readlink("/proc/self/ns/net")
    addresses = ray_cluster.run(["ip", "-o", "addr"], check=True).stdout
    assert [line.split()[1] for line in addresses.splitlines()] == ["lo", "lo"]  # 127.0.0.1 and ::1, nothing else


def test_a_submission_id_is_one_job(ray_cluster):
    done = ray_cluster.run([sys.executable, "-c", SUBMIT_TWICE, "trainops-cluster-probe"], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["first"] == "trainops-cluster-probe"
    assert seen["second"] is not None and "trainops-cluster-probe" in seen["second"]
    assert "already exists" in seen["second"]
    assert seen["status"] == "SUCCEEDED"
    assert "hello from ray" in seen["logs"] and "second" not in seen["logs"]
    assert seen["jobs"].count("trainops-cluster-probe") == 1
