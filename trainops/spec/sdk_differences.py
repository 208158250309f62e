"""Where a spec's request deliberately differs from what the SageMaker Python SDK v2 sends, and the AWS source that
decides each difference.

Everything else agrees with the SDK case by case (tests/differential/). Each row here is one adjudication of
tests/differential/ADJUDICATIONS.md under the same name: the differential tests fail when a row has no rule, a rule
has no row, or a rule settles no golden case, so every difference is pinned by a case the SDK answered. docs/spec.md
shows the table (`trainops.spec.docs`).
"""

from __future__ import annotations

from typing import NamedTuple


class Difference(NamedTuple):
    name: str
    sdk: str  # what the SDK does
    trainops: str  # what trainops does instead
    source: str  # the AWS documentation or code that decides it


_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg"
_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference"
_DLC = "https://github.com/aws/deep-learning-containers/blob/master/available_images.md"

DIFFERENCES: tuple[Difference, ...] = (
    Difference("debugger-hook", "adds `DebugHookConfig` to every framework job",
               "sends none: the Debugger hook stays off", f"{_API}/API_CreateTrainingJob.html (optional field)"),
    Difference("code-location", "uploads `sourcedir.tar.gz` under the output bucket's root",
               "under `<output_path>/<job>/source/` (or `code_location`)",
               "https://github.com/aws/sagemaker-training-toolkit/blob/master/ENVIRONMENT_VARIABLES.md"),
    Difference("smddp-instance-types", "accepts SMDDP on every GPU and CPU type but p5 without torchrun",
               "refuses the types AWS does not list for SMDDP",
               f"{_GUIDE}/distributed-data-parallel-support.html"),
    Difference("smddp-and-torchrun-versions-beyond-the-sdk", "refuses SMDDP after PyTorch 2.2.0 and torch_distributed "
               "on versions missing from its hand list", "accepts the versions AWS publishes images for",
               f"{_GUIDE}/distributed-data-parallel-support.html; {_DLC}"),
    Difference("trainium-neuronx-images", "knows one Neuron image (PyTorch 1.11.0)",
               "resolves the `pytorch-training-neuronx` images AWS publishes", _DLC),
    Difference("trainium-1.11-not-on-trn2", "resolves the PyTorch 1.11.0 Neuron image for ml.trn2",
               "refuses it: that image predates Trainium2",
               "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/index.html"),
    Difference("pytorchddp-before-1.11", "accepts `pytorchddp` on PyTorch 1.10", "refuses it (DLCs v1.11 and later)",
               f"{_GUIDE}/data-parallel-framework-estimator.html"),
    Difference("smp-gpu-only", "accepts SMP v1 on CPU types", "refuses it: the library runs on NVIDIA GPUs",
               f"{_GUIDE}/distributed-model-parallel-support.html"),
    Difference("file-system-needs-vpc", "sends FSx / EFS channels without subnets and security groups",
               "refuses them: file systems are mounted over the VPC", f"{_API}/API_FileSystemDataSource.html"),
    Difference("spot-and-warm-pool-limits", "sends spot without `max_wait`, `max_wait` without spot, and warm pools "
               "with spot or instance groups", "refuses each, naming the field",
               f"{_GUIDE}/model-managed-spot-training.html; {_API}/API_StoppingCondition.html; "
               f"{_GUIDE}/train-warm-pools.html#train-warm-pools-considerations"),
    Difference("duplicate-instance-group-names", "sends two instance groups of one name",
               "refuses the duplicate: groups are known by name in the container",
               "https://github.com/aws/sagemaker-training-toolkit/blob/master/src/sagemaker_training/environment.py"),
    Difference("processes-per-host-the-sdk-drops", "drops `mpi.processes_per_host` beside `torch_distributed` or "
               "`pytorchddp` alone", "refuses it and names the typed form, which it sends",
               "https://github.com/aws/sagemaker-training-toolkit/blob/master/src/sagemaker_training/runner.py"),
    Difference("smdistributed-with-mpi-enabled", "sends `smdistributed` with `mpi` enabled (the toolkit then starts "
               "plain MPI)", "refuses the combination",
               "https://github.com/aws/sagemaker-pytorch-training-toolkit/blob/master/src/sagemaker_pytorch_container/"
               "training.py"),
    Difference("environment-values-as-text", "passes YAML numbers and booleans on (boto3 refuses the request)",
               "sends the text they spell", f"{_API}/API_CreateTrainingJob.html (Environment: string to string)"),
    Difference("heterogeneous-trainium-image", "picks the first group's image when no group has GPUs",
               "the Neuron image when a Trainium group exists (the GPU image whenever a GPU group does, as the SDK)",
               f"{_GUIDE}/train-heterogeneous-cluster.html"),
    Difference("api-documented-limits", "sends what CreateTrainingJob refuses: a volume KMS key on instance types "
               "with local NVMe storage, an augmented manifest outside Pipe mode, tags outside the API's pattern, more "
               "than 100 hyperparameters or environment variables once its own are added, S3 URIs over 1,024 "
               "characters, instance types the API does not list, an `aws:` tag key, compression or record wrapping "
               "in File mode, attribute names of a prefix, a channel's instance group the job lacks",
               "refuses each before anything is created (docs/spec.md, \"The API's own limits\")",
               f"{_API}/API_CreateTrainingJob.html; botocore's service model (trainops/spec/sagemaker_api.json)"),
    Difference("instance-type-shape", "accepts `ml.p4d` (no size)", "refuses it",
               f"{_API}/API_ResourceConfig.html"),
    Difference("py-version-default", "refuses a framework version without `py_version`",
               "takes the version's newest Python", _DLC),
    Difference("smp-v2-cuda", "tags the PyTorch 2.0.1 SMP v2 image cu118", "cu121, from the SMP release notes",
               f"{_GUIDE}/model-parallel-release-notes.html"),
    Difference("checkpoint-local-path", "leaves `CheckpointConfig.LocalPath` out",
               "sends `/opt/ml/checkpoints`, SageMaker's default", f"{_API}/API_CheckpointConfig.html"),
    Difference("image-versions-beyond-the-sdk", "refuses versions its tables lack", "builds them in the published "
               "images (TensorFlow 2.9.1 / 2.10.0, PyTorch 2.9.0)", _DLC),
    Difference("empty-distribution-on-instance-groups", "refuses `distribution: {}` with instance groups",
               "reads it as no distribution, as the SDK builds without the key",
               f"{_GUIDE}/train-heterogeneous-cluster.html"),
)


def names() -> list[str]:
    """Every difference's name (an adjudication of tests/differential/ADJUDICATIONS.md)."""
    return [difference.name for difference in DIFFERENCES]
