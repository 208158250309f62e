"""A Slurm job's files, laid out under the shared directory before it is submitted.

The job spec is rendered into the CreateTrainingJob request every backend renders (`render_local`, with the shared
directory's paths where SageMaker has S3), and the request becomes what the local backend's executor makes of it:
one contract directory per host (`trainops.backends.hostfs.contract_dir.fill_container`: resourceconfig.json, the
channels, model/, output/, checkpoints/), each host's environment and the entrypoint's argv. Everything a node reads
is under ``<shared_dir>/jobs/<name>/`` (the user's alone: `trainops.backends.hostfs.paths`):

    request.json          the request, secrets masked (what `trainops render` shows)
    job.sbatch            the batch script
    code/ runtime/        the training code, and the trainops runtime with the node script beside it
    hosts/algo-N/         host N's contract directory (its checkpoints link to <shared_dir>/checkpoints/<key>)
    slurm/job.json        the hosts, the entrypoint, where the model's archive goes (read by the node script)
    slurm/algo-N.env.json host N's environment (mode 0600: it may hold the spec's secrets)
    slurm/mpi-agent       how mpirun reaches another host's node (srun within the job); slurm/mpi/ where hosts meet
    logs/algo-N.log       what host N printed, every rank's line prefixed; logs/batch-<id>.log the batch script's

With ``lay_out=False`` (the dry run) the same request and script are made and nothing is written.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.backends.cluster_rules import own_nodes_problems
from trainops.backends.hostfs import channels as host_channels
from trainops.backends.hostfs import contract_dir, paths, safe_fs
from trainops.backends.hostfs.artifacts import local_output_root, output_location_problem
from trainops.backends.hostfs.inputs import resolve_code_dir
from trainops.backends.request import code as uploads
from trainops.backends.request.hosts import host_groups
from trainops.backends.request.render import is_s3_source, masked, render_local
from trainops.backends.slurm import node
from trainops.backends.slurm.options import SlurmOptions
from trainops.backends.slurm.sbatch_names import FLAGS
from trainops.backends.slurm.script import NODE_FILE, BatchJob, batch_script
from trainops.errors import Problem, SpecError
from trainops.runtime.output_relay import MASK_VARIABLES
from trainops.runtime.plan import DEFAULT_LOCAL_LOG_PREFIX
from trainops.spec.v3 import v3_problems


@dataclass(frozen=True)
class Prepared:
    """A job ready to submit: its request, batch script and where its files are."""

    job_dir: Path
    request: dict[str, Any]
    batch: BatchJob
    hosts: tuple[str, ...]
    output_dir: str
    checkpoint_dir: str


def check_spec(spec: Any, options: SlurmOptions, shared_dir: str | None) -> None:
    """What the slurm backend cannot run, refused before anything is written (each with what to do)."""
    problems = own_nodes_problems(spec, "the slurm backend")
    if spec.output_path and spec.output_path.startswith("s3://"):
        problems.append(Problem("output_path", "the slurm backend writes model.tar.gz on the shared file system: "
                                               "give a directory on it (default <shared_dir>/output); on HyperPod "
                                               "an FSx data repository association exports it to S3"))
    if spec.disable_output_compression:
        problems.append(Problem("disable_output_compression", "the slurm backend writes model.tar.gz: leave it out"))
    problems += _channel_problems(spec, options)
    if shared_dir is None:
        problems.append(Problem("shared_dir", "the slurm backend needs a directory every node and this machine see "
                                              "(-o shared_dir=PATH; on HyperPod a directory on the FSx mount)"))
    elif any(character.isspace() for character in shared_dir):
        problems.append(Problem("shared_dir", f"{shared_dir!r} holds a space: sbatch's #SBATCH lines cannot carry "
                                              "it; choose a plainer path"))
    if problems:
        error = SpecError(problems, "job spec for the slurm backend")
        if spec.sdk == "v3":  # told in the names the spec was written in (compute.instance_groups)

            error = v3_problems(error)
        raise error


def _channel_problems(spec: Any, options: SlurmOptions) -> list[Problem]:
    overrides = dict(options.channel_overrides or {})
    problems = [Problem(f"channel_overrides.{name}", f"is not a channel of the spec (channels: "
                                                     f"{', '.join(sorted(spec.channels)) or 'none'})")
                for name in sorted(set(overrides) - set(spec.channels))]
    for name, channel in spec.channels.items():
        if name in overrides or not hasattr(channel, "file_system_id"):
            continue
        if options.fsx_mount is None or channel.file_system_type != "FSxLustre":
            problems.append(Problem(f"inputs.{name}", f"reads {channel.file_system_type} {channel.file_system_id}: "
                                                      "say where it is mounted on the nodes (-o fsx_mount=/fsx) or "
                                                      f"map the channel (channel_overrides {name}=PATH)"))
    return problems


def channel_overrides(spec: Any, options: SlurmOptions) -> dict[str, str]:
    """channel name -> the directory the nodes read it from: the given overrides, and each FSx channel's
    ``/<mountname>/path`` under ``fsx_mount``."""
    found = dict(options.channel_overrides or {})
    for name, channel in spec.channels.items():
        if (name not in found and hasattr(channel, "file_system_id") and options.fsx_mount
                and channel.file_system_type == "FSxLustre"):
            _, _, below = channel.directory_path.lstrip("/").partition("/")
            found[name] = os.path.join(options.fsx_mount, below)
    return found


def job_directory(shared_dir: str, name: str, create: bool = False) -> Path:
    """``<shared_dir>/jobs/<name>``, every directory on the way checked to be this user's alone."""
    paths.secure_root(shared_dir, create=create)
    return paths.job_dir(name, shared_dir)


def render(spec: Any, name: str, options: SlurmOptions, job_dir: Path, shared_dir: str, *,
           token: str) -> tuple[dict[str, Any], BatchJob]:
    """The request (with the job directory's paths) and the batch job, computed, nothing written."""
    if spec.source_dir is not None and is_s3_source(spec.source_dir):
        code = spec.source_dir  # downloaded as the code channel when the job is laid out
    else:
        resolve_code_dir(spec)  # the entry point is there
        code = str(job_dir / "code")
    # A plain path, not Path.as_uri(): the URI's percent-encoding (of a letter such as é, or of a %) is never
    # decoded where the path is used again, so the model went to an encoded sibling outside the shared directory.
    output_path = spec.output_path or f"file://{Path(shared_dir).expanduser().resolve() / 'output'}"
    request = render_local(spec, job_name=name, launcher="trainops", code=code, runtime=str(job_dir / "runtime"),
                           submit=code, output_path=output_path)

    extra = tuple((key, None if key in FLAGS else str(value)) for key, value in (options.sbatch_options or {}).items())
    batch = BatchJob(job_name=name, job_dir=str(job_dir), nodes=spec.host_count(), time_seconds=spec.max_run,
                     token=token, python=options.python or "python3", hyperpod=bool(options.hyperpod),
                     exclusive=options.exclusive is not False, partition=options.partition, account=options.account,
                     qos=options.qos, reservation=options.reservation, constraint=options.constraint, extra=extra)
    return request, batch


def output_directory(request: dict[str, Any], name: str, job_dir: Path) -> tuple[Path, str]:
    """(output root, job's directory name): the archives go to ``<root>/<name>/output``. The output root may be shared
    with other users, so the node reaches ``<name>`` and ``output`` below it only through an open directory, no link
    followed, each this user's (`trainops.runtime.destinations.open_destination`, as the local engine does)."""
    return local_output_root(request["OutputDataConfig"]["S3OutputPath"], job_dir), paths.safe_component(name)


def _check_output(request: dict[str, Any], name: str, job_dir: Path) -> None:
    """Make the output directory and try a file in it before the job is submitted (the check the local engine makes,
    `output_location_problem`): a link or another user's directory where trainops makes its own, or a read-only
    disk, is refused now rather than after hours of training."""
    problem = output_location_problem(request["OutputDataConfig"]["S3OutputPath"], name, job_dir)
    if problem:
        raise SpecError(Problem("output_path", problem), "job for the slurm backend")


def lay_out(spec: Any, name: str, options: SlurmOptions, job_dir: Path, shared_dir: str, *, token: str,
            s3_factory: Any = None) -> Prepared:
    """Write the job's files (see the module docstring) and return what to submit."""
    request, batch = render(spec, name, options, job_dir, shared_dir, token=token)
    _check_output(request, name, job_dir)
    for stale in ("hosts", "slurm", "logs", "code", "runtime", "data"):
        shutil.rmtree(job_dir / stale, ignore_errors=True)  # an earlier, unsubmitted preparation's
    for stale in ("ended.json", "stop.json"):
        (job_dir / stale).unlink(missing_ok=True)
    if not (spec.source_dir is not None and spec.source_dir.startswith("s3://")):
        code_dir = resolve_code_dir(spec)
        assert code_dir is not None
        _copy(uploads.code_files(code_dir, spec.dependencies, spec.ignore_patterns), job_dir / "code")
    _copy(uploads.runtime_files(), job_dir / "runtime")
    shutil.copyfile(node.__file__, job_dir / "runtime" / NODE_FILE)
    channels = host_channels.fetch_channels(request, job_dir, channel_overrides(spec, options), s3_factory)
    checkpoint_dir = checkpoint_directory(spec, options, shared_dir, name)

    hosts = [host for host, _, _ in host_groups(request)]
    for directory in ("slurm", "logs"):
        (job_dir / directory).mkdir(mode=0o700, exist_ok=True)
    for host in hosts:
        layout = contract_dir.fill_container(request, host, job_dir / "hosts" / host, channels, checkpoint_dir)
        _write_private(job_dir / "slurm" / f"{host}.env.json", host_environment(request, layout, options))
    _write_agent(job_dir, options.python or "python3")
    output_root, output_name = output_directory(request, name, job_dir)
    output_dir = output_root / output_name / "output"
    argv = contract_dir.container_argv(request, options.python or "python3")
    _write_private(job_dir / "slurm" / "job.json", {"job_name": name, "hosts": hosts, "argv": argv,
                                                    "output_dir": str(output_dir),
                                                    "output_root": str(output_root),
                                                    "output_parts": [output_name, "output"],
                                                    "hyperpod": bool(options.hyperpod)})

    _write_private(job_dir / "request.json", masked(request))
    safe_fs.write_atomically(job_dir / "job.sbatch", batch_script(batch).encode("utf-8"))
    return Prepared(job_dir=job_dir, request=request, batch=batch, hosts=tuple(hosts), output_dir=str(output_dir),
                    checkpoint_dir=str(checkpoint_dir))


def host_environment(request: dict[str, Any], layout: Any, options: SlurmOptions) -> dict[str, str]:
    """What host N's runtime gets over the node's own environment: the container's (the request's Environment, its
    /opt/ml paths turned into the host's contract directory, SAGEMAKER_BASE_DIR) and trainops' own variables."""
    extra = {"TRAINOPS_JOB_NAME": request["TrainingJobName"], "PYTHONUNBUFFERED": "1",
             "TRAINOPS_LOG_PREFIX": DEFAULT_LOCAL_LOG_PREFIX,
             "TRAINOPS_CHECKPOINT_DIR": str(layout.base_dir / "checkpoints"),
             MASK_VARIABLES: (request.get("Environment") or {}).get(MASK_VARIABLES, "")}
    if options.processes_per_host:
        extra["TRAINOPS_PROCESSES_PER_HOST"] = str(options.processes_per_host)
    if "TRAINOPS_SHIMS" not in (request.get("Environment") or {}):
        # The stand-ins for SMDDP and SMP v2, as on the local backend, where the library is not installed (AWS's
        # conda binaries win where they are); the spec's environment may say TRAINOPS_SHIMS=0.
        extra["TRAINOPS_SHIMS"] = "1"
    return contract_dir.container_environment(request, layout, inherited={}, isolated=False, extra=extra)


def _write_agent(job_dir: Path, python: str) -> None:
    """``slurm/mpi-agent``: what mpirun reaches another host through (one word, as Open MPI's plm_rsh_agent takes
    it): the node script's ``agent``, which starts Open MPI's daemon on that host's node with srun."""
    from shlex import quote

    script = (f"#!/bin/sh\n# mpirun's remote agent for job {job_dir.name} (trainops_slurm_node.py agent)\n"
              f"exec {quote(python)} -I -S {quote(str(job_dir / 'runtime' / NODE_FILE))} agent "
              f"{quote(str(job_dir))} \"$@\"\n")
    safe_fs.write_atomically(job_dir / "slurm" / "mpi-agent", script.encode("utf-8"), 0o700)


def checkpoint_directory(spec: Any, options: SlurmOptions, shared_dir: str, name: str) -> Path:
    """``<shared_dir>/checkpoints/<key>``: the option's key (the train step gives its job's name, so its attempts
    <name>-N resume; ``--resume-from JOB`` gives another's), else the spec's checkpoint_s3_uri (shared, as on
    SageMaker), else the job's own name: a new job starts afresh."""
    key = options.checkpoint_key
    field = "checkpoint_key"
    if not key and spec.checkpoint_s3_uri:
        key, field = spec.checkpoint_s3_uri.split("://", 1)[-1].strip("/").replace("/", "__"), "checkpoint_s3_uri"
    key = paths.checkpoint_component(key or name, field)
    return paths.own_directory(paths.checkpoints_root(shared_dir) / key, field)


def _copy(files: list[tuple[Path, str]], target: Path) -> None:
    for path, relative in files:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        if os.access(path, os.X_OK):
            destination.chmod(0o755)


def _write_private(path: Path, value: Any) -> None:
    """``value`` as JSON, mode 0600 (a host's environment holds the job's secrets), written beside its name and
    renamed over it (`safe_fs.write_atomically`): a node reading it never sees half of it, and a link planted under
    the name is replaced, never written through."""
    safe_fs.write_atomically(path, json.dumps(value, indent=2).encode("utf-8"), 0o600)
