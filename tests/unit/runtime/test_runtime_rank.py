"""The rank wrapper, run as ranks run it: ``python -m trainops.runtime.rank SCRIPT ARGS``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from trainops.runtime import records


def run_rank(tmp_path, body: str, *arguments: str, env: dict | None = None, record: bool = True):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("TRAINOPS_", "SM_", "OMPI_")) and key not in ("RANK", "LOCAL_RANK")}
    if record:
        environ["TRAINOPS_RECORD_DIR"] = str(tmp_path / "ranks")
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "trainops.runtime.rank", str(script), *arguments],
                          capture_output=True, text=True, env=environ, cwd=str(tmp_path), timeout=60)


def only_record(tmp_path) -> dict:
    found = records.read_records([str(tmp_path / "ranks")])
    assert len(found) == 1
    return found[0]


def test_runs_the_script_as_main_with_its_arguments(tmp_path):
    result = run_rank(tmp_path, """
        import json, sys
        print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}))
    """, "--epochs", "3")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen == {"argv": [str(tmp_path / "script.py"), "--epochs", "3"], "name": "__main__",
                    "path0": str(tmp_path)}
    assert only_record(tmp_path)["state"] == "exited" and only_record(tmp_path)["exit_code"] == 0


def test_an_exception_is_recorded_with_the_users_traceback(tmp_path):
    result = run_rank(tmp_path, """
        def train():
            raise ValueError("boom")
        train()
    """)
    assert result.returncode == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "runpy" not in result.stderr and "trainops/runtime/rank.py" not in result.stderr
    assert 'line 3, in train' in result.stderr
    saved = only_record(tmp_path)
    assert (saved["exit_code"], saved["reason"], saved["exception"]) == (1, "error", "ValueError: boom")
    assert saved["ended_at"] >= saved["started_at"]
    assert records.read_tail(str(tmp_path / "ranks"), 0)[-1] == "ValueError: boom"


@pytest.mark.parametrize("body, code, stderr", [
    ("import sys; sys.exit(3)", 3, ""),
    ("import sys; sys.exit('bad input file')", 1, "bad input file"),
    ("import sys; sys.exit(0)", 0, ""),
    ("raise KeyboardInterrupt", 130, ""),
])
def test_exit_codes(tmp_path, body, code, stderr):
    result = run_rank(tmp_path, body)
    assert result.returncode == code
    assert stderr in result.stderr
    assert only_record(tmp_path)["exit_code"] == code


def test_works_without_a_record_directory(tmp_path):
    result = run_rank(tmp_path, "print('plain')", record=False)
    assert result.returncode == 0 and result.stdout == "plain\n"


def test_line_prefix(tmp_path):
    result = run_rank(tmp_path, """
        import sys
        print("one"); print("two")
        sys.stdout.write("partial"); sys.stdout.flush()
        print("error line", file=sys.stderr)
    """, env={"TRAINOPS_LOG_PREFIX": "[{host} rank {rank}] ", "SM_CURRENT_HOST": "algo-2", "RANK": "5",
              "LOCAL_RANK": "1", "WORLD_SIZE": "8"})
    assert result.stdout == "[algo-2 rank 5] one\n[algo-2 rank 5] two\n[algo-2 rank 5] partial"
    assert result.stderr == "[algo-2 rank 5] error line\n"
    assert only_record(tmp_path)["rank"] == 5


def test_mpi_ranks_take_their_simulated_host(tmp_path):
    host_env_dir = tmp_path / "hosts"
    host_env_dir.mkdir()
    (host_env_dir / "algo-2.json").write_text(json.dumps({"SM_MODEL_DIR": "/models/algo-2",
                                                          "TRAINOPS_RECORD_DIR": str(tmp_path / "ranks-2")}))
    result = run_rank(tmp_path, """
        import json, os
        print(json.dumps({k: os.environ.get(k) for k in
                          ("SM_CURRENT_HOST", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SM_MODEL_DIR")}))
    """, env={"TRAINOPS_LAUNCH_MODE": "mpirun", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
              "OMPI_COMM_WORLD_LOCAL_RANK": "3", "TRAINOPS_PROCESSES_PER_HOST": "2",
              "SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-1",
              "TRAINOPS_HOST_ENV_DIR": str(host_env_dir)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"SM_CURRENT_HOST": "algo-2", "RANK": "3", "LOCAL_RANK": "1",
                                         "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "SM_MODEL_DIR": "/models/algo-2"}
    # The rank keeps its record with its simulated host.
    saved = records.read_records([str(tmp_path / "ranks-2")])
    assert [(r["rank"], r["host"], r["local_rank"]) for r in saved] == [(3, "algo-2", 1)]


def test_the_tail_survives_a_sigkill(tmp_path):
    result = run_rank(tmp_path, """
        import os, signal, sys
        print("last words before the kill", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert result.returncode == -signal.SIGKILL
    assert "last words before the kill" in result.stderr
    assert records.read_tail(str(tmp_path / "ranks"), 0) == ["last words before the kill"]
    assert only_record(tmp_path)["state"] == "running"  # it never got to record its end


def test_the_tail_stays_bounded(tmp_path):
    result = run_rank(tmp_path, """
        import sys
        for index in range(20000):
            print(f"noise line {index:06d} " + "x" * 40, file=sys.stderr)
        print("the end", file=sys.stderr)
    """)
    assert result.returncode == 0
    size = os.path.getsize(records.tail_path(str(tmp_path / "ranks"), 0))
    assert size <= records.TAIL_LIMIT_BYTES
    assert records.read_tail(str(tmp_path / "ranks"), 0)[-1] == "the end"
    assert result.stderr.count("noise line") == 20000  # the log itself is not cut


def test_help():
    result = subprocess.run([sys.executable, "-m", "trainops.runtime.rank"], capture_output=True, text=True)
    assert result.returncode == 2 and "usage" in result.stderr
