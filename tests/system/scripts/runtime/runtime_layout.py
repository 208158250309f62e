"""Helpers for the runtime's system tests: contract directories for simulated hosts, launching
`python -m trainops.runtime launch` for each, and checking that no process of a launch is left."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("allreduce_train.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def lay_out_job(root: Path, hosts: int, distribution: dict[str, Any], hyperparameters: dict[str, Any] | None = None,
                instance_type: str = "ml.c5.xlarge") -> list[Path]:
    """One contract directory per simulated host (algo-1..N) under `root`, each with the test script as its code."""
    names = [f"algo-{index + 1}" for index in range(hosts)]
    bases = []
    for name in names:
        base = root / name
        (base / "input" / "config").mkdir(parents=True)
        (base / "input" / "data" / "train").mkdir(parents=True)
        (base / "input" / "data" / "train" / "part-0.txt").write_text(f"data of {name}\n")
        (base / "code").mkdir()
        shutil.copy(SCRIPT, base / "code" / "train.py")
        (base / "input" / "config" / "resourceconfig.json").write_text(json.dumps(
            {"current_host": name, "hosts": names, "current_instance_type": instance_type,
             "network_interface_name": "eth0"}))
        values = {"sagemaker_program": "train.py", "trainops_distribution": distribution, **(hyperparameters or {})}
        (base / "input" / "config" / "hyperparameters.json").write_text(
            json.dumps({key: json.dumps(value) for key, value in values.items()}))
        (base / "input" / "config" / "inputdataconfig.json").write_text(json.dumps({"train": {}}))
        bases.append(base)
    return bases


class LocalJob:
    """The launchers of one local job, started the way the local backend starts them."""

    def __init__(self, bases: list[Path], stop_grace: float = 5.0):
        self.bases = bases
        self.marker = uuid.uuid4().hex
        port = free_port()
        hosts = {base.name: "127.0.0.1" for base in bases}
        self.common = {key: value for key, value in os.environ.items()
                       if not key.startswith(("TRAINOPS_", "SM_", "OMPI_"))
                       and key not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        self.common.update({
            "TRAINOPS_LOCAL": "1", "TRAINOPS_HOST_ADDRESSES": json.dumps(hosts), "TRAINOPS_MASTER_PORT": str(port),
            "TRAINOPS_JOB_NAME": f"test-{self.marker[:8]}", "TRAINOPS_STOP_GRACE_SECONDS": str(stop_grace),
            "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "TRAINOPS_TEST_MARKER": self.marker,
        })
        self.launchers: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self) -> LocalJob:
        for base in self.bases:
            log = base.parent / f"{base.name}.log"
            env = {**self.common, "SAGEMAKER_BASE_DIR": str(base)}
            with open(log, "wb") as sink:
                self.launchers.append(subprocess.Popen(
                    [sys.executable, "-m", "trainops.runtime", "launch"], env=env, cwd=str(base),
                    stdout=sink, stderr=subprocess.STDOUT, start_new_session=True))
            self.logs.append(log)
        return self

    def wait(self, timeout: float = 120) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for launcher in self.launchers:
            try:
                codes.append(launcher.wait(max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"the launch did not end within {timeout} s:\n{self.output()}") from None
        return codes

    def output(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')}" for log in self.logs if log.exists())

    def kill(self) -> None:
        for pid in processes_with_marker(self.marker):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

    def __enter__(self) -> LocalJob:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.kill()


def processes_with_marker(marker: str) -> list[int]:
    """Pids of live processes whose environment carries the job's marker (everything a launch started)."""
    needle = f"TRAINOPS_TEST_MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat", "rb") as stat:
                        state = stat.read().rsplit(b")", 1)[1].split()[0]
                    if state not in (b"Z", b"X"):
                        found.append(int(entry))
        except OSError:
            continue
    return found


def live_group_members(pgid: int) -> list[int]:
    """Pids of the running (not zombie) processes of a process group. An exited process whose parent died stays a
    zombie until PID 1 reaps it; it holds no resources and is not counted."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry))
    return members


def wait_until_gone(marker: str, within: float = 10.0) -> list[int]:
    """Poll until no process of the launch is left (or `within` seconds pass); returns what is left."""
    deadline = time.monotonic() + within
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_with_marker(marker)
    return left


def wait_for(predicate, within: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def rank_results(bases: list[Path]) -> dict[int, dict[str, Any]]:
    """What each rank wrote to its host's model directory, by rank."""
    results = {}
    for base in bases:
        for path in (base / "model").glob("rank-*.json"):
            seen = json.loads(path.read_text())
            results[seen["rank"]] = seen
    return results


def rank_records(bases: list[Path]) -> list[dict[str, Any]]:
    """The rank records the wrappers kept (output/ranks/rank-N.json of every host)."""
    found = []
    for base in bases:
        for path in sorted((base / "output" / "ranks").glob("rank-*.json")):
            found.append(json.loads(path.read_text()))
    return found
