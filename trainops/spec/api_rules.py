"""Rules the SageMaker API's documentation states and its model's shapes cannot (the documentation strings of
botocore's service model, quoted in docs/spec.md), checked by `validate` with the other rules (registered into
`trainops.spec.rule_registry.RULES`). The limits the model's shapes state are checked on the whole request by
`trainops.backends.request.api_limits`, where what the launcher adds is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem
from trainops.spec.inputs import TrainingInput
from trainops.spec.rule_registry import rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

#: Instance families whose hosts have local NVMe instance-store volumes (Amazon EC2 User Guide, each family's
#: instance-store volumes; SageMaker, "Managing storage paths for different types of instance local storage": ml.p4d,
#: ml.g4dn and ml.g5 among them). Families the pages do not settle (g7, g7e) are left to the API.
LOCAL_STORAGE_FAMILIES = frozenset({
    "g4dn", "g5", "g6", "g6e", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200",
    "r5d", "trn1", "trn1n", "trn2",
})


def has_local_storage(instance_type: str | None) -> bool:
    """Whether ``instance_type``'s hosts have local NVMe storage (`LOCAL_STORAGE_FAMILIES`)."""
    parts = (instance_type or "").split(".")
    return len(parts) == 3 and parts[1] in LOCAL_STORAGE_FAMILIES


@rule("volume_kms_key", "instance_type", "instance_groups")
def no_volume_key_on_local_storage(spec: JobSpec) -> Iterator[Problem]:
    """No volume KMS key on instance types with local NVMe storage: the API's documentation of
    ResourceConfig.VolumeKmsKeyId ("You can't request a VolumeKmsKeyId when using an instance type with local
    storage"); the SDK sends it and the service refuses the job."""
    if not spec.volume_kms_key:
        return
    types: list[str | None] = [spec.instance_type, *(group.instance_type for group in spec.instance_groups or [])]
    local = sorted({name for name in types if name and has_local_storage(name)})
    if local:
        yield Problem("volume_kms_key", f"{', '.join(local)} keep the job's data on local NVMe storage, encrypted by "
                                        "the instance's own hardware; the API refuses a volume KMS key with such "
                                        "instance types (ResourceConfig.VolumeKmsKeyId): remove volume_kms_key or "
                                        "choose an instance type with EBS storage")


@rule("inputs", "input_mode")
def augmented_manifests_in_pipe_mode(spec: JobSpec) -> Iterator[Problem]:
    """An AugmentedManifestFile channel is read in Pipe mode only: the API's documentation of S3DataSource.S3DataType
    ("AugmentedManifestFile can only be used if the Channel's input mode is Pipe")."""
    for name, channel in spec.channels.items():
        if not isinstance(channel, TrainingInput):
            continue
        mode = channel.input_mode or spec.input_mode
        if channel.s3_data_type == "AugmentedManifestFile" and mode != "Pipe":
            yield Problem(f"inputs.{name}", f"an AugmentedManifestFile channel is read in {mode} mode; the API takes "
                                            "augmented manifests in Pipe mode only (S3DataSource.S3DataType): set "
                                            "input_mode: Pipe")
