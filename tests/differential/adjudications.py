"""The deliberate differences between trainops and its oracles, as rules the comparison applies.

Every rule is a section of ADJUDICATIONS.md (the test checks both lists match), where the AWS documentation that
decides it is cited. A rule says which cases it covers (`applies`, as narrow as the difference: the direction of an
accept/refuse split and the words of trainops' refusal) and what it removes from the comparison (`normalise`); after
it, the rest of the case must agree exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Check = Callable[[dict, Any, Any], bool]
Normalise = Callable[[dict, Any, Any], tuple]

#: Normalisations applied to every case (ADJUDICATIONS.md sections of the same names): fields the SDK adds that
#: trainops leaves out, and the S3 key of the uploaded code, which is the uploader's choice.
ALWAYS = ("debugger-hook", "code-location")


@dataclass(frozen=True)
class Rule:
    name: str
    applies: Check
    normalise: Normalise


def _same(case: dict, oracle: Any, ours: Any) -> tuple:
    return oracle, ours


def _refusal_agrees(case: dict, oracle: Any, ours: Any) -> tuple:
    """Count a refusal against an acceptance as settled: both become refusals."""
    oracle.accepted = ours.accepted = False
    return oracle, ours


def _ours_refuses_only(*patterns: str) -> Check:
    """The SDK accepts, trainops refuses, and every problem of trainops matches one of the patterns."""
    def check(case: dict, oracle: Any, ours: Any) -> bool:
        return (oracle.accepted and not ours.accepted and bool(ours.problems)
                and all(any(re.search(pattern, f"{path}: {message}") for pattern in patterns)
                        for path, message in ours.problems))
    return check


def _sdk_refuses(*patterns: str, case_ids: str = ".*") -> Check:
    """The SDK refuses with one of the patterns, trainops accepts."""
    def check(case: dict, oracle: Any, ours: Any) -> bool:
        return (not oracle.accepted and ours.accepted and re.match(case_ids, case["id"]) is not None
                and any(re.search(pattern, oracle.error) for pattern in patterns))
    return check


def _image_tag(old: str, new: str) -> Normalise:
    def normalise(case: dict, oracle: Any, ours: Any) -> tuple:
        image = oracle.value["AlgorithmSpecification"]["TrainingImage"]
        oracle.value["AlgorithmSpecification"]["TrainingImage"] = image.replace(old, new)
        return oracle, ours
    return normalise


def _smp_cuda(case: dict, oracle: Any, ours: Any) -> bool:
    return (oracle.accepted and ours.accepted and "smdistributed-modelparallel:2.0.1-gpu-py310-cu118"
            in oracle.value["AlgorithmSpecification"]["TrainingImage"])


def _default_checkpoint_path(case: dict, oracle: Any, ours: Any) -> bool:
    return (oracle.accepted and ours.accepted and "CheckpointConfig" in oracle.value
            and "LocalPath" not in oracle.value["CheckpointConfig"]
            and ours.value.get("CheckpointConfig", {}).get("LocalPath") == "/opt/ml/checkpoints")


def _drop_default_checkpoint_path(case: dict, oracle: Any, ours: Any) -> tuple:
    del ours.value["CheckpointConfig"]["LocalPath"]
    return oracle, ours


def _empty_distribution_on_instance_groups(case: dict, oracle: Any, ours: Any) -> bool:
    """`distribution: {}` with instance groups: the SDK validates the empty dict as a distribution on groups and
    refuses it; trainops reads it as no distribution, as a job without the key (which the SDK builds)."""
    return (case["spec"].get("distribution") == {} and bool(case["spec"].get("instance_groups"))
            and _sdk_refuses(r"Distribution should only contain one instance group name",
                             r"Don't set training instance groups while no distribution strategies enabled")(
                case, oracle, ours))


def _trainium_group_image(case: dict, oracle: Any, ours: Any) -> bool:
    """A heterogeneous cluster with a Trainium group and no GPU group: the SDK picks the first group's image (a CPU
    image when that group is CPU), trainops the Neuron image every group then runs."""
    types = [group["instance_type"] for group in case["spec"].get("instance_groups") or []]
    return (oracle.accepted and ours.accepted and any(name.startswith("ml.trn") for name in types)
            and not any(name.split(".")[1][0] in "gp" for name in types)
            and "-cpu-" in oracle.value["AlgorithmSpecification"]["TrainingImage"]
            and "neuron" in ours.value["AlgorithmSpecification"]["TrainingImage"])


def _take_our_image(case: dict, oracle: Any, ours: Any) -> tuple:
    oracle.value["AlgorithmSpecification"]["TrainingImage"] = ours.value["AlgorithmSpecification"]["TrainingImage"]
    return oracle, ours


def _version_beyond_the_sdk(case: dict, oracle: Any, ours: Any) -> bool:
    """The SDK's tables lack a version AWS's Deep Learning Containers list publishes (image_tables.json keeps it,
    `_generated.kept_beyond_the_sdk`); trainops builds the job in its published image."""
    import json
    from importlib import resources

    tables = json.loads(resources.files("trainops.spec").joinpath("image_tables.json").read_text())
    kept = tables["_generated"]["kept_beyond_the_sdk"].get(f"{case['spec'].get('framework', 'pytorch')} training")
    match = re.search(r"Unsupported (pytorch|tensorflow) version: ([0-9.]+)\.", oracle.error or "")
    return (not oracle.accepted and ours.accepted and match is not None and isinstance(kept, list)
            and match.group(2) in kept)


RENDER_RULES: list[Rule] = [
    Rule("image-versions-beyond-the-sdk", _version_beyond_the_sdk, _refusal_agrees),
    Rule("empty-distribution-on-instance-groups", _empty_distribution_on_instance_groups, _refusal_agrees),
    Rule("smddp-instance-types",
         _ours_refuses_only(r"SMDDP does not support ml\."), _refusal_agrees),
    Rule("smddp-and-torchrun-versions-beyond-the-sdk",
         _sdk_refuses(r"is not supported by smdataparallel", r"is not supported by torch_distributed for instance "
                      r"ml\.(p|g)"), _refusal_agrees),
    Rule("trainium-neuronx-images",
         _sdk_refuses(r"is not supported by torch_distributed for instance ml\.trn",
                      r"Unsupported Python version: py310.*Supported Python version\(s\): py38", case_ids=r"trn-"),
         _refusal_agrees),
    Rule("trainium-1.11-not-on-trn2",
         _ours_refuses_only(r"Trainium trn2 has no PyTorch 1\.11\.0 Neuron image"), _refusal_agrees),
    Rule("pytorchddp-before-1.11",
         _ours_refuses_only(r"pytorchddp needs PyTorch >= 1\.11"), _refusal_agrees),
    Rule("smp-gpu-only",
         _ours_refuses_only(r"SMP runs on NVIDIA GPU instances"), _refusal_agrees),
    Rule("file-system-needs-vpc",
         _ours_refuses_only(r"read a file system: give"), _refusal_agrees),
    Rule("api-documented-limits",
         _ours_refuses_only(r"^volume_kms_key: .* local NVMe storage", r"Pipe mode only \(S3DataSource",
                            r"the API's pattern", r"CreateTrainingJob takes at most",
                            r"not a SageMaker training instance type", r"is for Pipe mode; this channel is read in "
                            r"File mode", r"name attributes of an augmented manifest", r"is not one of the job's "
                            r"instance groups", r"aws: prefix is reserved", r"s3_data: String should have at most "
                            r"1024 characters"), _refusal_agrees),
    Rule("spot-and-warm-pool-limits",
         _ours_refuses_only(r"^max_wait: spot training needs max_wait", r"^max_wait: applies to spot training only",
                            r"^keep_alive_period_in_seconds: warm pools are not available for"), _refusal_agrees),
    Rule("duplicate-instance-group-names",
         _ours_refuses_only(r"^instance_groups: instance_group_name values must be unique"), _refusal_agrees),
    Rule("processes-per-host-the-sdk-drops",
         _ours_refuses_only(r"^distribution\.mpi\.processes_per_host: is not sent with (torch_distributed|pytorchddp) "
                            r"alone"), _refusal_agrees),
    Rule("smdistributed-with-mpi-enabled",
         _ours_refuses_only(r"^distribution\.mpi: smdistributed\.dataparallel brings its own mpirun",
                            r"^distribution\.mpi: smdistributed\.modelparallel runs under torch_distributed \(SMP v2\) "
                            r"or mpi \(SMP v1\), not both"), _refusal_agrees),
    Rule("environment-values-as-text",
         _sdk_refuses(r"Invalid type for parameter Environment\.[A-Za-z_0-9]+, value: .*valid types: <class 'str'>"),
         _refusal_agrees),
    Rule("heterogeneous-trainium-image", _trainium_group_image, _take_our_image),
    Rule("instance-type-shape",
         _ours_refuses_only(r"is not an instance type: expected ml\.<family>\.<size>"), _refusal_agrees),
    Rule("py-version-default",
         _sdk_refuses(r"framework_version or py_version was None"), _refusal_agrees),
    Rule("smp-v2-cuda", _smp_cuda, _image_tag("2.0.1-gpu-py310-cu118", "2.0.1-gpu-py310-cu121")),
    Rule("checkpoint-local-path", _default_checkpoint_path, _drop_default_checkpoint_path),
]

# sagemaker-training 5.1.4's EFA lists (sagemaker_training/__init__.py): the toolkit sets FI_PROVIDER / NCCL_PROTO /
# device RDMA only for these types; trainops' catalog follows AWS's EFA list ("efa-instance-types").
TOOLKIT_EFA = {"ml.g4dn.8xlarge", "ml.g4dn.12xlarge", "ml.g5.48xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge",
               "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.trn1.32xlarge", "ml.p6e-gb200.36xlarge"}
TOOLKIT_EFA_RDMA = {"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.trn1.32xlarge",
                    "ml.p6e-gb200.36xlarge"}
# sagemaker-training 4.8.3's lists (the release AWS's TensorFlow toolkit 20.5.0 pins): no p5e, p6e-gb200, and no
# device RDMA on p5.
TOOLKIT_4_8_EFA = TOOLKIT_EFA - {"ml.p5e.48xlarge", "ml.p6e-gb200.36xlarge"}
TOOLKIT_4_8_EFA_RDMA = {"ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.trn1.32xlarge"}
EFA_VARIABLES = ("FI_PROVIDER", "NCCL_PROTO", "FI_EFA_USE_DEVICE_RDMA", "RDMAV_FORK_SAFE")


def _tensorflow_case(case: dict) -> bool:
    """A case of the TensorFlow toolkit's grid (goldens/launch_tensorflow.json, on sagemaker-training 4.8.3)."""
    return case["id"].startswith("tf-")


def _efa_list_lags(case: dict, oracle: Any, ours: Any) -> bool:
    from trainops.runtime import catalog

    efa, rdma = (TOOLKIT_4_8_EFA, TOOLKIT_4_8_EFA_RDMA) if _tensorflow_case(case) else (TOOLKIT_EFA, TOOLKIT_EFA_RDMA)
    instance = catalog.lookup(case["instance_type"])
    return (ours.accepted and instance is not None
            and (instance.efa != (case["instance_type"] in efa)
                 or instance.gpudirect_rdma != (case["instance_type"] in rdma)))


def _without_efa_variables_trainops_adds(case: dict, oracle: Any, ours: Any) -> tuple:
    # Only what trainops adds beyond the toolkit's list goes: a variable both set must still agree.
    mine, theirs = ours.value["rank_env"], oracle.value["rank_env"]
    for name in EFA_VARIABLES:
        if name in mine and name not in theirs:
            del mine[name]
    if _pytorch_variables_in_tensorflow(case, oracle, ours):
        _without_pytorch_variables(case, oracle, ours)
    return _without_forwarded_rendezvous(case, oracle, ours)


#: What AWS's PyTorch container gives every process and trainops' runtime gives every job whatever its framework
#: (it cannot tell a TensorFlow image from a PyTorch one); the TensorFlow toolkit sets none of them for a process
#: it starts itself (its mpirun forwards NCCL_SOCKET_IFNAME, as trainops' does).
PYTORCH_CONTAINER_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME")


def _pytorch_variables_in_tensorflow(case: dict, oracle: Any, ours: Any) -> bool:
    return (_tensorflow_case(case) and ours.accepted and ours.value["mode"] == "plain"
            and any(name in ours.value["rank_env"] and name not in oracle.value["rank_env"]
                    for name in PYTORCH_CONTAINER_VARIABLES))


def _without_pytorch_variables(case: dict, oracle: Any, ours: Any) -> tuple:
    for name in PYTORCH_CONTAINER_VARIABLES:
        if name not in oracle.value["rank_env"]:
            ours.value["rank_env"].pop(name, None)
    return oracle, ours


def _forwards_rendezvous(case: dict, oracle: Any, ours: Any) -> bool:
    return (ours.accepted and ours.value["mode"] == "mpirun" and "MASTER_ADDR" in ours.value["rank_env"]
            and "MASTER_ADDR" not in oracle.value["rank_env"])


def _without_forwarded_rendezvous(case: dict, oracle: Any, ours: Any) -> tuple:
    if _forwards_rendezvous(case, oracle, ours):
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            ours.value["rank_env"].pop(name, None)
    return oracle, ours


LAUNCH_RULES: list[Rule] = [
    Rule("efa-instance-types", _efa_list_lags, _without_efa_variables_trainops_adds),
    Rule("mpi-rendezvous-forwarded", _forwards_rendezvous, _without_forwarded_rendezvous),
    Rule("pytorch-variables-in-tensorflow-jobs", _pytorch_variables_in_tensorflow, _without_pytorch_variables),
]


def all_names() -> list[str]:
    return [*ALWAYS, *(rule.name for rule in RENDER_RULES), *(rule.name for rule in LAUNCH_RULES)]


# The SDK v3 grid (v3_compare.py): its own deliberate difference, and the API's limits where v3 sends what the
# API refuses.
def _v3_uri_channel_mode(case: dict, oracle: Any, ours: Any) -> bool:
    mode = case["spec"].get("training_input_mode", "File")
    return oracle.accepted and ours.accepted and mode != "File" and any(
        isinstance(item.get("data_source"), str) for item in case["spec"].get("input_data_config", []))


def _without_v3_uri_channel_mode(case: dict, oracle: Any, ours: Any) -> tuple:
    uris = {item["channel_name"] for item in case["spec"]["input_data_config"] if isinstance(item["data_source"], str)}
    for channel in oracle.value.get("InputDataConfig") or []:
        if channel["ChannelName"] in uris:
            channel.pop("InputMode", None)
    return oracle, ours


#: Where v3 leaves a field out and trainops writes the value the API takes in its place (docs/spec.md, SDK v3
#: table, "v3-api-defaults-written"): request path -> that value.
_V3_API_DEFAULTS = {("StoppingCondition", "MaxRuntimeInSeconds"): 86400,
                    ("ResourceConfig", "KeepAlivePeriodInSeconds"): 0,
                    ("InfraCheckConfig", "EnableInfraCheck"): False}


def _v3_defaults_written(case: dict, oracle: Any, ours: Any) -> bool:
    if not (oracle.accepted and ours.accepted):
        return False
    request = ours.value["request"]
    written = any(key not in oracle.value.get(section, {}) and request.get(section, {}).get(key) == value
                  for (section, key), value in _V3_API_DEFAULTS.items())
    return written or any(
        "S3DataDistributionType" not in (channel["DataSource"].get("S3DataSource") or {"S3DataDistributionType": 1})
        for channel in oracle.value.get("InputDataConfig") or [])


def _without_v3_defaults_written(case: dict, oracle: Any, ours: Any) -> tuple:
    request = ours.value["request"]
    for (section, key), value in _V3_API_DEFAULTS.items():
        if key not in oracle.value.get(section, {}) and request.get(section, {}).get(key) == value:
            del request[section][key]
            if not request[section]:
                del request[section]
        if oracle.value.get(section) == {}:
            del oracle.value[section]  # v3's serializer sends an empty shape when its only field was false
    unset = {channel["ChannelName"] for channel in oracle.value.get("InputDataConfig") or []
             if "S3DataDistributionType" not in (channel["DataSource"].get("S3DataSource") or {"": 1})}
    for channel in request.get("InputDataConfig") or []:
        source = channel["DataSource"].get("S3DataSource") or {}
        if channel["ChannelName"] in unset and source.get("S3DataDistributionType") == "FullyReplicated":
            del source["S3DataDistributionType"]
    return oracle, ours


def _local_channels(case: dict) -> set[str]:
    return {item["channel_name"] for item in case["spec"].get("input_data_config") or []
            if isinstance(item.get("data_source"), str) and not item["data_source"].startswith("s3://")}


def _v3_local_channel_location(case: dict, oracle: Any, ours: Any) -> bool:
    return bool(_local_channels(case)) and oracle.accepted and ours.accepted


def _without_v3_local_channel_location(case: dict, oracle: Any, ours: Any) -> tuple:
    """trainops uploads a local channel under <output_path>/<job name>/input/<channel>/ (a file by its name), v3
    under its session's default bucket: where ours is that place, it counts as v3's (anywhere else still differs)."""
    request = ours.value["request"]
    output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    theirs = {channel["ChannelName"]: channel["DataSource"]["S3DataSource"]["S3Uri"]
              for channel in oracle.value.get("InputDataConfig") or [] if "S3DataSource" in channel["DataSource"]}
    for channel in request.get("InputDataConfig") or []:
        name = channel["ChannelName"]
        source = channel["DataSource"].get("S3DataSource") or {}
        if name in _local_channels(case) and source.get("S3Uri", "").startswith(
                f"{output}/{request['TrainingJobName']}/input/{name}/"):
            source["S3Uri"] = theirs.get(name, source["S3Uri"])
    return oracle, ours


V3_RULES: list[Rule] = [
    # docs/spec.md, SDK v3 differences: a local channel is uploaded under the output path, not a default bucket.
    Rule("v3-local-channel-location", _v3_local_channel_location, _without_v3_local_channel_location),
    # docs/spec.md, SDK v3 differences: a URI channel follows the job's FastFile / Pipe mode, not v3's File.
    Rule("v3-uri-channel-mode", _v3_uri_channel_mode, _without_v3_uri_channel_mode),
    # docs/spec.md, SDK v3 differences: a field v3 leaves out, trainops writes with the API's own default.
    Rule("v3-api-defaults-written", _v3_defaults_written, _without_v3_defaults_written),
    # docs/spec.md, SDK v3 differences: the trainops launcher's own hyperparameters and PYTHONPATH count against the
    # API's 100 entries; v3 carries its drivers' settings in its sm_drivers channel.
    Rule("v3-launcher-entries",
         _ours_refuses_only(r"^(hyperparameters|environment): .*CreateTrainingJob takes at most 100"), _refusal_agrees),
    # docs/spec.md, SDK v3 differences: no default bucket created, no role assumed; the user names them.
    Rule("v3-session-defaults", _ours_refuses_only(r"^output_data_config\.s3_output_path: is required .*SDK v3 "
                                                   r"would use its session's default bucket"), _refusal_agrees),
    Rule("api-documented-limits",
         _ours_refuses_only(r"^(compute\.volume_kms_key_id|volume_kms_key): .* local NVMe storage",
                            r"the API's pattern", r"not a SageMaker training instance type",
                            r"the API takes augmented manifests in Pipe mode only", r"aws: prefix is reserved",
                            r"SageMaker allows at most (50|100)\b", r"s3_data: String should have at most 1024",
                            r"^compute\.keep_alive_period_in_seconds: Input should be less than or equal to 21600",
                            r"^stopping_condition\.max_pending_time_in_seconds: Input should be"), _refusal_agrees),
]
