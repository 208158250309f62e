"""The parameter-server process of TensorFlow parameter-server jobs: its TF_CONFIG, and how the launcher starts,
watches and stops it beside the worker (the system test runs a whole job on two emulated hosts)."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import threading
import time

import pytest

from trainops.runtime import execute as execute_module
from trainops.runtime.execute import execute
from trainops.runtime.failure import read_failure
from trainops.runtime.parameter_server import ParameterServerError, server_arguments
from trainops.runtime.processes import is_alive

CLUSTER = {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], "worker": ["algo-2:2222"]}


def test_server_arguments_come_from_the_ps_task():
    config = {"cluster": CLUSTER, "environment": "cloud", "task": {"type": "ps", "index": 1}}
    assert server_arguments({"TF_CONFIG": json.dumps(config)}) == (CLUSTER, 1)


@pytest.mark.parametrize("text, words", [
    (None, "TF_CONFIG is not set"),
    ("{", "not JSON"),
    (json.dumps({"cluster": {"master": ["a:1"]}, "task": {"type": "ps", "index": 0}}), "cluster.ps"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}), "task must be"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 2}}), "task.index 2"),
])
def test_a_tf_config_that_is_no_ps_task_is_refused(text, words):
    with pytest.raises(ParameterServerError, match=words):
        server_arguments({} if text is None else {"TF_CONFIG": text})


def _plan(contract_dir, script: str, server: str, **changes):
    from trainops.runtime.config import launch_config
    from trainops.runtime.contract import read_contract
    from trainops.runtime.host_facts import HostFacts
    from trainops.runtime.planner import build_plan

    base = contract_dir(script=script)
    plan = build_plan(launch_config(read_contract(base, {}), {}, python=sys.executable), HostFacts())
    return dataclasses.replace(plan, parameter_server=(sys.executable, "-c", server),
                               parameter_server_env={"TF_CONFIG": '{"task": {"type": "ps"}}'}, **changes)


def test_the_server_runs_beside_the_worker_with_its_own_tf_config_and_is_stopped_after(contract_dir, tmp_path):
    pid_file = tmp_path / "server.pid"
    server = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()) + ' ' + os.environ['TF_CONFIG'])"
              "\ntime.sleep(120)\n")
    script = (f"import os, time\nwhile not os.path.exists({str(pid_file)!r}): time.sleep(0.05)\n"
              "print('worker sees', os.environ.get('TF_CONFIG'))\n")
    plan = _plan(contract_dir, script, server)
    plan = dataclasses.replace(plan, env={**plan.env, "TF_CONFIG": '{"w": 1}'})
    outcome = execute(plan)
    assert outcome.exit_code == 0, outcome.failure_text
    pid, tf_config = pid_file.read_text().split(" ", 1)
    assert json.loads(tf_config) == {"task": {"type": "ps"}}  # the server's own task, not the worker's
    assert not is_alive(int(pid))  # stopped when the worker was done


def test_a_server_that_dies_fails_the_host_and_stops_the_worker(contract_dir):
    plan = _plan(contract_dir, "import time\ntime.sleep(120)\n", "import sys\nsys.exit(3)\n")
    started = time.monotonic()
    outcome = execute(plan, stop_grace_seconds=5)
    assert time.monotonic() - started < 60  # not the worker's two minutes
    assert outcome.exit_code == 1
    failure = read_failure(plan.failure_path)
    assert "parameter server on host algo-1 exited with code 3" in failure["summary"]


def test_a_worker_host_keeps_its_server_until_the_master_is_done(contract_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(execute_module, "LOCAL_MASTER_POLL_SECONDS", 0.05)
    master = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{master.getsockname()[1]}"
    pid_file = tmp_path / "server.pid"
    server = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    plan = _plan(contract_dir, "print('done')\n", server, wait_for_master=address, local=True)
    seen = {}

    def close_master_later():
        # The launcher's first look at the master comes once the worker has ended: from then on its host still
        # serves the master (what it waits on, not a delay).
        master.settimeout(60)
        try:
            connection, _ = master.accept()
            connection.close()
        finally:
            seen["alive"] = pid_file.exists() and is_alive(int(pid_file.read_text()))
            master.close()

    closer = threading.Thread(target=close_master_later)
    closer.start()
    outcome = execute(plan)
    closer.join()
    assert outcome.exit_code == 0, outcome.failure_text
    assert seen["alive"] is True
    assert not is_alive(int(pid_file.read_text()))
    assert os.path.exists(plan.success_path)
