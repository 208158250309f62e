"""An emulated SageMaker training container, filled from a `CreateTrainingJob` request.

Per host, the base directory is written the way SageMaker writes /opt/ml for that request: `input/config/` holds
resourceconfig.json, inputdataconfig.json and hyperparameters.json (the request's HyperParameters as they are), every
channel of InputDataConfig is `input/data/<channel>` (the trainops code and runtime arrive as channels too), and
`model/`, `output/data`, `checkpoints` exist. The process is the request's ContainerEntrypoint + ContainerArguments
(else the Deep Learning Container's own entrypoint, the toolkit's `train`), run by the image's Python, with the
request's Environment and a PYTHONPATH holding only what the request puts there.

Where the container sees /opt/ml and the host names algo-1..N: when this machine allows a private mount namespace
(root, or a user namespace: `isolation`, with a PID namespace too wherever the kernel allows one, `host_init`), each
host runs in its own, with its base directory bind-mounted on
/opt/ml and an /etc/hosts naming every algo-N as 127.0.0.1, which is what Docker does for SageMaker local mode and
what AWS's toolkit assumes (it has /opt/ml paths of its own and addresses hosts by name). Without one the container
gets `SAGEMAKER_BASE_DIR` (honoured by the trainops runtime and by the toolkit's environment module), /opt/ml in the
request's Environment values rewritten to the base directory, and the trainops runtime finds the hosts through
TRAINOPS_HOST_ADDRESSES; the toolkit launcher then refuses to start (it would resolve algo-N through DNS).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainops.backends.local.layout import HostLayout
from trainops.backends.request.hosts import host_groups  # noqa: F401 - callers name it here
from trainops.errors import Problem, SpecError

CONTAINER_BASE = "/opt/ml"
LOCAL_NETWORK_INTERFACE = "lo"  # every emulated host shares this machine's loopback (gloo / NCCL bind to it)
DLC_ENTRYPOINT_MODULE = "sagemaker_training.cli.train"  # the `train` console script every framework DLC runs
DLC_TRAINING_MODULE = "sagemaker_pytorch_container.training:main"  # what the PyTorch DLC sets in its image
TOOLKIT_DISABLED = "TRAINOPS_LOCAL_NAMESPACE"  # 0: never use a mount namespace (tests of the fallback)
#: 0: no PID namespace per host (debugging); user: the user-namespace variant even where plain namespaces work
PID_NAMESPACE_SETTING = "TRAINOPS_LOCAL_PID_NAMESPACE"

logger = logging.getLogger(__name__)


# --- the config files, as SageMaker writes them -----------------------------------------------------------------------

def resource_config(request: Mapping[str, Any], host: str) -> dict[str, Any]:
    """resourceconfig.json of `host`: SageMaker's keys, hosts sorted as strings, every instance group listed."""
    members = host_groups(request)
    _, group, kind = next(member for member in members if member[0] == host)
    groups: dict[str, dict[str, Any]] = {}
    for name, group_name, instance_type in members:
        entry = groups.setdefault(group_name, {"instance_group_name": group_name, "instance_type": instance_type,
                                               "hosts": []})
        entry["hosts"].append(name)
    return {"current_host": host, "current_instance_type": kind, "current_group_name": group,
            "hosts": sorted(name for name, _, _ in members), "instance_groups": list(groups.values()),
            "network_interface_name": LOCAL_NETWORK_INTERFACE}


def input_data_config(request: Mapping[str, Any]) -> dict[str, Any]:
    """inputdataconfig.json: per channel its input mode, distribution and record wrapping (and content type)."""
    default_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    config: dict[str, Any] = {}
    for channel in request.get("InputDataConfig") or []:
        entry: dict[str, Any] = {"TrainingInputMode": channel.get("InputMode") or default_mode}
        source = channel["DataSource"]
        if "S3DataSource" in source:
            entry["S3DistributionType"] = source["S3DataSource"].get("S3DataDistributionType", "FullyReplicated")
        else:
            entry["FileSystemType"] = source["FileSystemDataSource"]["FileSystemType"]
        entry["RecordWrappingType"] = channel.get("RecordWrapperType", "None")
        if channel.get("ContentType"):
            entry["ContentType"] = channel["ContentType"]
        config[channel["ChannelName"]] = entry
    return config


def _write_json(path: Path, value: Any) -> None:
    from trainops.backends.hostfs.safe_fs import write_atomically

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(value).encode("utf-8"), 0o644)  # an earlier run's host may have left a link


# --- channels: where each one's data is on this machine ---------------------------------------------------------------

def _local_source(uri: str) -> Path | None:
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    if "://" not in uri:
        return Path(uri).expanduser()
    return None


def _single_object(client: Any, uri: str) -> tuple[str, str] | None:
    """(bucket, key) when `uri` names one object exactly (a source tarball), else None (a prefix)."""
    if uri.endswith("/"):
        return None
    bucket, _, key = uri[len("s3://"):].partition("/")
    try:
        client.head_object(Bucket=bucket, Key=key)
    except Exception:  # noqa: BLE001 - any answer but the object's headers means "a prefix"
        return None
    return bucket, key


def fetch_channels(request: Mapping[str, Any], job_dir: Path, overrides: Mapping[str, str],
                   s3_factory: Callable[[str], Any] | None) -> dict[str, Path]:
    """channel name -> the local directory holding its data; s3:// channels are downloaded into the job directory
    once (every host sees the same copy), local ones are used in place. Every problem is reported at once."""
    channels = {channel["ChannelName"]: channel for channel in request.get("InputDataConfig") or []}
    problems = [Problem(f"channel {name}", f"is not a channel of the request (channels: {sorted(channels)})")
                for name in sorted(set(overrides) - set(channels))]
    resolved: dict[str, Path] = {}
    for name, channel in channels.items():
        source = channel["DataSource"]
        if name in overrides:
            uri = overrides[name]
        elif "FileSystemDataSource" in source:
            system = source["FileSystemDataSource"]
            problems.append(Problem(f"inputs.{name}", f"reads {system['FileSystemType']} {system['FileSystemId']}, "
                                                      "which cannot be mounted here: map it to a local directory "
                                                      f"with --channel {name}=PATH"))
            continue
        else:
            s3 = source["S3DataSource"]
            if s3.get("S3DataType", "S3Prefix") != "S3Prefix":
                problems.append(Problem(f"inputs.{name}", f"S3DataType {s3['S3DataType']} is not emulated locally: "
                                                          "give an S3 prefix"))
                continue
            uri = s3["S3Uri"]
        local = _local_source(uri)
        if local is not None:
            from trainops.backends.local.preflight import channel_problem

            path = local.resolve()
            problem = channel_problem(str(path))  # missing, or this user cannot read it
            if problem is not None:
                problems.append(Problem(f"inputs.{name}", problem))
            else:
                resolved[name] = path if path.is_dir() else _single_file_channel(job_dir, name, path)
            continue
        try:
            resolved[name] = _download(uri, job_dir / "data" / name, s3_factory)
        except SpecError as error:
            problems += [Problem(f"inputs.{name}", problem.message) for problem in error.problems]
    if problems:
        raise SpecError(problems, "channels of the local job")
    return resolved


def _download(uri: str, destination: Path, s3_factory: Callable[[str], Any] | None) -> Path:
    """Every object under the S3 prefix `uri` (or the one object it names) into `destination`, as SageMaker's File
    mode does: names relative to the prefix, nothing else in the directory."""
    factory = s3_factory or _default_s3_factory
    client = factory("s3")
    logger.info("[trainops] downloading channel %s from %s", destination.name, uri)
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    single = _single_object(client, uri)
    if single is not None:  # an object, not a prefix: the channel holds that one file, under its own name
        items = [(prefix, prefix.rsplit("/", 1)[-1])]
    else:
        # A prefix goes through staging, which refuses hostile keys with a reason each and writes only below the
        # destination (directories opened relative to their checked parents, no links followed).
        return _stage_prefix(uri, destination, factory)
    if destination.exists():
        shutil.rmtree(destination)  # a re-run downloads afresh: nothing stale stays in the channel
    destination.mkdir(parents=True)

    def fetch(item: tuple[str, str]) -> None:
        key, name = item
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))

    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(fetch, items))
    except Exception as error:  # noqa: BLE001 - botocore's and the disk's errors alike fail this channel
        raise SpecError(Problem("", f"downloading {uri} failed: {error}")) from error
    return destination


def _stage_prefix(uri: str, destination: Path, factory: Callable[[str], Any]) -> Path:
    from trainops.backends.hostfs.stage_names import printable_name
    from trainops.backends.hostfs.staging import stage_tree
    from trainops.errors import JobFailed

    if destination.exists():
        shutil.rmtree(destination)  # a re-run downloads afresh: nothing stale stays in the channel
    try:
        report = stage_tree(uri, str(destination), progress=False, client_factory=factory)
    except JobFailed as error:  # the prefix cannot be listed (no bucket, no access): this channel's problem
        raise SpecError(Problem("", str(error))) from error
    items = list(report.refused) + list(report.failed)
    if items:
        shown = 10
        listed = "; ".join(f"{printable_name(item.name)}: {item.reason}" for item in items[:shown])
        more = f"; and {len(items) - shown} more" if len(items) > shown else ""
        raise SpecError(Problem("", f"staging {uri} refused or failed {len(items)} object(s): {listed}{more}"))
    from trainops.backends.hostfs.stage_names import RESERVED_PREFIX

    for path in destination.iterdir():  # staging's manifest: SageMaker's channel holds the objects alone
        if path.name.startswith(RESERVED_PREFIX) and path.is_file() and not path.is_symlink():
            path.unlink()
    if not any(destination.iterdir()):
        raise SpecError(Problem("", f"no objects under {uri}; check the bucket and the prefix"))
    return destination


def _default_s3_factory(service: str) -> Any:
    import boto3

    return boto3.client(service)


def _single_file_channel(job_dir: Path, name: str, path: Path) -> Path:
    # A channel is a directory in the container, even when its S3 prefix names one object.
    directory = job_dir / "data" / name
    directory.mkdir(parents=True, exist_ok=True)
    _link(directory / path.name, path)
    return directory


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=target.is_dir())


# --- one container's base directory ----------------------------------------------------------------------------------

def fill_container(request: Mapping[str, Any], host: str, base: Path, channels: Mapping[str, Path],
                   checkpoint_dir: Path, *, mount: bool = False) -> HostLayout:
    """Write `host`'s base directory from the request. With ``mount`` (the host has a mount namespace) each channel
    is an empty directory that `isolate` bind-mounts the data onto, read-only unless the channel's
    FileSystemAccessMode is rw; without, a link to the data (the fallback: writable, and a link). A ShardedByS3Key
    channel gets every N-th file of the sorted listing, as SageMaker splits a prefix's keys between hosts."""
    members = [name for name, _, _ in host_groups(request)]
    index, count = members.index(host), len(members)
    config = base / "input" / "config"
    _write_json(config / "resourceconfig.json", resource_config(request, host))
    _write_json(config / "inputdataconfig.json", input_data_config(request))
    _write_json(config / "hyperparameters.json", dict(request.get("HyperParameters") or {}))
    distribution = {channel["ChannelName"]: channel["DataSource"].get("S3DataSource", {}).get(
        "S3DataDistributionType", "FullyReplicated") for channel in request.get("InputDataConfig") or []}
    writable = {channel["ChannelName"]: channel["DataSource"].get("FileSystemDataSource", {}).get(
        "FileSystemAccessMode") == "rw" for channel in request.get("InputDataConfig") or []}
    mounts: list[tuple[str, str, bool]] = []
    for name, path in channels.items():
        link = base / "input" / "data" / name
        if distribution.get(name) == "ShardedByS3Key" and count > 1:
            _shard(link, path, index, count)
        elif mount:
            _mount_point(link)
            mounts.append((_mountable(str(path), name), f"input/data/{name}", not writable.get(name, False)))
        else:
            _link(link, path)
    _link(base / "checkpoints", checkpoint_dir)
    for directory in ("model", "output/data", "output/intermediate", "code"):
        (base / directory).mkdir(parents=True, exist_ok=True)
    return HostLayout(host, base, mounts=tuple(mounts))


def _mount_point(directory: Path) -> None:
    # An empty directory of its own (an earlier run's link or data removed), for the data to be mounted on.
    if directory.is_symlink() or directory.is_file():
        directory.unlink()
    elif directory.is_dir():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)


def _mountable(source: str, name: str) -> str:
    # The mount list is one tab-separated line per channel: a path that could break the line is refused.
    if any(character in source for character in "\t\n\r"):
        raise SpecError(Problem(f"inputs.{name}", f"{source!r} holds a tab or a line break: move the data to a "
                                                  "plainer path"), source="local host")
    return source


def _shard(link: Path, source: Path, index: int, count: int) -> None:
    _link(link, source)
    link.unlink()
    link.mkdir(parents=True)
    files = sorted(path for path in source.rglob("*") if path.is_file())
    for path in files[index::count]:
        _link(link / path.relative_to(source), path)


# --- the process: command, environment, isolation ---------------------------------------------------------------------

def uses_toolkit(request: Mapping[str, Any]) -> bool:
    """True when the image's own entrypoint (the toolkit) runs the job: the request names no ContainerEntrypoint."""
    return not request["AlgorithmSpecification"].get("ContainerEntrypoint")


def container_argv(request: Mapping[str, Any], python: str) -> list[str]:
    """What the container runs: the request's ContainerEntrypoint + ContainerArguments with `python` for the image's
    python3; for a Deep Learning Container (no entrypoint in the request), the toolkit's `train` command."""
    algorithm = request["AlgorithmSpecification"]
    entrypoint = list(algorithm.get("ContainerEntrypoint") or [])
    if not entrypoint:
        return [python, "-m", DLC_ENTRYPOINT_MODULE, *algorithm.get("ContainerArguments", [])]
    if os.path.basename(entrypoint[0]) in ("python", "python3"):
        entrypoint[0] = python
    return entrypoint + list(algorithm.get("ContainerArguments") or [])


def _to_host(value: str, base: Path) -> str:
    # Without a private /opt/ml the request's container paths are rewritten to the host's base directory.
    return value.replace(CONTAINER_BASE, str(base))


def container_environment(request: Mapping[str, Any], layout: HostLayout, *, inherited: Mapping[str, str],
                          isolated: bool, extra: Mapping[str, str], python: str | None = None) -> dict[str, str]:
    """The container's environment: this machine's (credentials, endpoint, PATH) without its PYTHONPATH and any
    SM_/SAGEMAKER_ variable, the image's bin directory first on PATH (`python`'s: the toolkit runs `torchrun` and
    `mpirun` by name), then what SageMaker sets (TRAINING_JOB_NAME, region, the DLC's training module), the
    request's Environment, and the local executor's own variables (`extra`)."""
    env = {key: value for key, value in inherited.items()
           if key != "PYTHONPATH" and not key.startswith(("SM_", "SAGEMAKER_"))}
    if python:
        env["PATH"] = os.pathsep.join(filter(None, [os.path.dirname(python), env.get("PATH")]))
    hyperparameters = request.get("HyperParameters") or {}
    env["TRAINING_JOB_NAME"] = request["TrainingJobName"]
    region = hyperparameters.get("sagemaker_region")
    if region:
        env.setdefault("AWS_REGION", json.loads(region))
    if uses_toolkit(request):
        env["SAGEMAKER_TRAINING_MODULE"] = DLC_TRAINING_MODULE
    for key, value in (request.get("Environment") or {}).items():
        env[key] = value if isolated else _to_host(value, layout.base_dir)
    if not isolated:
        env["SAGEMAKER_BASE_DIR"] = str(layout.base_dir)
    env.update(extra)
    return env


#: Where trainops finds the host's own tools (unshare, sh, mount): after the directory of the Python running
#: trainops, these, never the PATH of the job's environment (a spec's PATH must not choose what runs as the host).
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_tool(name: str) -> str | None:
    """The absolute path of the host tool ``name`` from trainops' own environment (`SAFE_PATH` after the directory
    of `sys.executable`), or None when there is none."""
    import sys

    return shutil.which(name, path=os.pathsep.join([os.path.dirname(sys.executable), SAFE_PATH]))


#: How an emulated host is isolated, strongest first (`isolation`): a PID and a mount namespace made directly (root,
#: CAP_SYS_ADMIN), the same inside a user namespace of the host's own (an unprivileged user, where the kernel allows
#: user namespaces), then a mount namespace alone (PID namespaces turned off) either way. None: no namespace at all.
#: Every variant, None included, is started by `host_init` (its launcher holds the job's locks until the host ended).
PID_ISOLATIONS = ("pid", "user-pid")
ISOLATIONS = (*PID_ISOLATIONS, "mount", "user-mount")
# What the host's mount script does, tried once: a tmpfs, a bind mount and a read-only remount of it.
_MOUNT_PROBE = ('set -e; d=$(mktemp -d); mkdir "$d/a" "$d/b"; mount --bind "$d/a" "$d/b"; '
                'mount -o remount,bind,ro "$d/b"; umount "$d/b"; mount -t tmpfs trainops-probe "$d/a"; '
                'umount "$d/a"; rm -r "$d"')


def image_tool(name: str, python: str) -> str | None:
    """The absolute path of the image's tool ``name`` (mpirun) for a local host: next to the image's Python (a venv
    or conda environment's own Open MPI), then on the PATH trainops itself runs with, then `SAFE_PATH`; never on
    the job's `PATH` (the request's Environment). None when there is none. The container's processes still see the
    PATH the job asks for; only what trainops' runtime starts as the image's tool is chosen here."""
    search = [os.path.dirname(python), os.environ.get("PATH", ""), SAFE_PATH]
    return shutil.which(name, path=os.pathsep.join(entry for entry in search if entry))


def choose_isolation(works: Callable[[str], bool], environ: Mapping[str, str]) -> str | None:
    """The first variant of `ISOLATIONS` that `works` on this machine, or None (the fallback): none at all with
    TRAINOPS_LOCAL_NAMESPACE=0, no PID namespace with TRAINOPS_LOCAL_PID_NAMESPACE=0, only user namespaces with
    TRAINOPS_LOCAL_PID_NAMESPACE=user (what an unprivileged user gets, tried by root)."""
    if environ.get(TOOLKIT_DISABLED) == "0":
        return None
    setting = environ.get(PID_NAMESPACE_SETTING, "").strip().lower()
    candidates = {"0": ("mount", "user-mount"), "user": ("user-pid", "user-mount")}.get(setting, ISOLATIONS)
    return next((variant for variant in candidates if works(variant)), None)


def isolation_works(variant: str) -> bool:
    """Whether a host isolated as `variant` starts here: the very launcher of that variant, tried with a probe of
    the mounts a host makes (a refused `unshare`, a refused mount of /proc or a bind mount all answer no)."""
    from trainops.backends.local import host_init

    shell = host_tool("sh")
    return shell is not None and host_init.works(variant, [shell, "-c", _MOUNT_PROBE], {"PATH": SAFE_PATH})


@functools.lru_cache(maxsize=1)
def isolation() -> str | None:
    """How this machine isolates each emulated host (`ISOLATIONS`), asked once per process."""
    return choose_isolation(isolation_works, os.environ)


def namespaces_available() -> bool:
    """Whether each emulated host gets a private mount namespace (/opt/ml, the algo-N names), whichever variant."""
    return isolation() is not None


def pid_namespaces_available() -> bool:
    """Whether each emulated host is a PID namespace of its own too (`trainops.backends.local.host_init`): every
    process of the host ends with it or with its controller, by the kernel. Inside, pids are the host's own, as in
    a container; `trainops status` lists each rank's pid on this machine (`rank_pids`)."""
    return isolation() in PID_ISOLATIONS


# Runs as the container's first process inside its own mount namespace, then execs the entrypoint (same pid):
# /opt/ml becomes this host's base directory (a tmpfs on /opt when /opt/ml does not exist, with /opt's own entries
# bound back so an interpreter installed there still runs), /etc/hosts names every emulated host. The entrypoint is
# exec'd through `host_init.py without-mounts`, which takes CAP_SYS_ADMIN away first: a rank running as root cannot
# remount its read-only channels writable.
_NAMESPACE_SCRIPT = r"""set -e
base=$1; hosts=$2; keep=$3; tools=$4; mounts=$5; python=$6; launcher=$7; shift 7
container_path=${PATH-}; PATH=$tools
if [ ! -d /opt/ml ]; then
  mount --bind /opt "$keep"
  mount -t tmpfs -o mode=755 trainops-opt /opt
  for entry in "$keep"/* "$keep"/.[!.]*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    if [ -d "$entry" ]; then mkdir "/opt/$name"; else : > "/opt/$name"; fi
    mount --bind "$entry" "/opt/$name"
  done
  mkdir /opt/ml
fi
mount --bind "$base" /opt/ml
tab=$(printf '\t')
while IFS=$tab read -r mode source target; do
  [ -n "$target" ] || continue
  mount --bind "$source" "/opt/ml/$target"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "/opt/ml/$target"; fi
done < "$mounts"
mount --bind "$hosts" /etc/hosts
PATH=$container_path
exec "$python" -I -S "$launcher" without-mounts "$@"
"""


def isolate(argv: list[str], layout: HostLayout, job_dir: Path, hosts: list[str]) -> list[str]:
    """`argv`, the container's entrypoint, as its host's launcher starts it (`host_init`, in the variant this machine
    allows): in a mount namespace of its own through the mount script (see the module docstring), or, with no
    namespace, with the /opt/ml paths it names turned into the host's base directory."""
    from trainops.backends.local import host_init

    namespace = job_dir / "namespace"
    namespace.mkdir(parents=True, exist_ok=True)
    variant = isolation()
    launcher = [sys.executable, "-I", "-S", os.path.abspath(host_init.__file__), variant or "none",
                str(init_report(job_dir, layout.name))]
    if variant is None:
        return [*launcher, *(_to_host(part, layout.base_dir) for part in argv)]
    keep = namespace / f"opt-{layout.name}"
    keep.mkdir(exist_ok=True)
    from trainops.backends.hostfs.safe_fs import write_atomically

    hosts_file = namespace / "hosts"
    if not os.path.isfile(hosts_file) or os.path.islink(hosts_file):  # an earlier run's host could have left one
        try:
            original = Path("/etc/hosts").read_text(encoding="utf-8")
        except OSError:
            original = "127.0.0.1 localhost\n"
        names = "".join(f"127.0.0.1\t{host}\n" for host in hosts)
        write_atomically(hosts_file, (original.rstrip("\n") + "\n# emulated SageMaker hosts (trainops)\n"
                                      + names).encode("utf-8"), 0o644)
    shell = host_tool("sh")
    if not shell:
        raise SpecError(Problem("isolation", f"sh is not on this machine (looked in {SAFE_PATH}): install a shell, "
                                             "or set TRAINOPS_LOCAL_NAMESPACE=0"), source="local host")
    mounts = namespace / f"mounts-{layout.name}"
    write_atomically(mounts, "".join(f"{'ro' if readonly else 'rw'}\t{source}\t{target}\n"
                                     for source, target, readonly in layout.mounts).encode("utf-8"), 0o644)
    return [*launcher, shell, "-c", _NAMESPACE_SCRIPT, "trainops-container", str(layout.base_dir), str(hosts_file),
            str(keep), SAFE_PATH, str(mounts), sys.executable, os.path.abspath(host_init.__file__), *argv]


def init_report(job_dir: Path, host: str) -> Path:
    """Where a host's init (`host_init`) says how its launcher ended and how many processes it stopped after."""
    return job_dir / "namespace" / f"{host}.init"


def request_secrets(request: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The values never written as they are: those of the request's Environment (and this machine's) named in
    TRAINOPS_MASK_VARIABLES, plus every request Environment value whose name looks like a secret."""
    from trainops.runtime.output_relay import MASK_VARIABLES, secret_values
    from trainops.spec.base import looks_secret

    environment = dict(request.get("Environment") or {})
    combined = {**environ, **environment}
    names = {name for name in f"{environ.get(MASK_VARIABLES, '')},{environment.get(MASK_VARIABLES, '')}".split(",")
             if name.strip()} | {name for name in environment if looks_secret(name)}
    combined[MASK_VARIABLES] = ",".join(sorted(names))
    return secret_values(combined)
