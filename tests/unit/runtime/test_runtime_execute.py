"""Running plans: success and failure files, stale results, a command that cannot start, stopping."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time

from trainops.runtime.config import launch_config
from trainops.runtime.contract import read_contract
from trainops.runtime.execute import Launch, execute
from trainops.runtime.failure import read_failure
from trainops.runtime.host_facts import HostFacts
from trainops.runtime.planner import build_plan


def plan_for(base: str):
    return build_plan(launch_config(read_contract(base, {}), {}, python=sys.executable), HostFacts())


def test_success_replaces_a_stale_failure(contract_dir):
    base = contract_dir(script="print('ok')\n")
    os.makedirs(f"{base}/output", exist_ok=True)
    with open(f"{base}/output/failure", "w") as handle:
        handle.write("from an earlier run\n")
    outcome = execute(plan_for(base))
    assert outcome.exit_code == 0 and outcome.failure is None
    assert os.path.exists(f"{base}/output/success") and not os.path.exists(f"{base}/output/failure")


def test_a_script_that_writes_its_own_failure_file_keeps_it(contract_dir):
    script = ("import os\n"
              "open(os.path.join(os.environ['SM_OUTPUT_DIR'], 'failure'), 'w').write('my own reason\\n')\n"
              "raise SystemExit(4)\n")
    base = contract_dir(script=script)
    outcome = execute(plan_for(base))
    assert outcome.exit_code == 1
    assert outcome.failure.rank == 0 and outcome.failure.exit_code == 4
    assert outcome.failure_text == "my own reason\n"  # first writer wins


def test_a_command_that_cannot_start(contract_dir):
    base = contract_dir()
    plan = dataclasses.replace(plan_for(base), argv=[f"{base}/no-such-launcher", "x"])
    outcome = execute(plan)
    assert outcome.exit_code == 1
    failure = read_failure(plan.failure_path)
    assert failure["summary"].startswith(f"cannot start {base}/no-such-launcher on host algo-1")
    assert failure["reason"] == "error"


def test_request_stop_from_another_thread(contract_dir, tmp_path):
    started = tmp_path / "started"
    base = contract_dir(script=f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n")
    launch = Launch(plan_for(base), stop_grace_seconds=5)
    running = threading.Event()

    def stop_once_the_script_runs() -> None:  # a condition, not a delay: the script has started
        while not started.exists() and not running.is_set():
            time.sleep(0.05)
        launch.request_stop()

    stopper = threading.Thread(target=stop_once_the_script_runs, daemon=True)
    stopper.start()
    try:
        outcome = launch.run()
    finally:
        running.set()
        stopper.join(timeout=10)
    assert outcome.exit_code == 1
    assert outcome.failure.reason == "stopped"
    assert read_failure(launch.plan.failure_path)["summary"] == "the job was stopped by SIGTERM on host algo-1"
