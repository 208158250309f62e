"""A failing rank on the real test cluster is `user`: the script of host algo-2 raises, the driver stops the other
host and prints algo-2's failure file, Ray ends the job FAILED with the log's tail as its message, and the ray
backend's result carries that failure file as its reason, classified by the ray engine's rules as every front end
classifies a result (`vocabulary.classify_result`)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

TRAIN = textwrap.dedent("""
    import os, sys, time
    if os.environ["SM_CURRENT_HOST"] == "algo-2":
        raise ValueError("a batch size of zero, on purpose")
    for _ in range(600):  # host 1 trains on until the driver stops it
        time.sleep(0.5)
""")

SUBMIT = textwrap.dedent("""
    import json, sys
    from trainops.backends import get_backend
    from trainops.backends.kit import classify_result
    from trainops.spec.loader import parse_job_spec

    backend = get_backend("ray", options={"gpus_per_host": 0}, poll_seconds=0.5)
    spec = parse_job_spec({"name": "fails", "entry_point": "train.py", "source_dir": sys.argv[1],
                           "instance_type": "ml.c5.xlarge", "instance_count": 2, "max_run": 600,
                           "output_path": "file://" + sys.argv[2]})
    lines = []
    handle = backend.submit(spec, "fails-1", log=lines.append)
    result = backend.wait(handle, log=lines.append)
    verdict = classify_result(result.to_dict())
    print(json.dumps({"status": result.status.value, "reason": result.failure_reason,
                      "failed_host": result.details.get("failed_host"), "ray_status": result.secondary_status,
                      "verdict": verdict.to_dict() if verdict else None, "lines": lines}))
""")


def test_a_failing_rank_is_user_with_its_failure_file(ray_cluster, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN)
    done = ray_cluster.run([sys.executable, "-c", SUBMIT, str(code), str(tmp_path / "output")], timeout=500,
                           env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    shown = "\n".join(seen["lines"][-60:])
    assert seen["status"] == "Failed" and seen["ray_status"] == "FAILED", shown
    assert seen["failed_host"] == "algo-2", seen["reason"]
    reason = seen["reason"]
    assert "ValueError: a batch size of zero, on purpose" in reason  # the runtime's failure file, not Ray's preamble
    assert "reason: error" in reason and not reason.startswith("Job entrypoint command failed")
    assert seen["verdict"]["failure_class"] == "user", seen["verdict"]


SETUP = textwrap.dedent("""
    import json, sys
    from trainops.backends import get_backend
    from trainops.backends.kit import classify_result
    from trainops.spec.loader import parse_job_spec

    # Requirements in a conda environment, on nodes that have no conda: Ray cannot set the environment up.
    runtime_env = {"conda": {"dependencies": ["python=3.11", {"pip": ["trainops-test-no-such-package==0.0.1"]}]}}
    backend = get_backend("ray", options={"gpus_per_host": 0, "runtime_env": runtime_env}, poll_seconds=0.5)
    spec = parse_job_spec({"name": "nopkg", "entry_point": "train.py", "source_dir": sys.argv[1],
                           "instance_type": "ml.c5.xlarge", "instance_count": 2, "max_run": 600,
                           "output_path": "file://" + sys.argv[2]})
    lines = []
    handle = backend.submit(spec, "nopkg-1", log=lines.append)
    result = backend.wait(handle, log=lines.append)
    verdict = classify_result(result.to_dict())
    print(json.dumps({"status": result.status.value, "reason": result.failure_reason,
                      "error_type": result.details.get("error_type"), "lines": lines,
                      "verdict": verdict.to_dict() if verdict else None}))
""")


def test_a_runtime_env_that_cannot_be_installed_is_setup(ray_cluster, tmp_path):
    """A runtime_env Ray cannot set up on the nodes is `setup` (RUNTIME_ENV_SETUP_FAILURE), and the script never
    runs. The requirements go through conda, which these nodes lack: a ``pip`` runtime_env fails the same way, but
    Ray first clones the nodes' virtualenv (this environment's, 2 GB), which costs minutes of a test's time."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("raise SystemExit('the script must not run: its environment was never set up')\n")
    done = ray_cluster.run([sys.executable, "-c", SETUP, str(code), str(tmp_path / "output")], timeout=500,
                           env={"TRAINOPS_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == "Failed" and seen["error_type"] == "RUNTIME_ENV_SETUP_FAILURE", seen
    assert "runtime_env setup failed" in seen["reason"] and "conda" in seen["reason"], seen["reason"]  # Ray's words
    assert "the script must not run" not in "\n".join(seen["lines"])
    assert seen["verdict"]["failure_class"] == "setup", seen["verdict"]
