"""The Ray job's driver (its entrypoint, on the head): one placement group of one bundle per host and one actor per
bundle (bundle i is host ``algo-<i+1>``), each laying out its host's SageMaker contract on its node and running the
trainops runtime there, its lines prefixed with the host. The first host that fails stops the others; host 1 packs
the model where the job's output goes.

Run as ``python -m trainops.backends.ray.driver PLAN`` with the request in ``TRAINOPS_RAY_REQUEST`` (both written by
`trainops.backends.ray.submission.render`). trainops arrives on the nodes as a ``py_modules`` entry of the job's
runtime_env (or from ``shared_dir``): the nodes need Ray and the training libraries, never trainops installed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import trainops
from trainops.backends.hostfs import contract_dir
from trainops.backends.hostfs.channels import fetch_channels
from trainops.backends.ray.vocabulary import FAILURE_FILE_END, FAILURE_FILE_START, LOST_HOST
from trainops.backends.request.render import CODE_CHANNEL, RUNTIME_CHANNEL
from trainops.errors import SpecError
from trainops.runtime.failure import READ_LIMIT_BYTES, write_once
from trainops.runtime.untrusted import read_text

#: The variable that carries the request (SageMaker's shape) to the driver and the hosts.
REQUEST_VARIABLE = "TRAINOPS_RAY_REQUEST"
#: How long a host whose actor Ray calls unavailable is given for Ray to say it died (its node's health checks: 5
#: misses 3 s apart by default) or that it answers again.
UNAVAILABLE_SECONDS = 120.0
#: Set when the code travels as the runtime_env's working_dir (no shared_dir): the code channel is the actor's cwd.
SHIPPED_VARIABLE = "TRAINOPS_RAY_SHIPPED"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def model_location(request: dict[str, Any]) -> str | None:
    """Where host 1 puts the model of a completed job: ``<output>/<job>/output/model.tar.gz`` of a file:// or an
    s3:// output (as SageMaker's), None for an output it does not pack to."""
    output = str(request["OutputDataConfig"]["S3OutputPath"])
    if output.startswith("s3://"):
        return f"{output.rstrip('/')}/{request['TrainingJobName']}/output/model.tar.gz"
    if not output.startswith("file://"):
        return None
    return (Path(output.removeprefix("file://")) / request["TrainingJobName"] / "output" / "model.tar.gz").as_uri()


def _die_with_parent() -> None:
    """The runtime gets SIGTERM when its actor's process dies (a killed actor, a stopped job): no rank outlives it."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


class HostRunner:
    """One host of the job, on the node its bundle landed on."""

    def __init__(self, request: dict[str, Any], host: str, processes_per_host: int | None,
                 checkpoint_key: str | None = None, shared_dir: str | None = None):
        self.request, self.host, self.processes_per_host = request, host, processes_per_host
        self.process: subprocess.Popen[str] | None = None
        root = Path(shared_dir) if shared_dir else Path(tempfile.gettempdir()) / "trainops-ray"
        self.base = root / "jobs" / request["TrainingJobName"] / "hosts" / host
        # One directory of the key for every host and attempt of the job (as SageMaker's checkpoint_s3_uri): a retry
        # <name>-N resumes from it. Without shared_dir it is on each node's disk: a retry placed on the same nodes
        # resumes, one placed elsewhere starts from what its node holds.
        self.checkpoints = root / "checkpoints" / (checkpoint_key or request["TrainingJobName"])

    def address(self) -> tuple[str, int]:
        import ray

        return ray.util.get_node_ip_address(), _free_port()

    def _channels(self) -> dict[str, Path]:
        channels: dict[str, Path] = {}
        on_s3: list[dict[str, Any]] = []
        for channel in self.request.get("InputDataConfig") or []:
            name = channel["ChannelName"]
            uri = channel["DataSource"].get("S3DataSource", {}).get("S3Uri", "")
            if name == CODE_CHANNEL and os.environ.get(SHIPPED_VARIABLE) == "1":
                channels[name] = Path(os.getcwd())  # the runtime_env's working_dir, as Ray unpacked it here
            elif name == RUNTIME_CHANNEL:
                channels[name] = Path(trainops.__file__).resolve().parent.parent
            elif uri.startswith("s3://"):
                on_s3.append(channel)
            else:
                channels[name] = Path(uri.removeprefix("file://"))
        if on_s3:
            # Each host downloads the whole of its S3 channels into its own directory (a node's disk is its own), with
            # the node's credentials (its role, or the runtime_env's env_vars); the contract's layout then takes this
            # host's shard of a ShardedByS3Key channel, as on every engine.

            channels.update(fetch_channels({"InputDataConfig": on_s3}, self.base, {}, None))
        return channels

    def run(self, addresses: dict[str, str], master_port: int) -> int:
        """Lay out the host's contract, run the runtime, print its lines prefixed with the host; its exit code."""
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        try:
            channels = self._channels()
        except SpecError as error:  # a channel that cannot be read or downloaded here: the host fails, saying which
            return self._refuse_input(f"the channels of host {self.host} could not be laid out: {error}")
        layout = contract_dir.fill_container(self.request, self.host, self.base, channels, self.checkpoints)
        extra = {"TRAINOPS_JOB_NAME": self.request["TrainingJobName"], "PYTHONUNBUFFERED": "1",
                 "TRAINOPS_HOST_ADDRESSES": json.dumps(addresses), "TRAINOPS_MASTER_PORT": str(master_port),
                 "TRAINOPS_CHECKPOINT_DIR": str(self.checkpoints),
                 "TRAINOPS_SHIMS": (self.request.get("Environment") or {}).get("TRAINOPS_SHIMS", "1")}
        if self.processes_per_host:
            extra["TRAINOPS_PROCESSES_PER_HOST"] = str(self.processes_per_host)
        inherited = {key: value for key, value in os.environ.items()
                     if key not in (REQUEST_VARIABLE, SHIPPED_VARIABLE)}
        environment = contract_dir.container_environment(self.request, layout, inherited=inherited, isolated=False,
                                                         extra=extra)
        argv = contract_dir.container_argv(self.request, sys.executable)
        self.process = subprocess.Popen(argv, cwd=self.base, env=environment, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, preexec_fn=_die_with_parent)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            print(f"[{self.host}] {line}", end="", flush=True)
        return self.process.wait()

    def _refuse_input(self, why: str) -> int:
        """The host's input is bad before anything ran: its failure file says why, as the runtime's for bad contract
        input does (docs/contracts.md, section 4: exit code 2, reason error), so the job's failure reason names it."""
        (self.base / "output").mkdir(parents=True, exist_ok=True)
        (self.base / "output" / "failure").unlink(missing_ok=True)  # a stale one would stand for this failure
        write_once(str(self.base / "output" / "failure"),
                   "\n".join((" ".join(why.split()), f"host: {self.host}", "exit_code: 2", "reason: error")) + "\n")
        print(f"[{self.host}] [trainops] {why}", flush=True)
        return 2

    def stop(self) -> None:
        """End the runtime and every rank it started (its session)."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def failure(self) -> str:
        """The runtime's failure file of this host (docs/contracts.md, section 4); empty when it wrote none."""
        path = self.base / "output" / "failure"
        return read_text(str(path), READ_LIMIT_BYTES).strip() if path.exists() else ""

    def pack(self) -> str | None:
        """Host 1: the model directory as ``<output>/<job>/output/model.tar.gz``: written there for a file:// output,
        packed on the node and uploaded with the node's credentials for an s3:// one. `OSError` when it cannot be."""
        location = model_location(self.request)
        if location is None:
            print(f"[{self.host}] the model stays on the node ({self.base / 'model'}): packing to "
                  f"{self.request['OutputDataConfig']['S3OutputPath']} is not written", flush=True)
            return None
        on_s3 = location.startswith("s3://")
        target = self.base / "packed" / "model.tar.gz" if on_s3 else Path(location.removeprefix("file://"))
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(target, "w:gz") as archive:
            for path in sorted((self.base / "model").iterdir()):
                archive.add(path, arcname=path.name)
        if not on_s3:
            return target.as_uri()
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, _, key = location.removeprefix("s3://").partition("/")
        try:
            boto3.client("s3").upload_file(str(target), bucket, key)
        except (BotoCoreError, ClientError) as error:
            raise OSError(f"uploading the model to {location} failed: {error}") from error
        return location


def _stop_all(ray: Any, actors: list[Any]) -> None:
    """Stop every host's runtime; an actor that is gone already has nothing left to stop."""
    for actor in actors:
        try:
            ray.get(actor.stop.remote())
        except ray.exceptions.RayActorError:
            pass


def _one_line(error: BaseException, limit: int = 600) -> str:
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip())[:limit]


def _ray_verdict(ray: Any, actor: Any, error: BaseException) -> str:
    """Ray's own word on a host whose actor failed its call (``error``, a `RayActorError`).

    `ActorUnavailableError` is not a verdict: Ray says the actor may come back (a connection broke, its node may be
    alive). Ray decides whether its node died (the raylet's missed health checks), after which a call to the actor
    raises `ActorDiedError` with the cause: this waits for that, up to `UNAVAILABLE_SECONDS`. An actor that answers
    again is still lost to the job: its run's result (the host's exit) is gone with the broken call."""
    import time

    if not isinstance(error, ray.exceptions.ActorUnavailableError):
        return _one_line(error)
    deadline = time.monotonic() + UNAVAILABLE_SECONDS
    while time.monotonic() < deadline:
        try:
            ray.get(actor.failure.remote(), timeout=10)
        except ray.exceptions.ActorUnavailableError:
            time.sleep(1)
        except ray.exceptions.RayActorError as died:
            return _one_line(died)
        except ray.exceptions.GetTimeoutError:
            continue
        else:
            return f"its actor stopped answering and came back, its run lost: {_one_line(error)}"
    return f"its actor has been unavailable for {UNAVAILABLE_SECONDS:.0f} s: {_one_line(error)}"


def _failure_of(ray: Any, actor: Any) -> str:
    try:
        return str(ray.get(actor.failure.remote()))
    except ray.exceptions.RayActorError:
        return ""


def main(argv: list[str]) -> int:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    plan = json.loads(argv[1])
    request = json.loads(os.environ[REQUEST_VARIABLE])
    placement = plan["placement"]
    ray.init()
    group = placement_group(placement["bundles"], strategy=placement["strategy"])
    ray.get(group.ready())
    runner = ray.remote(HostRunner)
    actors: list[Any] = []  # Ray's actor handles (typed by Ray at run time only)
    for index, (host, bundle) in enumerate(zip(placement["hosts"], placement["bundles"], strict=True)):
        custom = {key: value for key, value in bundle.items() if key not in ("CPU", "GPU")}
        actors.append(runner.options(
            num_cpus=bundle.get("CPU", 0), num_gpus=bundle.get("GPU", 0), resources=custom or None,
            max_concurrency=3, name=f"{plan['job_name']}:{host}",
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
        ).remote(request, host, placement.get("processes_per_host"), plan.get("checkpoint_key"),
                 plan.get("shared_dir")))
    found = ray.get([actor.address.remote() for actor in actors])
    addresses = {host: address for host, (address, _) in zip(placement["hosts"], found, strict=True)}
    master_port = found[0][1]
    running = {actor.run.remote(addresses, master_port): host for host, actor in zip(placement["hosts"], actors,
                                                                                    strict=True)}
    failed: tuple[str, int] | None = None
    pending = list(running)
    lost: str | None = None
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        host = running[done[0]]
        try:
            code = ray.get(done[0])
        except ray.exceptions.RayActorError as error:  # the actor or its node died: the host is lost, not failed
            code = -1
            if failed is None:
                actor = actors[placement["hosts"].index(host)]
                lost = LOST_HOST.format(host=host, error=_ray_verdict(ray, actor, error))
        if code != 0 and failed is None:
            failed = (host, code)
            print(f"[trainops] host {host} exited {code}: stopping the other hosts", flush=True)
            _stop_all(ray, actors)
    if failed is not None:
        host, code = failed
        # The first failing host's failure file goes in the job's log, between markers: the backend reads it back as
        # the failure reason (a lost host has none: its line says why).
        text = "" if lost else _failure_of(ray, actors[placement["hosts"].index(host)])
        if text:
            # One write: the lines Ray forwards from the actors cannot fall between the markers.
            print("\n".join((FAILURE_FILE_START.format(host=host), text, FAILURE_FILE_END)), flush=True)
        elif lost:
            print(lost, flush=True)
        print(f"[trainops] the job failed: host {host} exited {code}", flush=True)
        return 1
    try:
        model = ray.get(actors[0].pack.remote())
    except ray.exceptions.RayTaskError as error:  # the output cannot be written (a disk, S3's answer): job failed
        print(f"[trainops] host {placement['hosts'][0]} could not pack the model: {_one_line(error.cause)}",
              flush=True)
        return 1
    if model:
        print(f"[trainops] model: {model}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
