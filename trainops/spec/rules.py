"""Rules that need more than one field of the job spec.

Each rule is a named function returning `Problem`s (empty when the spec obeys it); `all_problems` runs them all so
the user sees every problem at once. The rules are the SageMaker SDK's own (`fw_utils.py`), plus the ones it misses
where current AWS documentation is clear (SMDDP instance types and versions, VPC settings for file-system inputs,
spot and warm-pool limits, secrets in hyperparameters). Checks that need AWS calls (subnet AZs, security-group rules,
FSx mount names) are the SageMaker backend's preflight.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem, SpecError
from trainops.runtime import catalog
from trainops.spec.base import looks_secret
from trainops.spec.distribution import (
    MPI,
    SMDDP,
    SMP,
    MultiWorkerMirroredStrategy,
    NoDistribution,
    ParameterServer,
    PyTorchDDP,
    PyTorchXLA,
    TorchDistributed,
)
from trainops.spec.images import is_version_at_least, resolve_training_image, smddp_supported_pytorch_versions
from trainops.spec.inputs import FileSystemInput
from trainops.spec.rule_registry import (  # noqa: F401 - re-exported
    RULES,
    SAGEMAKER_REQUEST,
    Rule,
    all_problems,
    applies,
    rule,
)
from trainops.spec.secrets import secret_held_by
from trainops.spec.smp import V2_DEGREE_KEYS

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

# The family may be hyphenated (ml.p6-b200.48xlarge, ml.p6e-gb200.36xlarge): AWS's current instance list.
INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9]+(-[a-z0-9]+)*\.[a-z0-9]+\Z")
RESERVED_HYPERPARAMETER = re.compile(r"^(sagemaker_|trainops_|mp_parameters$)")
# Minimum framework versions (AWS documentation; the SDK's tables lag behind).
TORCH_DISTRIBUTED_MINIMUM = "1.13"
TRAINIUM_TORCH_DISTRIBUTED_MINIMUM = "1.11"
PYTORCHDDP_MINIMUM = "1.11"  # the SDK's documentation: the PyTorch DLCs from v1.11 launch pytorchddp
SMP_V2_MINIMUM = "2.0"
MWMS_MINIMUM = "2.9"  # the SDK's _validate_mwms_config

def _version_at_least(version: str | None, minimum: str) -> bool:
    return version is None or is_version_at_least(version, minimum)


def _is_local(instance_type: str | None) -> bool:
    return instance_type is not None and catalog.is_local(instance_type)


def _accelerator(instance_type: str | None) -> str | None:
    info = catalog.lookup(instance_type) if instance_type else None
    return info.accelerator if info else None


def _is_trainium(instance_type: str | None) -> bool:
    return instance_type is not None and instance_type.startswith("ml.trn")


@rule("instance_type", "instance_groups")
def instance_type_is_given(spec: JobSpec) -> Iterator[Problem]:
    """instance_type or instance_groups (every engine: how many of what its job runs on)."""
    if spec.instance_groups and spec.instance_type:
        yield Problem("instance_groups", "give either instance_type/instance_count or instance_groups, not both")
    if not spec.instance_groups and not spec.instance_type:
        yield Problem("instance_type", "is required (e.g. ml.p4d.24xlarge, or local for this machine)")


@rule("instance_type", "instance_groups", binds=SAGEMAKER_REQUEST)
def instance_type_is_known(spec: JobSpec) -> Iterator[Problem]:
    """instance_type or instance_groups, well formed; unknown but well-formed ml.* types pass (new types appear)."""
    types = [("instance_type", spec.instance_type)] if spec.instance_type else []
    types += [(f"instance_groups.{index}.instance_type", group.instance_type)
              for index, group in enumerate(spec.instance_groups or [])]
    for path, name in types:
        if not catalog.is_local(name) and not INSTANCE_TYPE.match(name):
            yield Problem(path, f"{name!r} is not an instance type: expected ml.<family>.<size> (e.g. "
                                "ml.p4d.24xlarge), local or local_gpu")
    if spec.instance_groups:
        names = [group.instance_group_name for group in spec.instance_groups]
        if len(set(names)) != len(names):
            yield Problem("instance_groups", "instance_group_name values must be unique")


@rule("instance_groups", "instance_count")
def instance_count_is_not_the_groups(spec: JobSpec) -> Iterator[Problem]:
    """With instance_groups, instance_count is refused as the SDK refuses it (``_Job._prepare_resource_config``):
    each group gives its own hosts, and the count would be dropped from the request."""
    if spec.instance_groups and "instance_count" in spec.model_fields_set:
        yield Problem("instance_count", "cannot be set with instance_groups (each group's instance_count gives its "
                                        "hosts, and the SDK refuses both): remove instance_count")


@rule("distribution", "instance_groups", "framework")
def instance_groups_named_by_distribution_exist(spec: JobSpec) -> Iterator[Problem]:
    """The SDK's heterogeneous-cluster rules: the distribution names one of the job's instance groups."""
    wanted = spec.dist.instance_groups or []
    if not wanted:
        # With no strategy every host runs the script (AWS's heterogeneous-cluster example: a data group feeding a
        # training group); a strategy on several groups needs the one that runs it.
        if spec.instance_groups and len(spec.instance_groups) > 1 and not isinstance(spec.dist, NoDistribution):
            yield Problem("distribution.instance_groups",
                          "name the one instance group that runs the training (several groups are defined), e.g. "
                          "distribution: {torch_distributed: {enabled: true}, instance_groups: [gpus]}")
        yield from _strategy_runs_on_instance_groups(spec)
        return
    if isinstance(spec.dist, NoDistribution):
        yield Problem("distribution.instance_groups", "names instance groups but enables no strategy: enable one "
                                                      "(torch_distributed, mpi, smdistributed ...) or remove this")
        return
    if not spec.instance_groups:
        yield Problem("distribution.instance_groups", "the job defines no instance_groups: add them or remove this")
        return
    defined = {group.instance_group_name for group in spec.instance_groups}
    for name in wanted:
        if name not in defined:
            yield Problem("distribution.instance_groups", f"{name!r} is not one of {sorted(defined)}")
    if len(wanted) > 1:
        yield Problem("distribution.instance_groups", "only one instance group can run the distribution")
    yield from _strategy_runs_on_instance_groups(spec)


def _strategy_runs_on_instance_groups(spec: JobSpec) -> Iterator[Problem]:
    """The SDK runs only MPI and SMDDP (and, for PyTorch, plain torch_distributed) on instance groups; with one
    group it names that group itself, so the same holds there."""
    if not spec.instance_groups or isinstance(spec.dist, NoDistribution):
        return
    allowed = isinstance(spec.dist, (MPI, SMDDP, PyTorchDDP)) or (isinstance(spec.dist, SMP) and spec.dist.version == 1)
    if spec.framework == "pytorch" and isinstance(spec.dist, TorchDistributed):
        allowed = True
    if not allowed:
        yield Problem("distribution", f"{spec.dist.type} does not run on instance groups (the SDK launches only mpi "
                                      "and smdistributed.dataparallel there, and torch_distributed for PyTorch): "
                                      "use one of those, or instance_type / instance_count")


@rule("instance_type", "instance_groups", "distribution", "framework", binds=SAGEMAKER_REQUEST)
def trainium_runs_torch_distributed(spec: JobSpec) -> Iterator[Problem]:
    """On ml.trn* only PyTorch with torch_distributed (torchrun over NeuronCores) is supported."""
    instance_type = spec.training_instance_type()
    if not _is_trainium(instance_type):
        if getattr(spec.dist, "neuron_parallel_compile", False):
            yield Problem("distribution.neuron_parallel_compile", "applies to Trainium (ml.trn*) instances only")
        return
    others = sorted(set(spec.dist.sdk_form()) - {"torch_distributed", "instance_groups"})
    if spec.instance_groups and spec.dist.instance_groups and not isinstance(spec.dist, NoDistribution):
        # The SDK refuses a strategy on a named Trainium instance group (its Trainium check counts the group's name
        # as a second strategy); AWS's heterogeneous-cluster guide runs strategies on GPU groups only.
        yield Problem("distribution.instance_groups", f"names the Trainium group {spec.dist.instance_groups[0]!r}: a "
                                                      "strategy runs on GPU instance groups only (the SDK refuses it "
                                                      "on Trainium); train on Trainium with instance_type / "
                                                      "instance_count")
    elif not isinstance(spec.dist, (TorchDistributed, NoDistribution)):
        yield Problem("distribution", f"{spec.dist.type} is not supported on Trainium ({instance_type}): use "
                                      "torch_distributed (torchrun over NeuronCores)")
    elif others:
        # The SDK refuses these sections on Trainium even when disabled.
        yield Problem("distribution", f"{', '.join(others)}: not supported on Trainium ({instance_type}), even "
                                      "disabled; remove it and use torch_distributed (torchrun over NeuronCores)")
    if spec.framework != "pytorch":
        yield Problem("framework", "Trainium instances run PyTorch (torch-neuronx) only")


@rule("distribution", "entry_point")
def torch_distributed_runs_python(spec: JobSpec) -> Iterator[Problem]:
    """torch_distributed (torchrun, on every engine): a .py entry point."""
    if isinstance(spec.dist, TorchDistributed) and spec.entry_point and not spec.entry_point.endswith(".py"):
        yield Problem("entry_point", "torch_distributed runs Python programs only: the entry point must be a .py file")


@rule("instance_type", "instance_groups", "distribution", "framework", "framework_version", "image_uri",
      binds=SAGEMAKER_REQUEST)
def torch_distributed_needs_accelerators(spec: JobSpec) -> Iterator[Problem]:
    """torch_distributed as SageMaker runs it: GPU or Trainium instances, PyTorch >= 1.13."""
    if not isinstance(spec.dist, TorchDistributed):
        return
    if _is_trainium(spec.training_instance_type()):
        # Trainium's first Neuron image carries PyTorch 1.11.0 (trn1); the GPU rule (1.13) does not apply.
        yield from _needs_pytorch(spec, "torch_distributed on Trainium", TRAINIUM_TORCH_DISTRIBUTED_MINIMUM)
    else:
        yield from _needs_pytorch(spec, "torch_distributed", TORCH_DISTRIBUTED_MINIMUM)
    instance_type = spec.training_instance_type()
    if instance_type and not _is_local(instance_type) and _accelerator(instance_type) is None \
            and catalog.lookup(instance_type) is not None:
        yield Problem("instance_type", f"torch_distributed needs GPU or Trainium instances; {instance_type} has "
                                       "neither (use mpi for CPU fleets, or a p/g/trn instance type)")
    limit = _accelerators_per_host(instance_type)
    wanted = spec.dist.processes_per_host
    if wanted and limit and wanted > limit:
        yield Problem("distribution.processes_per_host",
                      f"{wanted} processes per host exceed the {limit} accelerators of {instance_type}")


@rule("distribution", "framework", "framework_version", "image_uri")
def pytorchddp_versions(spec: JobSpec) -> Iterator[Problem]:
    """pytorchddp: PyTorch >= 1.12 with a py3 image."""
    if isinstance(spec.dist, PyTorchDDP):
        yield from _needs_pytorch(spec, "pytorchddp", PYTORCHDDP_MINIMUM)


@rule("instance_type", "instance_groups", "distribution", "framework", "framework_version", "image_uri",
      binds=SAGEMAKER_REQUEST)
def smddp_supported(spec: JobSpec) -> Iterator[Problem]:
    """SMDDP: PyTorch only, on the instance types and PyTorch versions AWS documents."""
    if not isinstance(spec.dist, (SMDDP, PyTorchDDP)):
        return
    label = "smdistributed.dataparallel" if isinstance(spec.dist, SMDDP) else "pytorchddp"
    if spec.framework != "pytorch":
        yield Problem("framework", f"{label} (SMDDP) supports PyTorch only")
    instance_type = spec.training_instance_type()
    info = catalog.lookup(instance_type) if instance_type else None
    if instance_type and not _is_local(instance_type) and (info is None or not info.smddp_supported):
        supported = sorted(item.name for item in map(catalog.lookup, catalog.names()) if item and item.smddp_supported)
        yield Problem(f"distribution.{label}" if isinstance(spec.dist, SMDDP) else "distribution.pytorchddp",
                      f"SMDDP does not support {instance_type}; supported instance types: {', '.join(supported)}")
    if isinstance(spec.dist, SMDDP) and spec.framework_version and not spec.image_uri:
        versions = smddp_supported_pytorch_versions()
        if not any(_same_minor(spec.framework_version, version) for version in versions):
            yield Problem("framework_version", f"PyTorch {spec.framework_version} images do not carry SMDDP; "
                                               f"supported versions: {', '.join(versions)}")
    if isinstance(spec.dist, (SMDDP, PyTorchDDP)) and spec.image_uri:
        yield from _plain_dlc_without_smddp(spec)


# An AWS PyTorch training DLC named by its tag: <account>.dkr.ecr.<region>.<domain>/pytorch-training:<version>-gpu-...
_PYTORCH_DLC = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/pytorch-training:"
                          r"(?P<version>\d+\.\d+(\.\d+)?)-(?P<processor>gpu|cpu)-(?P<rest>.*)\Z")


def _plain_dlc_without_smddp(spec: JobSpec) -> Iterator[Problem]:
    """A user's image_uri that is an AWS PyTorch framework container without the SMDDP library: the CPU images, the
    versions AWS ships without SMDDP, and the 2.0.1 CUDA 12.1 build (the SDK's own exception)."""
    match = _PYTORCH_DLC.match(spec.image_uri or "")
    if match is None:
        return  # a custom or SMP image: the user vouches for its contents
    version, processor, rest = match["version"], match["processor"], match["rest"]
    versions = smddp_supported_pytorch_versions()
    carries = processor == "gpu" and any(_same_minor(version, supported) for supported in versions) \
        and not (version == "2.0.1" and rest.startswith("py310-cu121"))
    if not carries:
        yield Problem("image_uri", f"{spec.image_uri} is a PyTorch framework container without the SMDDP library "
                                   f"(SMDDP ships in the GPU images of PyTorch {', '.join(versions)}, not the "
                                   "2.0.1 CUDA 12.1 build); use one of those images, an SMP v2 image, or "
                                   "torch_distributed")


@rule("instance_type", "instance_groups", "distribution", "instance_count", "framework", "framework_version",
      "image_uri", binds=SAGEMAKER_REQUEST)
def smp_fits_the_fleet(spec: JobSpec) -> Iterator[Problem]:
    """SMP: GPU instances, PyTorch >= 2.0 for v2, degrees that divide the number of GPUs."""
    if not isinstance(spec.dist, SMP):
        return
    if spec.dist.version == 2:
        yield from _needs_pytorch(spec, "smdistributed.modelparallel (SMP v2)", SMP_V2_MINIMUM)
    instance_type = spec.training_instance_type()
    info = catalog.lookup(instance_type) if instance_type else None
    if info is not None and info.accelerator != "nvidia":
        yield Problem("instance_type", f"SMP runs on NVIDIA GPU instances; {instance_type} has none")
    per_host = spec.dist.processes_per_host or (info.gpus if info and info.gpus else None)
    if per_host is None:
        return  # local types without a stated process count: the runtime checks the degrees at launch
    world = per_host * spec.host_count()
    parameters = spec.dist.parameters
    remaining = world
    for key in V2_DEGREE_KEYS if spec.dist.version == 2 else ("tensor_parallel_degree", "pipeline_parallel_degree"):
        degree = parameters.get(key)
        if not isinstance(degree, int) or isinstance(degree, bool) or degree < 1:
            continue
        if key == "hybrid_shard_degree":
            if degree and remaining % degree:
                yield Problem(f"distribution.smdistributed.modelparallel.parameters.{key}",
                              f"{degree} must divide the {remaining} data-parallel ranks left after the other "
                              f"degrees ({world} GPUs in all)")
            continue
        if remaining % degree:
            yield Problem(f"distribution.smdistributed.modelparallel.parameters.{key}",
                          f"{degree} must divide the number of GPUs ({world} = {spec.host_count()} hosts x "
                          f"{per_host}){' after the other degrees' if remaining != world else ''}")
        else:
            remaining //= degree


@rule("instance_type", "instance_groups", "distribution", binds=SAGEMAKER_REQUEST)
def smdistributed_on_p5_needs_torch_distributed(spec: JobSpec) -> Iterator[Problem]:
    """On ml.p5.48xlarge the SMP and SMDDP libraries run only under torchrun (SMP v2, SMDDP AllGather); SMP v1 and
    SMDDP's mpirun path have no p5 build (the SDK's rule, from the libraries' release notes)."""
    instance_type = spec.training_instance_type() or ""
    if "p5.48xlarge" not in instance_type:
        return
    sdk = spec.dist.sdk_form()
    torchrun = bool((sdk.get("torch_distributed") or {}).get("enabled"))
    if "smdistributed" in sdk and not torchrun:
        label = "SMP v1 (mpirun)" if isinstance(spec.dist, SMP) else "smdistributed without torch_distributed"
        yield Problem("distribution", f"{label} does not run on {instance_type}: the libraries support p5 under "
                                      "torchrun only; add torch_distributed: {enabled: true} (SMP v2 / SMDDP "
                                      "AllGather) or pick ml.p4d.24xlarge")


@rule("instance_type", "instance_groups", "distribution", "framework", binds=SAGEMAKER_REQUEST)
def xla_and_tensorflow_strategies(spec: JobSpec) -> Iterator[Problem]:
    """pytorchxla needs PyTorch on GPUs; MultiWorkerMirroredStrategy needs TensorFlow."""
    if isinstance(spec.dist, PyTorchXLA):
        if spec.framework != "pytorch":
            yield Problem("framework", "pytorchxla needs the PyTorch framework")
        instance_type = spec.training_instance_type()
        if instance_type and catalog.lookup(instance_type) and _accelerator(instance_type) != "nvidia":
            yield Problem("instance_type", f"pytorchxla (Training Compiler) runs on GPU instances, not {instance_type}")
        elif instance_type and not _is_local(instance_type):
            # SageMaker runs PyTorch/XLA multi-worker only inside SageMaker Training Compiler images, enabled by the
            # SDK's compiler_config; trainops does not configure the compiler (the SDK refuses the same spec).
            yield Problem("distribution.pytorchxla",
                          "on SageMaker, pytorchxla needs SageMaker Training Compiler's configuration (the SDK's "
                          "compiler_config), which trainops does not set: use torch_distributed, or run pytorchxla "
                          "with instance_type local / local_gpu")
    if isinstance(spec.dist, MultiWorkerMirroredStrategy) and spec.framework != "tensorflow":
        yield Problem("framework", "multi_worker_mirrored_strategy is TensorFlow's: set framework: tensorflow")
    elif isinstance(spec.dist, MultiWorkerMirroredStrategy) and spec.framework_version \
            and not _version_at_least(spec.framework_version, MWMS_MINIMUM):
        yield Problem("framework_version", f"multi_worker_mirrored_strategy needs TensorFlow >= {MWMS_MINIMUM} (the "
                                           f"TensorFlow containers launch it from 2.9), got {spec.framework_version}")
    if isinstance(spec.dist, ParameterServer) and spec.framework != "tensorflow":
        yield Problem("framework", "parameter_server is TensorFlow's: set framework: tensorflow")
    if isinstance(spec.dist, MPI):
        limit = _accelerators_per_host(spec.training_instance_type())
        wanted = spec.dist.processes_per_host
        if wanted and limit and wanted > limit:
            yield Problem("distribution.mpi.processes_per_host",
                          f"{wanted} processes per host exceed the {limit} accelerators of the instance type")


@rule("inputs", "subnets", "security_group_ids")
def file_systems_need_a_vpc(spec: JobSpec) -> Iterator[Problem]:
    """FSx/EFS channels are mounted over the VPC: subnets and security groups are required (the SDK misses this).
    A FastFile or Pipe job may hold them: sent as the SDK sends it (no AWS source says the API refuses that)."""
    file_systems = [name for name, channel in spec.channels.items() if isinstance(channel, FileSystemInput)]
    if file_systems:
        if not spec.subnets:
            yield Problem("subnets", f"channel(s) {file_systems} read a file system: give the subnets of its VPC "
                                     "(one Availability Zone, the file system's)")
        if not spec.security_group_ids:
            yield Problem("security_group_ids", f"channel(s) {file_systems} read a file system: give a security "
                                                "group that allows Lustre (TCP 988, 1018-1023) / NFS (TCP 2049)")
    if bool(spec.subnets) != bool(spec.security_group_ids):
        missing = "security_group_ids" if spec.subnets else "subnets"
        yield Problem(missing, "subnets and security_group_ids go together (VpcConfig needs both)")


@rule("use_spot_instances", "max_wait", "max_run", "keep_alive_period_in_seconds", "instance_groups")
def spot_and_warm_pool_limits(spec: JobSpec) -> Iterator[Problem]:
    """Spot training needs max_wait >= max_run; max_wait is for spot only (the API: "the maximum length of time that a
    managed Spot training job has to complete"); warm pools work neither with spot instances nor with heterogeneous
    clusters (AWS, "SageMaker AI Managed Warm Pools", Considerations). The SDK passes all three on."""
    if spec.use_spot_instances:
        if spec.max_wait is None:
            yield Problem("max_wait", "spot training needs max_wait (seconds to wait for capacity plus run time), "
                                      f"at least max_run ({spec.max_run})")
        elif spec.max_wait < spec.max_run:
            yield Problem("max_wait", f"{spec.max_wait} is less than max_run ({spec.max_run}): it must be >= max_run")
        if spec.keep_alive_period_in_seconds:
            yield Problem("keep_alive_period_in_seconds", "warm pools are not available for managed spot training")
    if spec.keep_alive_period_in_seconds and spec.instance_groups:
        yield Problem("keep_alive_period_in_seconds", "warm pools are not available for heterogeneous clusters "
                                                      "(instance_groups): remove it, or use one instance type")
    if not spec.use_spot_instances and spec.max_wait is not None:
        yield Problem("max_wait", "applies to spot training only: set use_spot_instances: true or remove max_wait")


@rule("hyperparameters", "environment")
def no_secrets_in_hyperparameters(spec: JobSpec) -> Iterator[Problem]:
    """Hyperparameters are visible to anyone who can describe the job: no secrets there, by name or by value (a
    secret environment variable's value repeated as a hyperparameter would also be masked in every output of
    trainops, and the job would run with the mask)."""
    for key, value in spec.hyperparameters.items():
        held = secret_held_by(value if isinstance(value, str) else json.dumps(value, default=str), spec.environment)
        if looks_secret(key):
            yield Problem(f"hyperparameters.{key}",
                          "looks like a secret; hyperparameters are visible to anyone who can describe the job: pass "
                          "it through environment (masked in trainops output) or read it from AWS Secrets Manager")
        elif held:
            yield Problem(f"hyperparameters.{key}",
                          f"holds the value of the secret environment variable {held}; hyperparameters are "
                          "visible to anyone who can describe the job: read it from the environment in the script")


@rule("hyperparameters", "inputs")
def reserved_names(spec: JobSpec) -> Iterator[Problem]:
    """Framework keys and channels are trainops' and the toolkit's own."""
    for key in spec.hyperparameters:
        if RESERVED_HYPERPARAMETER.match(key):
            yield Problem(f"hyperparameters.{key}", "is reserved for the launcher (sagemaker_*, trainops_*, "
                                                    "mp_parameters): set it through the spec's own fields")
    for name in spec.inputs:
        if name.startswith("trainops_"):
            yield Problem(f"inputs.{name}", "channel names starting with trainops_ are reserved")


#: The strategies whose images (and the SDK's checks) are Python 3 only; MPI and parameter servers ran on the py2
#: images too, and a job without a strategy runs whatever the image's Python is.
PYTHON_3_ONLY = (TorchDistributed, PyTorchDDP, SMDDP, SMP, PyTorchXLA, MultiWorkerMirroredStrategy)


@rule("py_version", "distribution")
def python_3_images(spec: JobSpec) -> Iterator[Problem]:
    """The libraries' strategies need py3 images (the SDK's rule); other jobs take the version's Python versions,
    which the image tables check."""
    if spec.py_version and not spec.py_version.startswith("py3") and isinstance(spec.dist, PYTHON_3_ONLY):
        yield Problem("py_version", f"{spec.dist.type} runs on Python 3 images only, not {spec.py_version}")


@rule("launcher", "enable_network_isolation", "inputs")
def code_channel_is_free(spec: JobSpec) -> Iterator[Problem]:
    """The toolkit launcher under network isolation sends the code as a channel named ``code``."""
    yield from code_channel_problems(spec, spec.launcher)


def code_channel_problems(spec: JobSpec, launcher: str) -> list[Problem]:
    """A user channel named ``code`` where the toolkit launcher under network isolation needs that name for the code
    (the SDK refuses the duplicate channel). ``render`` asks again for the launcher it was given."""
    if launcher == "toolkit" and spec.enable_network_isolation and "code" in spec.inputs:
        return [Problem("inputs.code", "is the channel the code travels in under network isolation (toolkit "
                                       "launcher): rename this channel")]
    return []


@rule("framework", "framework_version", "py_version", "instance_type", "instance_groups", "distribution",
      "image_uri", "region", binds=SAGEMAKER_REQUEST)
def training_image_exists(spec: JobSpec) -> Iterator[Problem]:
    """The AWS image the job would run in exists for its framework, version, Python and instance type (in the
    spec's region, when it names one): the check ``render`` makes, so that ``validate`` gives the same verdict.
    Jobs with an image_uri, without a framework_version, or on this machine (local types) need no AWS image. It
    runs after the other rules and reports only where they did not."""
    instance_type = spec.image_instance_type()
    if spec.image_uri or not spec.framework_version or not instance_type or _is_local(instance_type):
        return

    try:
        resolve_training_image(spec.framework, spec.framework_version, spec.py_version, instance_type,
                               spec.region or "us-east-1", smp_v2=isinstance(spec.dist, SMP) and spec.dist.version == 2)
    except SpecError as error:
        for problem in error.problems:
            regional = problem.path == "region" or "was never published in region" in problem.message
            if spec.region or not regional:
                yield problem


training_image_exists.after_the_others = True  # type: ignore[attr-defined]


def _needs_pytorch(spec: JobSpec, label: str, minimum: str) -> Iterator[Problem]:
    if spec.framework != "pytorch":
        yield Problem("framework", f"{label} needs the PyTorch framework")
    elif not spec.image_uri and not _version_at_least(spec.framework_version, minimum):
        yield Problem("framework_version", f"{label} needs PyTorch >= {minimum}, got {spec.framework_version}")


def _accelerators_per_host(instance_type: str | None) -> int | None:
    info = catalog.lookup(instance_type) if instance_type else None
    if info is None:
        return None
    return info.gpus or info.neuron_cores or None


def _same_minor(version: str, supported: str) -> bool:
    return version.split(".")[:2] == supported.split(".")[:2] and (
        version.count(".") < 2 or supported.count(".") < 2 or version == supported)


# The SDK estimator options' rules register themselves in RULES (after the ones above, in report order).
from trainops.spec import api_rules as _api_rules  # noqa: E402,F401
from trainops.spec import channel_rules as _channel_rules  # noqa: E402,F401
from trainops.spec import estimator_rules as _estimator_rules  # noqa: E402,F401
from trainops.spec import v3_rules as _v3_rules  # noqa: E402,F401
