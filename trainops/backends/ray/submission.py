"""The Ray job a trainops job becomes (`render`): its entrypoint, runtime_env, metadata and the placement request,
computed, nothing sent; and what the ray engine refuses of a spec (`check_spec`), before anything is sent.

The job's entrypoint is trainops' driver (`trainops.backends.ray.driver`): it reads the request from its argument
and runs the hosts. Without ``shared_dir`` the code travels as the runtime_env's ``working_dir`` and the trainops
runtime as one of its ``py_modules`` (the nodes need Ray and the training libraries, never trainops installed); with
it, both are paths every node sees.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import trainops
from trainops.backends.cluster_rules import own_nodes_problems
from trainops.backends.hostfs import paths
from trainops.backends.kit import Problem, SpecError, instance_type
from trainops.backends.ray.driver import REQUEST_VARIABLE, SHIPPED_VARIABLE, model_location
from trainops.backends.ray.options import RayOptions
from trainops.backends.request.render import render_local

#: The entrypoint's module: the job's driver on the head node.
DRIVER = "trainops.backends.ray.driver"
#: Metadata keys trainops writes on its submissions: the first says a submission is trainops', the second whose.
TOKEN_KEY = "trainops_token"
OWNER_KEY = "trainops_owner"
#: What TOKEN_KEY holds: the mark of a submission trainops made (`render`); a submission without it was made by
#: something else (``ray job submit``, another tool) and is never followed or stopped.
TOKEN = "trainops-ray-v1"
#: Metadata key of where a completed job's model is (a file:// output): the result's model_artifact.
MODEL_KEY = "trainops_model"


def check_spec(spec: Any) -> None:
    """What a Ray cluster cannot run this way, each refused naming the engine and what to do instead."""
    problems = own_nodes_problems(spec, "the ray engine")
    if getattr(spec.dist, "launcher", None) == "mpirun" and spec.dist.type != "smp":  # smp's is SMP v1, told above
        problems.append(Problem("distribution", f"{spec.dist.type} starts its ranks with mpirun over ssh, which the "
                                                "ray engine's actors do not have: use torch_distributed (torchrun)"))
    if problems:
        raise SpecError(problems, "job spec for the ray engine")


def gpus_per_host(spec: Any, options: RayOptions) -> float:
    """The option, else the instance type's GPUs (the public catalog), else 0 (a type the catalog does not know)."""
    if options.gpus_per_host is not None:
        return float(options.gpus_per_host)
    known = instance_type(spec.instance_type)
    return float(known.gpus) if known is not None else 0.0


def processes_per_host(spec: Any, options: RayOptions, gpus: float) -> int:
    """Ranks per host: the option, else the spec's distribution's, else one per GPU, else one."""
    if options.processes_per_host is not None:
        return options.processes_per_host
    given = getattr(spec.dist, "processes_per_host", None)
    if isinstance(given, int) and given > 0:
        return given
    return max(1, int(gpus))


def placement(spec: Any, options: RayOptions) -> dict[str, Any]:
    """The placement group the driver asks: one bundle per host (bundle i is host ``algo-<i+1>``)."""
    gpus = gpus_per_host(spec, options)
    bundle: dict[str, float] = {"CPU": float(options.cpus_per_host if options.cpus_per_host is not None else 1)}
    if gpus:
        bundle["GPU"] = gpus
    bundle.update({key: float(value) for key, value in (options.resources_per_host or {}).items()})
    hosts = spec.host_count()
    return {"strategy": options.placement or "STRICT_SPREAD", "bundles": [dict(bundle) for _ in range(hosts)],
            "hosts": [f"algo-{index + 1}" for index in range(hosts)],
            "processes_per_host": processes_per_host(spec, options, gpus)}


def checkpoint_key(spec: Any, options: RayOptions, name: str) -> str:
    """The name of the job's checkpoint directory (under ``checkpoints/`` of shared_dir, else of each node's temporary
    directory), which its hosts share: the option (the train step gives its job's name, so its attempts <name>-N
    resume), else the spec's checkpoint_s3_uri (shared, as on SageMaker), else the job's own name."""
    if options.checkpoint_key:
        return paths.checkpoint_component(options.checkpoint_key)
    if spec.checkpoint_s3_uri:
        key = spec.checkpoint_s3_uri.split("://", 1)[-1].strip("/").replace("/", "__")
        return paths.checkpoint_component(key, "checkpoint_s3_uri")
    return paths.checkpoint_component(name, "job_name")


def code_directory(spec: Any) -> Path:
    """The local directory of the job's code (source_dir, else the working directory), its entry point checked."""
    if spec.source_dir and str(spec.source_dir).startswith("s3://"):
        raise SpecError(Problem("source_dir", "the ray engine ships the code from this machine in the job's "
                                              "runtime_env: give a local directory"), "job spec for the ray engine")
    directory = Path(spec.source_dir or ".").expanduser().resolve()
    if spec.entry_point is not None and not (directory / spec.entry_point).is_file():
        raise SpecError(Problem("entry_point", f"{spec.entry_point} is not a file in {directory}"),
                        "job spec for the ray engine")
    return directory


def runtime_package() -> str:
    """The trainops package's directory: shipped as a py_module so the nodes run the runtime without installing it."""
    return str(Path(trainops.__file__).resolve().parent)


def render(spec: Any, name: str, options: RayOptions, *, owner: str, shared_dir: str | None) -> dict[str, Any]:
    """The submission: ``submission_id``, ``entrypoint``, ``runtime_env``, ``metadata`` (trainops' token and the
    owner), the ``request`` (SageMaker's shape: hyperparameters, channels, the stopping condition) and the
    ``placement``. Every problem of the spec on Ray at once; nothing is sent."""
    check_spec(spec)
    code = code_directory(spec)
    output_path = (spec.output_path or (Path(shared_dir) / "output").as_uri()) if shared_dir else spec.output_path
    if not output_path:
        raise SpecError(Problem("output_path", "the ray engine needs where model.tar.gz goes: an s3:// prefix or a "
                                               "directory every node sees (or give shared_dir)"),
                        "job spec for the ray engine")
    overrides = dict(options.channel_overrides or {})
    unknown = sorted(set(overrides) - set(spec.channels))
    if unknown:
        raise SpecError([Problem(f"channel_overrides.{channel}", "is not a channel of the spec (channels: "
                                                                 f"{', '.join(sorted(spec.channels)) or 'none'})")
                         for channel in unknown], "job spec for the ray engine")
    request = render_local(spec, job_name=name, launcher="trainops", code=str(code), runtime=runtime_package(),
                           submit=str(code), output_path=output_path, channels=overrides or None)
    given = dict(options.runtime_env or {})
    env_vars = {**dict(given.pop("env_vars", None) or {}), **{key: str(value) for key, value in
                                                             (spec.environment or {}).items()}}
    env_vars[REQUEST_VARIABLE] = json.dumps(request, sort_keys=True)  # the driver's and every host's
    runtime_env: dict[str, Any] = {**given, "env_vars": env_vars}
    if shared_dir is None:
        runtime_env["working_dir"] = str(code)
        if spec.ignore_patterns is not None:  # v3's SourceCode.ignore_patterns: name patterns, as Ray's excludes take
            runtime_env["excludes"] = [*(given.get("excludes") or []), *spec.ignore_patterns]
        runtime_env["py_modules"] = [runtime_package()]
        env_vars[SHIPPED_VARIABLE] = "1"  # the code channel is the working_dir Ray unpacked on each node
    plan = placement(spec, options)
    arguments = {"job_name": name, "placement": plan, "max_run": spec.max_run,
                 "checkpoint_key": checkpoint_key(spec, options, name), "shared_dir": shared_dir}
    entrypoint = f"python -m {DRIVER} {shlex.quote(json.dumps(arguments, sort_keys=True))}"
    metadata = {TOKEN_KEY: TOKEN, OWNER_KEY: owner, "trainops_job": name, "trainops_max_run": str(spec.max_run)}
    model = model_location(request)
    if model:
        metadata[MODEL_KEY] = model
    return {"submission_id": name, "entrypoint": entrypoint, "runtime_env": runtime_env, "metadata": metadata,
            "entrypoint_num_cpus": 0, "request": request, "placement": plan}


def default_owner() -> str:
    """Whose submissions these are: this user's name (a submission of another owner is never followed or stopped)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
