"""`trainops status` / `logs` on an Airflow worker find the local jobs its tasks started under
``$AIRFLOW_HOME/trainops`` without --workdir (issue 26 item 2): a real local job, then the command as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys


def _cli(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainops.cli", *arguments], capture_output=True, text=True,
                          timeout=240, env=env)


def test_a_job_started_by_airflow_is_found_by_status_and_logs(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import os\nprint('hello from the airflow job')\n"
                                              "open(os.path.join(os.environ['SM_MODEL_DIR'], 'm'), 'w')\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(f"entry_point: train.py\nsource_dir: {tmp_path / 'src'}\ninstance_type: ml.m5.large\n")
    airflow_home = tmp_path / "airflow"
    env = {**os.environ, "AIRFLOW_HOME": str(airflow_home), "TRAINOPS_HOME": str(tmp_path / "elsewhere")}
    # The task's own job index is the worker's, not this user's (the fallback is what is tested here; the index's
    # finding is tests/system/test_find_jobs_cli.py)
    ran = _cli("run", str(spec), "--job-name", "airflow-job-1", "--workdir", str(airflow_home / "trainops"),
               env={**env, "TRAINOPS_JOB_INDEX": str(tmp_path / "worker-index")})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    status = _cli("status", "airflow-job-1", env=env)
    assert status.returncode == 0 and "Completed" in status.stdout, status.stdout + status.stderr
    logs = _cli("logs", "airflow-job-1", "--backend", "local", env=env)
    assert logs.returncode == 0 and "hello from the airflow job" in logs.stdout, logs.stdout + logs.stderr
    # Elsewhere (no Airflow home), the same name is not a local job.
    gone = _cli("status", "airflow-job-1", "--backend", "local", env={**env, "AIRFLOW_HOME": str(tmp_path / "no")})
    assert gone.returncode == 2
