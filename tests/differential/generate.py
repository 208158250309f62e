"""Capture the oracles' answers for the differential tests: the SageMaker Python SDK v2 and AWS's training toolkits.

Runs in the oracle venv that build_oracle_venv.sh creates (never in trainops' venv; trainops never imports the SDK):

    tests/differential/build_oracle_venv.sh            # prints the venv path (~/.cache/trainops-oracle)
    ~/.cache/trainops-oracle/bin/python tests/differential/generate.py

Writes two goldens next to this file, each with the oracle package versions:
- goldens/render.json: for every estimator configuration of the render grid, the CreateTrainingJob request the SDK
  sends (captured offline: a session whose SageMaker client records `create_training_job`, code "uploads" that only
  compute their S3 key, no telemetry, no network) or the error the SDK raises;
- goldens/launch.json: for every container contract of the launch grid, the runner the PyTorch toolkit picks and the
  command and environment that runner would execute (its command builders are called; nothing is executed);
- goldens/launch_tensorflow.json (``--only tf-launch``, in the TensorFlow toolkit's own venv,
  build_oracle_venv.sh --tensorflow): the same for AWS's TensorFlow toolkit, plus the parameter server it would
  start (its cluster and task) and whether a worker host waits for the master; TensorFlow itself is replaced by an empty module
  (the toolkit imports it; the launch decisions never call it when the server start is captured).

Only the standard library and the oracle packages are used here; the tests read the goldens with trainops' venv.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import logging
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDENS = HERE / "goldens"
ROLE = "arn:aws:iam::123456789012:role/TrainopsOracle"
OUTPUT = "s3://trainops-oracle-out/jobs"
JOB = "oracle-job-1"
SUBNETS = ["subnet-0123456789abcdef0"]
GROUPS = ["sg-0123456789abcdef0"]
FSX = {"file_system_id": "fs-0123456789abcdef0", "file_system_type": "FSxLustre",
       "directory_path": "/fsx1/train", "file_system_access_mode": "ro"}

# ---------------------------------------------------------------------------------------------------------------
# The render grid: spec dicts in trainops' field names (the SDK estimator's), built axis by axis.

GPU_TYPES = ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge",
             "ml.p6-b200.48xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.g5.12xlarge", "ml.g5.48xlarge",
             "ml.g6.12xlarge", "ml.g6e.48xlarge"]
TRN_TYPES = ["ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge"]
CPU_TYPES = ["ml.c5.xlarge", "ml.m5.4xlarge"]

DISTRIBUTIONS = {
    "none": {},
    "torch_distributed": {"torch_distributed": {"enabled": True}},
    "pytorchddp": {"pytorchddp": {"enabled": True}},
    "pytorchddp_options": {"pytorchddp": {"enabled": True, "custom_mpi_options": "--NCCL_DEBUG INFO"}},
    "smddp": {"smdistributed": {"dataparallel": {"enabled": True}}},
    "smddp_options": {"smdistributed": {"dataparallel": {"enabled": True, "custom_mpi_options": "-x A=1"}}},
    "smddp_torchrun": {"smdistributed": {"dataparallel": {"enabled": True}}, "torch_distributed": {"enabled": True}},
    "smddp_disabled": {"smdistributed": {"dataparallel": {"enabled": False}}},
    "smp_v2": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 2,
                                                                                    "hybrid_shard_degree": 4}}},
               "torch_distributed": {"enabled": True}},
    "smp_v2_empty": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
                     "torch_distributed": {"enabled": True}},
    "smp_v1": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2,
                                                                                    "microbatches": 4}}},
               "mpi": {"enabled": True, "processes_per_host": 8}},
    "smp_disabled": {"smdistributed": {"modelparallel": {"enabled": False}}},
    "mpi": {"mpi": {"enabled": True}},
    "mpi_ppn_options": {"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-verbose"}},
    "mpi_disabled": {"mpi": {"enabled": False}},
    "pytorchxla": {"pytorchxla": {"enabled": True}},
    "parameter_server": {"parameter_server": {"enabled": True}},
    "mwms": {"multi_worker_mirrored_strategy": {"enabled": True}},
    "mpi_and_torch_distributed": {"mpi": {"enabled": True}, "torch_distributed": {"enabled": True}},
}

PYTORCH_VERSIONS = [("1.10.2", "py38"), ("1.11.0", "py38"), ("1.12.1", "py38"), ("1.13.1", "py39"),
                    ("2.0.1", "py310"), ("2.1.0", "py310"), ("2.2.0", "py310"), ("2.3.0", "py311"),
                    ("2.4.0", "py311"), ("2.5.1", "py311"), ("2.6.0", "py312"), ("2.7.1", "py312"),
                    ("2.8.0", "py312"), ("2.3", "py311"), ("3.0.0", "py312")]
TENSORFLOW_VERSIONS = [("2.11.0", "py39"), ("2.12.0", "py310"), ("2.13.0", "py310"), ("2.14.1", "py310"),
                       ("2.16.2", "py310"), ("2.19.0", "py312"), ("2.99.0", "py310")]


def _base(**overrides):
    spec = {"role": ROLE, "region": "us-east-1", "entry_point": "train.py", "framework": "pytorch",
            "framework_version": "2.2.0", "py_version": "py310", "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2, "output_path": OUTPUT, "hyperparameters": {"epochs": 3, "lr": 0.1},
            "inputs": {"train": "s3://trainops-oracle-data/train"}}
    spec.update(overrides)
    return spec


def render_grid() -> list[dict]:
    cases: list[dict] = []

    def add(case_id, spec):
        cases.append({"id": case_id, "spec": spec})

    # every distribution on every instance kind at a current version
    for name, distribution in DISTRIBUTIONS.items():
        for instance_type in GPU_TYPES + TRN_TYPES[:1] + TRN_TYPES[2:] + CPU_TYPES[:1]:
            framework = "tensorflow" if name in ("mwms", "parameter_server") else "pytorch"
            # versions every strategy of the SDK's tables accepts, so the grid compares more than refusals
            version, py = ("2.11.0", "py39") if framework == "tensorflow" else ("2.2.0", "py310")
            if instance_type.startswith("ml.trn"):
                version, py = ("1.11.0", "py38")
            add(f"dist-{name}-{instance_type}", _base(distribution=copy.deepcopy(distribution),
                                                      instance_type=instance_type, framework=framework,
                                                      framework_version=version, py_version=py))
    # framework versions across the range and just outside it, per launcher
    for version, py in PYTORCH_VERSIONS:
        for name in ("none", "torch_distributed", "pytorchddp", "smddp", "smp_v2", "mpi"):
            add(f"pt-{version}-{name}", _base(framework_version=version, py_version=py,
                                              distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    for version, py in TENSORFLOW_VERSIONS:
        for name in ("none", "parameter_server", "mwms", "mpi"):
            add(f"tf-{version}-{name}", _base(framework="tensorflow", framework_version=version, py_version=py,
                                              distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    for version in ("1.11.0", "1.13.1", "2.0.0", "2.1.2", "2.5.1", "2.7.0"):
        for instance_type in ("ml.trn1.32xlarge", "ml.trn2.48xlarge"):
            py = "py38" if version < "1.13" else "py310"
            add(f"trn-{version}-{instance_type}", _base(framework_version=version, py_version=py,
                                                        instance_type=instance_type,
                                                        distribution={"torch_distributed": {"enabled": True}}))
    # python versions
    for py in ("py38", "py310", "py311", "py2", None):
        add(f"py-{py}", _base(py_version=py))
    # image_uri given instead of resolved
    images = {
        "dlc": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
               "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker",
        "custom": "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-training:latest",
        "smp": "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.3.1-gpu-py311-cu121",
        "old-dlc": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:"
                   "2.0.0-gpu-py310-cu118-ubuntu20.04-sagemaker",
    }
    for image_name, image in images.items():
        for name in ("none", "torch_distributed", "smddp", "smp_v2", "mpi"):
            add(f"image-{image_name}-{name}", _base(image_uri=image, framework_version=None, py_version=None,
                                                    distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    # inputs
    inputs = {
        "s3-two": {"train": "s3://trainops-oracle-data/train", "test": "s3://trainops-oracle-data/test"},
        "training-input": {"train": {"s3_data": "s3://trainops-oracle-data/train", "distribution": "ShardedByS3Key",
                                     "input_mode": "FastFile", "content_type": "application/x-npy"}},
        "manifest": {"train": {"s3_data": "s3://trainops-oracle-data/train.manifest", "s3_data_type": "ManifestFile"}},
        "fsx": {"train": dict(FSX)},
        "efs": {"train": {"file_system_id": "fs-0123456789abcdef1", "file_system_type": "EFS",
                          "directory_path": "/data", "file_system_access_mode": "rw"}},
        "none": {},
        "file": {"train": "file:///tmp/data"},
        "many": {f"ch{index}": f"s3://trainops-oracle-data/c{index}" for index in range(5)},
    }
    for input_name, channels in inputs.items():
        for vpc in (True, False):
            extra = {"subnets": SUBNETS, "security_group_ids": GROUPS} if vpc else {}
            add(f"inputs-{input_name}-vpc{int(vpc)}", _base(inputs=copy.deepcopy(channels), **extra))
    for mode in ("File", "FastFile", "Pipe"):
        add(f"input-mode-{mode}", _base(input_mode=mode))
    # spot, warm pools, checkpoints, limits and the other request fields
    add("spot", _base(use_spot_instances=True, max_wait=172800, max_run=86400))
    add("spot-checkpoint", _base(use_spot_instances=True, max_wait=90000, max_run=3600,
                                 checkpoint_s3_uri="s3://trainops-oracle-out/ckpt"))
    add("checkpoint-local", _base(checkpoint_s3_uri="s3://trainops-oracle-out/ckpt",
                                  checkpoint_local_path="/opt/ml/ckpt"))
    add("warm-pool", _base(keep_alive_period_in_seconds=1800))
    add("warm-pool-zero", _base(keep_alive_period_in_seconds=0))
    add("retries", _base(max_retry_attempts=3))
    add("volume-kms", _base(volume_size=500, volume_kms_key="arn:aws:kms:us-east-1:123456789012:key/abc",
                            output_kms_key="arn:aws:kms:us-east-1:123456789012:key/def"))
    add("isolation", _base(enable_network_isolation=True, encrypt_inter_container_traffic=True))
    add("environment", _base(environment={"OMP_NUM_THREADS": "4", "NCCL_DEBUG": "INFO"}))
    add("tags", _base(tags=[{"Key": "team", "Value": "vision"}]))
    add("max-run-short", _base(max_run=600))
    add("metrics", _base(metric_definitions=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}]))
    add("single-host", _base(instance_count=1))
    add("many-hosts", _base(instance_count=16))
    for name, value in (("float-small", 1e-5), ("float-big", 1.5e10), ("string", "adam"), ("bool", True),
                        ("list", [1, 2, 3]), ("dict", {"a": 1}), ("int", 123), ("none", None)):
        add(f"hp-{name}", _base(hyperparameters={"value": value}))
    add("hp-internal", _base(hyperparameters={"_tuning_objective_metric": "loss", "epochs": 1}))
    # heterogeneous clusters
    groups = [{"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
              {"instance_group_name": "cpus", "instance_type": "ml.c5.18xlarge", "instance_count": 2}]
    for name in ("none", "torch_distributed", "smddp", "mpi", "pytorchddp"):
        distribution = copy.deepcopy(DISTRIBUTIONS[name])
        add(f"hetero-{name}-named", _base(instance_type=None, instance_count=None,
                                          instance_groups=copy.deepcopy(groups),
                                          distribution={**distribution, "instance_groups": ["gpus"]}))
        add(f"hetero-{name}-unnamed", _base(instance_type=None, instance_count=None,
                                            instance_groups=copy.deepcopy(groups), distribution=distribution))
    add("hetero-unknown-group", _base(instance_type=None, instance_count=None, instance_groups=copy.deepcopy(groups),
                                      distribution={"torch_distributed": {"enabled": True},
                                                    "instance_groups": ["tpus"]}))
    # instance type spellings
    for instance_type in ("ml.p6-b200.48xlarge", "ml.p6e-gb200.36xlarge", "ml.g6e.xlarge", "ml.r7i.large",
                          "p4d.24xlarge", "ml.p4d", "local", "local_gpu"):
        add(f"type-{instance_type}", _base(instance_type=instance_type, distribution={}))
    # malformed URIs
    for name, uri in (("s3-one-slash", "s3:/bkt/x"), ("file-host", "file://host/path"), ("http", "http://x/y"),
                      ("relative", "data/train")):
        add(f"uri-{name}", _base(inputs={"train": uri}))
    _issue_27_cases(add, groups)
    _issue_36_cases(add)
    _issue_46_cases(add)
    # tensorflow estimators: model_dir in every launcher
    for name in ("none", "parameter_server", "mwms", "mpi"):
        for count in (1, 2):
            add(f"tf-model-dir-{name}-{count}", _base(framework="tensorflow", framework_version="2.16.2",
                                                      py_version="py310", instance_count=count,
                                                      distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    return cases


#: Regions for the legacy images and the per-region version tables: the first regions, ones opened later (whose DLC
#: accounts differ and where old versions were never published), China and GovCloud.
REGIONS = ["us-east-1", "eu-west-1", "ap-east-1", "af-south-1", "me-south-1", "eu-south-1", "ap-southeast-5",
           "il-central-1", "cn-north-1", "us-gov-west-1"]
REGION_VERSIONS = [("pytorch", "0.4.0", "py3"), ("pytorch", "1.0.0", "py3"), ("pytorch", "1.0.0", "py2"),
                   ("pytorch", "1.1.0", "py3"), ("pytorch", "1.2.0", "py3"), ("pytorch", "1.10.2", "py38"),
                   ("pytorch", "2.2.0", "py310"), ("tensorflow", "1.10.0", "py2"), ("tensorflow", "1.11.0", "py3"),
                   ("tensorflow", "1.12.0", "py2"), ("tensorflow", "1.12.0", "py3"), ("tensorflow", "1.13.1", "py3"),
                   ("tensorflow", "1.14.0", "py3"), ("tensorflow", "2.11.0", "py39")]


def _issue_27_cases(add, groups: list[dict]) -> None:
    """Heterogeneous TensorFlow jobs, one instance group, a user channel named code, MultiWorkerMirroredStrategy's
    versions, Python 2 jobs, and legacy framework versions per region."""
    tensorflow = {"framework": "tensorflow", "framework_version": "2.16.2", "py_version": "py310"}
    hetero = {"instance_type": None, "instance_count": None}
    for name in ("none", "parameter_server", "mwms", "mpi"):
        distribution = copy.deepcopy(DISTRIBUTIONS[name])
        add(f"hetero-tf-{name}-named", _base(**tensorflow, **hetero, instance_groups=copy.deepcopy(groups),
                                             distribution={**distribution, "instance_groups": ["gpus"]}))
        add(f"hetero-tf-{name}-unnamed", _base(**tensorflow, **hetero, instance_groups=copy.deepcopy(groups),
                                               distribution=distribution))
    # no distribution at all (AWS's heterogeneous-cluster example: a data group feeding a training group)
    add("hetero-no-distribution", _base(**hetero, instance_groups=copy.deepcopy(groups)))
    add("hetero-tf-no-distribution", _base(**tensorflow, **hetero, instance_groups=copy.deepcopy(groups)))
    for name in ("none", "torch_distributed", "smddp", "mpi", "mpi_ppn_options"):
        add(f"one-group-{name}", _base(**hetero, instance_groups=copy.deepcopy(groups[:1]),
                                       distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    for name in ("parameter_server", "mwms", "mpi"):
        add(f"one-group-tf-{name}", _base(**tensorflow, **hetero, instance_groups=copy.deepcopy(groups[:1]),
                                          distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    code = {"train": "s3://trainops-oracle-data/train", "code": "s3://trainops-oracle-data/my-code"}
    add("isolation-code-channel", _base(enable_network_isolation=True, inputs=copy.deepcopy(code)))
    add("code-channel", _base(inputs=copy.deepcopy(code)))
    for version, py in (("2.4.1", "py37"), ("2.8.0", "py39"), ("2.9.1", "py39"), ("2.10.0", "py39")):
        for name in ("mwms", "parameter_server"):
            add(f"tf-{version}-{name}", _base(**{**tensorflow, "framework_version": version, "py_version": py},
                                              distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    add("mwms-and-parameter-server", _base(**tensorflow, distribution={**DISTRIBUTIONS["mwms"],
                                                                       **DISTRIBUTIONS["parameter_server"]}))
    for framework, version, names in (("pytorch", "1.4.0", ("none", "mpi", "torch_distributed")),
                                      ("tensorflow", "2.1.0", ("none", "mpi", "parameter_server")),
                                      ("tensorflow", "2.1.1", ("none",)), ("tensorflow", "2.2.0", ("none",)),
                                      ("tensorflow", "1.15.2", ("none", "parameter_server"))):
        for name in names:
            add(f"py2-{framework}-{version}-{name}", _base(framework=framework, framework_version=version,
                                                           py_version="py2", instance_type="ml.p3.16xlarge",
                                                           distribution=copy.deepcopy(DISTRIBUTIONS[name])))
    for region in REGIONS:
        for framework, version, py in REGION_VERSIONS:
            for instance_type in ("ml.p3.2xlarge", "ml.m5.xlarge"):
                add(f"region-{region}-{framework}-{version}-{py}-{instance_type}",
                    _base(region=region, framework=framework, framework_version=version, py_version=py,
                          instance_type=instance_type, instance_count=1, distribution={}))


#: Issue 36's instance groups: GPU, CPU and Trainium groups of two hosts each.
GROUPS_36 = {"gpu": {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
             "gpu2": {"instance_group_name": "gpus2", "instance_type": "ml.g5.12xlarge", "instance_count": 2},
             "cpu": {"instance_group_name": "cpus", "instance_type": "ml.c5.18xlarge", "instance_count": 2},
             "trn": {"instance_group_name": "trns", "instance_type": "ml.trn1.32xlarge", "instance_count": 2}}


def _issue_46_cases(add) -> None:
    """Issue 46 (ids ``h46-``): every TrainingInput option and experiment_config, and requests the API refuses that
    the SDK sends (the API's own limits: volume keys on local NVMe storage, tags outside the pattern, augmented
    manifests outside Pipe mode, 101 hyperparameter entries once the SDK's are added, S3 URIs over 1,024, an unknown
    instance type, the warm pool's new maximum)."""
    data = "s3://trainops-oracle-data/train"
    groups = [{"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
              {"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "instance_count": 1}]
    manifest = {"s3_data": "s3://trainops-oracle-data/train.manifest", "s3_data_type": "AugmentedManifestFile",
                "attribute_names": ["source-ref", "label"]}
    for mode in ("Pipe", "FastFile", "File"):
        add(f"h46-gzip-{mode}", _base(input_mode=mode, inputs={"train": {"s3_data": data, "compression": "Gzip"}}))
        add(f"h46-recordio-{mode}", _base(input_mode=mode, inputs={"train": {"s3_data": data,
                                                                             "record_wrapping": "RecordIO"}}))
        add(f"h46-augmented-{mode}", _base(input_mode=mode, inputs={"train": dict(manifest)}))
    add("h46-shuffle", _base(inputs={"train": {"s3_data": data, "shuffle_config": {"seed": 7}}}))
    add("h46-shuffle-sharded", _base(inputs={"train": {"s3_data": data, "distribution": "ShardedByS3Key",
                                                       "shuffle_config": {"seed": 42}}}))
    add("h46-attributes-on-prefix", _base(inputs={"train": {"s3_data": data, "attribute_names": ["a"]}}))
    add("h46-channel-groups", _base(instance_type=None, instance_count=None, instance_groups=copy.deepcopy(groups),
                                    inputs={"train": {"s3_data": data, "instance_groups": ["gpus"]},
                                            "meta": {"s3_data": data, "instance_groups": ["cpus"]}}))
    add("h46-channel-unknown-group", _base(instance_type=None, instance_count=None,
                                           instance_groups=copy.deepcopy(groups),
                                           inputs={"train": {"s3_data": data, "instance_groups": ["tpus"]}}))
    add("h46-experiment", _base(experiment_config={"ExperimentName": "bert", "TrialName": "trial-1",
                                                   "TrialComponentDisplayName": "train", "RunName": "run-7"}))
    add("h46-volume-kms-nvme", _base(volume_kms_key="alias/vol"))
    add("h46-volume-kms-ebs", _base(instance_type="ml.p3.16xlarge", volume_kms_key="alias/vol"))
    add("h46-tag-pattern", _base(tags=[{"Key": "team#1", "Value": "x"}]))
    add("h46-tag-aws-prefix", _base(tags=[{"Key": "aws:owner", "Value": "x"}]))
    add("h46-hyperparameters-100", _base(hyperparameters={f"h{index}": index for index in range(100)}))
    add("h46-hyperparameters-95", _base(hyperparameters={f"h{index}": index for index in range(95)}))
    add("h46-s3-uri-1025", _base(inputs={"train": {"s3_data": "s3://trainops-oracle-data/" + "k" * 1000}}))
    add("h46-unknown-instance-type", _base(instance_type="ml.g5.xxlarge", instance_count=1))
    add("h46-warm-pool-21600", _base(keep_alive_period_in_seconds=21600))
    add("h46-fsx-fastfile", _base(input_mode="FastFile", subnets=["subnet-0a1b2c3d"], security_group_ids=[
        "sg-0a1b2c3d"], inputs={"train": {"file_system_id": "fs-0123456789abcdef0", "file_system_type": "FSxLustre",
                                          "directory_path": "/fsx/data", "file_system_access_mode": "ro"}}))


def _issue_36_cases(add) -> None:
    """Heterogeneous clusters x every distribution (group orders, named or not, an explicit instance_count,
    duplicate names), spot x warm pools x checkpoints, file-system channels x input modes, processes per host with
    every launcher, environment values that are not text, and the profiler by region and instance type."""
    hetero = {"instance_type": None, "instance_count": None}
    for order in (("cpu", "gpu"), ("gpu", "cpu"), ("cpu", "gpu2", "gpu"), ("cpu", "trn"), ("trn", "cpu")):
        groups = [copy.deepcopy(GROUPS_36[name]) for name in order]
        runner = next(group["instance_group_name"] for group in groups if group["instance_type"] != "ml.c5.18xlarge")
        for name, distribution in DISTRIBUTIONS.items():
            tensorflow = name in ("mwms", "parameter_server")
            versions = {"framework": "tensorflow", "framework_version": "2.16.2", "py_version": "py310"} \
                if tensorflow else {}
            if "trn" in order:
                versions = {"framework_version": "1.11.0", "py_version": "py38"}  # the SDK's only Neuron image
            label = "-".join(order)
            add(f"h36-{label}-{name}-named", _base(**hetero, **versions, instance_groups=copy.deepcopy(groups),
                                                   distribution={**copy.deepcopy(distribution),
                                                                 "instance_groups": [runner]}))
            if not distribution:
                add(f"h36-{label}-no-distribution", _base(**hetero, **versions, instance_groups=copy.deepcopy(groups)))
    gpu, cpu = GROUPS_36["gpu"], GROUPS_36["cpu"]
    for count in (1, 2):
        add(f"h36-instance-count-{count}", _base(instance_type=None, instance_count=count,
                                                 instance_groups=[copy.deepcopy(cpu), copy.deepcopy(gpu)]))
    add("h36-instance-type-too", _base(instance_count=None, instance_groups=[copy.deepcopy(cpu), copy.deepcopy(gpu)]))
    add("h36-duplicate-names", _base(**hetero, instance_groups=[copy.deepcopy(gpu), copy.deepcopy(gpu)]))
    add("h36-duplicate-names-mpi", _base(**hetero, instance_groups=[copy.deepcopy(gpu), copy.deepcopy(gpu)],
                                         distribution={"mpi": {"enabled": True}, "instance_groups": ["gpus"]}))
    add("h36-warm-pool", _base(**hetero, instance_groups=[copy.deepcopy(cpu), copy.deepcopy(gpu)],
                               keep_alive_period_in_seconds=1800))
    # spot x warm pools x checkpoints (x max_wait)
    for spot in (False, True):
        for keep_alive in (None, 0, 1800):
            for checkpoint in ("none", "s3", "s3-local"):
                for max_wait in (None, 7200):
                    extra = {"use_spot_instances": spot, "max_run": 3600}
                    if keep_alive is not None:
                        extra["keep_alive_period_in_seconds"] = keep_alive
                    if checkpoint != "none":
                        extra["checkpoint_s3_uri"] = "s3://trainops-oracle-out/ckpt"
                    if checkpoint == "s3-local":
                        extra["checkpoint_local_path"] = "/opt/ml/ckpt"
                    if max_wait is not None:
                        extra["max_wait"] = max_wait
                    add(f"s36-spot{int(spot)}-keep{keep_alive}-ckpt-{checkpoint}-wait{max_wait}", _base(**extra))
    # file-system channels x input modes (job-wide and, for S3 beside them, per channel)
    efs = {"file_system_id": "fs-0123456789abcdef1", "file_system_type": "EFS", "directory_path": "/data",
           "file_system_access_mode": "rw"}
    vpc = {"subnets": SUBNETS, "security_group_ids": GROUPS}
    for system, channel in (("fsx", FSX), ("efs", efs)):
        for mode in ("File", "FastFile", "Pipe"):
            add(f"f36-{system}-{mode}", _base(input_mode=mode, inputs={"train": dict(channel)}, **vpc))
            add(f"f36-{system}-{mode}-with-s3", _base(input_mode=mode, **vpc, inputs={
                "train": dict(channel), "test": {"s3_data": "s3://trainops-oracle-data/test", "input_mode": mode}}))
        add(f"f36-{system}-File-s3-fastfile", _base(**vpc, inputs={
            "train": dict(channel), "test": {"s3_data": "s3://trainops-oracle-data/test", "input_mode": "FastFile"}}))
    # processes per host (the SDK's mpi section) with every launcher, on GPU, Trainium and CPU types
    with_ppn = {
        "torch_distributed": {"torch_distributed": {"enabled": True}},
        "smddp": {"smdistributed": {"dataparallel": {"enabled": True}}},
        "smddp_torchrun": {"smdistributed": {"dataparallel": {"enabled": True}}, "torch_distributed": {"enabled": True}},
        "smp_v2": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 2}}},
                   "torch_distributed": {"enabled": True}},
        "pytorchddp": {"pytorchddp": {"enabled": True}},
        "pytorchxla": {"pytorchxla": {"enabled": True}},
        "none": {},
    }
    for name, distribution in with_ppn.items():
        for enabled in (False, True):
            for instance_type in ("ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.c5.xlarge"):
                versions = {"framework_version": "1.11.0", "py_version": "py38"} \
                    if instance_type.startswith("ml.trn") else {}
                mpi = {"enabled": enabled, "processes_per_host": 4}
                add(f"p36-{name}-mpi{int(enabled)}-{instance_type}",
                    _base(instance_type=instance_type, **versions, distribution={**copy.deepcopy(distribution),
                                                                                 "mpi": mpi}))
    # environment values as YAML gives them, and the profiler by region and instance type
    for name, value in (("bool", True), ("int", 4), ("float", 0.5), ("text", "4")):
        add(f"e36-environment-{name}", _base(environment={"VALUE": value}))
    for region in ("us-east-1", "ap-southeast-3", "eu-central-2"):
        for disabled in (False, True):
            add(f"r36-profiler-{region}-disabled{int(disabled)}", _base(region=region, disable_profiler=disabled))
    for instance_type, versions in (("ml.trn1.32xlarge", {"framework_version": "1.11.0", "py_version": "py38"}),
                                    ("ml.c5.xlarge", {})):
        add(f"r36-profiler-{instance_type}", _base(instance_type=instance_type, **versions,
                                                   distribution={"torch_distributed": {"enabled": True}}
                                                   if instance_type.startswith("ml.trn") else {}))


# ---------------------------------------------------------------------------------------------------------------
# Running the SDK offline.

def _quiet_sdk():
    """No telemetry calls and no config lookups on the network; quiet logs."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    from sagemaker.telemetry import telemetry_logging

    telemetry_logging._send_telemetry_request = lambda *args, **kwargs: None
    logging.disable(logging.WARNING)


class RecordingClient:
    """A SageMaker client that records create_training_job and answers nothing else. It validates the request against
    botocore's model first, as the real client does before it sends anything (a request boto3 refuses is the SDK's
    refusal too)."""

    def __init__(self):
        import botocore.session

        self.requests = []
        model = botocore.session.get_session().get_service_model("sagemaker")
        self._shape = model.operation_model("CreateTrainingJob").input_shape

    def create_training_job(self, **request):
        from botocore.exceptions import ParamValidationError
        from botocore.validate import ParamValidator

        report = ParamValidator().validate(request, self._shape)
        if report.has_errors():
            raise ParamValidationError(report=report.generate_report())
        self.requests.append(request)
        return {"TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{request['TrainingJobName']}"}


def _session(client, region):
    import boto3
    from sagemaker.session import Session

    boto_session = boto3.Session(region_name=region, aws_access_key_id="AKIDORACLE", aws_secret_access_key="oracle")
    return Session(boto_session=boto_session, sagemaker_client=client, default_bucket="trainops-oracle-default")


def _no_upload():
    """Code "upload" that computes the S3 key the SDK would write and uploads nothing."""
    import sagemaker.estimator as estimator_module
    import sagemaker.fw_utils as fw_utils

    def tar_and_upload_dir(session, bucket, s3_key_prefix, script, directory=None, **kwargs):
        return fw_utils.UploadedCode(s3_prefix=f"s3://{bucket}/{s3_key_prefix}/sourcedir.tar.gz", script_name=script)

    estimator_module.tar_and_upload_dir = tar_and_upload_dir


def _sdk_input(value):
    from sagemaker.inputs import FileSystemInput, TrainingInput

    if isinstance(value, str):
        return value
    if "file_system_id" in value:
        return FileSystemInput(**value)
    if "shuffle_config" in value:
        from sagemaker.inputs import ShuffleConfig

        value = {**value, "shuffle_config": ShuffleConfig(value["shuffle_config"]["seed"])}
    return TrainingInput(**value)


def run_sdk(spec: dict, source_dir: str) -> dict:
    spec = copy.deepcopy(spec)  # the SDK adds its own keys to the hyperparameters dict it is given
    from sagemaker.instance_group import InstanceGroup
    from sagemaker.pytorch import PyTorch
    from sagemaker.tensorflow import TensorFlow

    client = RecordingClient()
    stage = "estimator"
    try:
        session = _session(client, spec.get("region") or "us-east-1")
        kwargs = {key: value for key, value in spec.items()
                  if key not in ("framework", "region", "inputs", "instance_groups", "experiment_config")
                  and value is not None}
        if spec.get("instance_groups"):
            kwargs["instance_groups"] = [InstanceGroup(**group) for group in spec["instance_groups"]]
            named = (spec.get("distribution") or {}).get("instance_groups")
            if named:  # the SDK takes InstanceGroup objects where the spec names the groups
                by_name = {group.instance_group_name: group for group in kwargs["instance_groups"]}
                unknown = InstanceGroup  # a group the estimator does not define: the SDK's own refusal
                kwargs["distribution"] = {**spec["distribution"],
                                          "instance_groups": [by_name.get(name, unknown(name, "ml.p4d.24xlarge", 1))
                                                              for name in named]}
        if spec.get("subnets"):
            kwargs["subnets"] = spec["subnets"]
        kwargs["source_dir"] = source_dir
        estimator_class = TensorFlow if spec.get("framework") == "tensorflow" else PyTorch
        estimator = estimator_class(sagemaker_session=session, **kwargs)
        stage = "fit"
        inputs = {name: _sdk_input(value) for name, value in (spec.get("inputs") or {}).items()}
        with contextlib.redirect_stdout(io.StringIO()):
            estimator.fit(inputs or None, wait=False, logs=False, job_name=JOB,
                          experiment_config=spec.get("experiment_config"))
    except Exception as error:  # the oracle's refusal is the answer
        return {"accepted": False, "stage": stage, "error": f"{type(error).__name__}: {error}"[:600]}
    return {"accepted": True, "request": client.requests[0]}


# ---------------------------------------------------------------------------------------------------------------
# The launch grid: container contracts for the PyTorch toolkit.

LAUNCH_TYPES = {  # instance type -> (GPUs the container sees, NeuronCores)
    "ml.p4d.24xlarge": (8, 0), "ml.p5.48xlarge": (8, 0), "ml.p6-b200.48xlarge": (8, 0), "ml.g5.12xlarge": (4, 0),
    "ml.g5.48xlarge": (8, 0), "ml.g6.12xlarge": (4, 0), "ml.g5.xlarge": (1, 0), "ml.p3.16xlarge": (8, 0),
    "ml.trn1.32xlarge": (0, 32), "ml.trn2.48xlarge": (0, 64), "ml.c5.xlarge": (0, 0),
}
LAUNCH_HYPERPARAMETERS = {
    "none": {},
    "torch_distributed": {"sagemaker_torch_distributed_enabled": True},
    "mpi": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""},
    "mpi_ppn": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
                "sagemaker_mpi_custom_mpi_options": "--NCCL_DEBUG INFO -verbose"},
    "smddp": {"sagemaker_distributed_dataparallel_enabled": True,
              "sagemaker_distributed_dataparallel_custom_mpi_options": ""},
    "pytorchddp": {"sagemaker_pytorch_ddp_enabled": True},
    "smp_v2": {"sagemaker_torch_distributed_enabled": True, "mp_parameters": {"tensor_parallel_degree": 2},
               "sagemaker_distributed_dataparallel_enabled": False},
    "mpi_and_torch_distributed": {"sagemaker_mpi_enabled": True, "sagemaker_torch_distributed_enabled": True,
                                  "sagemaker_mpi_custom_mpi_options": ""},
}


def launch_grid() -> list[dict]:
    return (homogeneous_launch_grid() + hetero_launch_grid(PYTORCH_HETERO) + processes_per_host_grid()
            + sdk_hetero_torchrun_grid())


def sdk_hetero_torchrun_grid() -> list[dict]:
    """torch_distributed on instance groups as the SDK sends it: without sagemaker_distribution_instance_groups (its
    PyTorch estimator sends torch_distributed's own keys only), so the toolkit runs torchrun in each host's group."""
    cases = hetero_launch_grid({"torch_distributed": {"sagemaker_torch_distributed_enabled": True}})
    for case in cases:
        case["hyperparameters"].pop("sagemaker_distribution_instance_groups", None)
        case["id"] = case["id"].replace("hetero-", "sdk-hetero-", 1)
    return cases


#: Issue 36: the SDK's processes-per-host setting (sagemaker_mpi_num_of_processes_per_host, sent with the mpi
#: section) beside every launcher the toolkit gives it to, on GPU, Trainium and CPU types. (PyTorch/XLA's runner
#: counts GPUs itself, xla_spawn --num_gpus, and trainops runs PyTorch/XLA on this machine only.)
PPN_LAUNCHERS = {
    "torch_distributed": {"sagemaker_torch_distributed_enabled": True},
    "smddp": {"sagemaker_distributed_dataparallel_enabled": True,
              "sagemaker_distributed_dataparallel_custom_mpi_options": ""},
    "smddp_torchrun": {"sagemaker_distributed_dataparallel_enabled": True, "sagemaker_torch_distributed_enabled": True,
                       "sagemaker_mpi_enabled": False, "sagemaker_mpi_custom_mpi_options": ""},
    "pytorchddp": {"sagemaker_pytorch_ddp_enabled": True},
    "smp_v2": {"sagemaker_torch_distributed_enabled": True, "mp_parameters": {"tensor_parallel_degree": 2},
               "sagemaker_distributed_dataparallel_enabled": False, "sagemaker_mpi_enabled": False,
               "sagemaker_mpi_custom_mpi_options": ""},
    "mpi": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""},
    "none": {},
}


def processes_per_host_grid() -> list[dict]:
    cases = []
    for name, framework in PPN_LAUNCHERS.items():
        for instance_type in ("ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.c5.xlarge"):
            gpus, cores = LAUNCH_TYPES.get(instance_type, (8, 0))
            if name.startswith(("smddp", "pytorchddp", "smp")) and gpus == 0:
                continue
            for hosts, current in ((["algo-1"], "algo-1"), (["algo-1", "algo-2"], "algo-1"),
                                   (["algo-1", "algo-2"], "algo-2")):
                hyperparameters = {"epochs": 3, "lr": 0.1, **framework,
                                   "sagemaker_mpi_num_of_processes_per_host": 4 if gpus else 16 if cores else 2}
                cases.append({"id": f"ppn-{name}-{instance_type}-{len(hosts)}-{current}", "hosts": hosts,
                              "current_host": current, "instance_type": instance_type, "gpus": gpus,
                              "neuron_cores": cores, "hyperparameters": hyperparameters, "channels": ["train"]})
    return cases


#: Heterogeneous clusters: a GPU group and a CPU (data-loading) group, either listed first; the distribution names the
#: GPU group (as the SDK sends it, sagemaker_distribution_instance_groups) or no strategy is enabled.
HETERO_GROUPS = {"gpus": ("ml.p4d.24xlarge", 2, 8), "cpus": ("ml.c5.18xlarge", 1, 0)}
PYTORCH_HETERO = {
    "none": {},
    "torch_distributed": {"sagemaker_torch_distributed_enabled": True},
    "mpi": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""},
    "smddp": {"sagemaker_distributed_dataparallel_enabled": True,
              "sagemaker_distributed_dataparallel_custom_mpi_options": ""},
    "pytorchddp": {"sagemaker_pytorch_ddp_enabled": True},
}
TENSORFLOW_HETERO = {
    "none": {},
    "mpi": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""},
}


def hetero_launch_grid(distributions: dict[str, dict]) -> list[dict]:
    """Every distribution x group order x host of a two-group cluster."""
    cases = []
    for order in (("gpus", "cpus"), ("cpus", "gpus")):
        groups, index = [], 1
        for name in order:
            instance_type, count, _ = HETERO_GROUPS[name]
            groups.append({"instance_group_name": name, "instance_type": instance_type,
                           "hosts": [f"algo-{index + offset}" for offset in range(count)]})
            index += count
        hosts = sorted(host for group in groups for host in group["hosts"])
        for name, framework in distributions.items():
            hyperparameters = {"epochs": 3, "lr": 0.1, **framework}
            if framework:
                hyperparameters["sagemaker_distribution_instance_groups"] = ["gpus"]
            for group in groups:
                instance_type, _, gpus = HETERO_GROUPS[group["instance_group_name"]]
                for current in group["hosts"]:
                    cases.append({"id": f"hetero-{name}-{order[0]}-first-{current}", "hosts": hosts,
                                  "current_host": current, "instance_type": instance_type, "gpus": gpus,
                                  "neuron_cores": 0, "hyperparameters": hyperparameters, "channels": ["train"],
                                  "instance_groups": copy.deepcopy(groups)})
    return cases


#: The TensorFlow toolkit's launch grid: its strategies (parameter servers, MultiWorkerMirroredStrategy, MPI as
#: Horovod jobs use it, none) on GPU and CPU types, one to three hosts, every host.
TENSORFLOW_LAUNCH = {
    "none": {},
    "parameter_server": {"sagemaker_parameter_server_enabled": True},
    "mwms": {"sagemaker_multi_worker_mirrored_strategy_enabled": True},
    "mpi": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_custom_mpi_options": ""},
    "mpi_ppn": {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
                "sagemaker_mpi_custom_mpi_options": "--NCCL_DEBUG INFO"},
}
TENSORFLOW_TYPES = {"ml.p4d.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.g5.12xlarge": 4, "ml.c5.xlarge": 0}


def tensorflow_launch_grid() -> list[dict]:
    cases = []
    for name, framework in TENSORFLOW_LAUNCH.items():
        for instance_type, gpus in TENSORFLOW_TYPES.items():
            for count in (1, 2, 3):
                hosts = [f"algo-{index + 1}" for index in range(count)]
                for current in hosts:
                    model_dir = "/opt/ml/model" if "sagemaker_mpi_enabled" in framework else \
                        f"s3://trainops-oracle-out/jobs/{JOB}/model"
                    cases.append({"id": f"tf-{name}-{instance_type}-{count}-{current}", "hosts": hosts,
                                  "current_host": current, "instance_type": instance_type, "gpus": gpus,
                                  "neuron_cores": 0, "channels": ["train"],
                                  "hyperparameters": {"epochs": 3, "lr": 0.1, "model_dir": model_dir, **framework}})
    for case in hetero_launch_grid(TENSORFLOW_HETERO):
        case["id"] = "tf-" + case["id"]
        case["hyperparameters"]["model_dir"] = "/opt/ml/model"
        cases.append(case)
    return cases


def homogeneous_launch_grid() -> list[dict]:
    cases = []
    for name, framework in LAUNCH_HYPERPARAMETERS.items():
        for instance_type in LAUNCH_TYPES:
            if name.startswith(("smddp", "pytorchddp", "smp")) and LAUNCH_TYPES[instance_type][0] == 0:
                continue
            for hosts, current in ((["algo-1"], "algo-1"), (["algo-1", "algo-2"], "algo-1"),
                                   (["algo-1", "algo-2"], "algo-2")):
                if name == "none" and len(hosts) > 1 and current == "algo-2":
                    continue
                hyperparameters = {"epochs": 3, "lr": 0.1, "b": "x", "_tuning_objective_metric": "loss",
                                   **framework}
                cases.append({"id": f"{name}-{instance_type}-{len(hosts)}-{current}", "hosts": hosts,
                              "current_host": current, "instance_type": instance_type,
                              "gpus": LAUNCH_TYPES[instance_type][0], "neuron_cores": LAUNCH_TYPES[instance_type][1],
                              "hyperparameters": hyperparameters, "channels": ["train"]})
    return cases


def _write_contract(base: Path, case: dict) -> None:
    config = base / "input" / "config"
    config.mkdir(parents=True)
    hyperparameters = {"sagemaker_program": "train.py", "sagemaker_submit_directory": "s3://b/sourcedir.tar.gz",
                       "sagemaker_job_name": JOB, "sagemaker_region": "us-east-1",
                       "sagemaker_instance_type": case["instance_type"], **case["hyperparameters"]}
    (config / "hyperparameters.json").write_text(json.dumps({key: json.dumps(value)
                                                             for key, value in hyperparameters.items()}))
    groups = case.get("instance_groups") or [{"instance_group_name": "homogeneousCluster",
                                              "instance_type": case["instance_type"], "hosts": case["hosts"]}]
    current_group = next(group["instance_group_name"] for group in groups if case["current_host"] in group["hosts"])
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": case["current_host"], "hosts": case["hosts"], "network_interface_name": "eth0",
        "current_instance_type": case["instance_type"], "current_group_name": current_group,
        "instance_groups": groups}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        name: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
        for name in case["channels"]}))
    for name in case["channels"]:
        (base / "input" / "data" / name).mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "train.py").write_text("print('hello')\n")
    (base / "model").mkdir()
    (base / "output" / "data").mkdir(parents=True)


def run_toolkit(case: dict) -> dict:
    """The PyTorch toolkit's choice of runner for one contract, and that runner's command and environment.

    Runs in a child process per case: the toolkit reads its base directory when it is imported."""
    import subprocess

    with tempfile.TemporaryDirectory(prefix="trainops-oracle-") as directory:
        base = Path(directory) / "opt" / "ml"
        _write_contract(base, case)
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("SM_", "NCCL_", "FI_", "SMDATAPARALLEL", "RDMAV", "MASTER_"))}
        env.update(SAGEMAKER_BASE_DIR=str(base), TRAINOPS_ORACLE_CASE=json.dumps(case))
        child = "--tensorflow-child" if case["id"].startswith("tf-") else "--toolkit-child"
        result = subprocess.run([sys.executable, __file__, child], env=env, capture_output=True,
                                text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"toolkit child failed for {case['id']}:\n{result.stderr[-3000:]}")
        text = result.stdout.strip().splitlines()[-1]
        return json.loads(text.replace(str(base), "/opt/ml"))


def toolkit_child() -> None:
    case = json.loads(os.environ["TRAINOPS_ORACLE_CASE"])
    logging.disable(logging.WARNING)
    from sagemaker_training import environment

    environment.num_gpus = lambda: case["gpus"]
    environment.num_neurons = lambda instance_type: case["neuron_cores"]
    environment.num_cpus = lambda: 96
    from sagemaker_pytorch_container import training
    from sagemaker_training import entry_point, runner

    training._dns_lookup = lambda host: "127.0.0.1"
    before = dict(os.environ)
    captured = {}

    def run(uri, user_entry_point, args, env_vars=None, capture_error=True, runner_type=runner.ProcessRunnerType,
            **kwargs):
        captured.update(runner=runner_type.value, args=list(args), env_vars=dict(env_vars))
        process_runner = runner.get(runner_type, user_entry_point, args, env_vars)
        captured["runner_class"] = type(process_runner).__name__
        if type(process_runner).__name__ == "WorkerRunner":
            captured["command"] = []
        else:
            captured["command"] = process_runner._create_command()
        captured["processes_per_host"] = getattr(process_runner, "_processes_per_host", None)

    entry_point.run = run
    training.train(environment.Environment())
    _print_captured(captured, before)


def _print_captured(captured: dict, before: dict) -> None:
    """One JSON line on stdout: what the runner would run, and what the toolkit set in its own environment."""
    set_by_toolkit = {key: value for key, value in os.environ.items() if before.get(key) != value}
    captured["os_environ"] = set_by_toolkit
    captured["command"] = [part if not part.startswith("LD_PRELOAD=") else "LD_PRELOAD=<gethostname shim>"
                           for part in captured["command"]]
    captured["command"] = [("<python>" if part == sys.executable else part) for part in captured["command"]]
    print(json.dumps(captured, sort_keys=True, default=str))


def tensorflow_child() -> None:
    """The TensorFlow toolkit's `training.train` for one contract: the runner and command of its worker as for
    PyTorch, plus the parameter server it would start (`_run_ps`: cluster and task index) and whether this host would
    wait for the master (`_wait_until_master_is_down`). TensorFlow is an empty module: nothing calls it here."""
    import types

    case = json.loads(os.environ["TRAINOPS_ORACLE_CASE"])
    logging.disable(logging.WARNING)
    sys.modules["tensorflow"] = types.ModuleType("tensorflow")
    from sagemaker_training import environment, mapping

    environment.num_gpus = lambda: case["gpus"]
    environment.num_neurons = lambda instance_type: case["neuron_cores"]
    environment.num_cpus = lambda: 96
    from sagemaker_tensorflow_container import training
    from sagemaker_training import entry_point, runner

    before = dict(os.environ)
    captured: dict = {"parameter_server": None, "waits_for_master": None}

    def run(uri, user_entry_point, args, env_vars=None, capture_error=True, runner_type=runner.ProcessRunnerType,
            **kwargs):
        captured.update(runner=runner_type.value, args=list(args), env_vars=dict(env_vars))
        process_runner = runner.get(runner_type, user_entry_point, args, env_vars)
        captured["runner_class"] = type(process_runner).__name__
        captured["command"] = [] if type(process_runner).__name__ == "WorkerRunner" else \
            process_runner._create_command()
        captured["processes_per_host"] = getattr(process_runner, "_processes_per_host", None)

    def run_ps(env, cluster):
        captured["parameter_server"] = {"cluster": cluster, "task_index": env.hosts.index(env.current_host)}

    entry_point.run = run
    training._run_ps = run_ps
    training._wait_until_master_is_down = lambda master: captured.update(waits_for_master=master)
    env = environment.Environment()
    training.train(env, mapping.to_cmd_args(env.hyperparameters))
    _print_captured(captured, before)


# ---------------------------------------------------------------------------------------------------------------

def versions(names: tuple[str, ...] = ("sagemaker", "sagemaker-training", "sagemaker-pytorch-training")) -> dict:
    return {name: metadata.version(name) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolkit-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tensorflow-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("render", "launch", "instances", "tf-launch"))
    parser.add_argument("--ids", metavar="PREFIX", help="with --only render: capture only the cases whose id starts "
                        "with PREFIX and put them into the existing goldens/render.json (the others kept as they "
                        "are): a new round of cases without the minutes of the whole grid")
    args = parser.parse_args()
    if args.toolkit_child:
        toolkit_child()
        return
    if args.tensorflow_child:
        tensorflow_child()
        return
    GOLDENS.mkdir(exist_ok=True)
    if args.only == "tf-launch":  # in the TensorFlow toolkit's venv (build_oracle_venv.sh --tensorflow)
        cases = tensorflow_launch_grid()
        for case in cases:
            case["toolkit"] = run_toolkit(case)
        _write(GOLDENS / "launch_tensorflow.json", {
            "generator": "tests/differential/generate.py --only tf-launch",
            "versions": versions(("sagemaker-training", "sagemaker-tensorflow-training")), "cases": cases})
        return
    if args.only in (None, "instances"):
        write_instances()
    if args.only in (None, "render"):
        _quiet_sdk()
        _no_upload()
        with tempfile.TemporaryDirectory(prefix="trainops-oracle-src-") as source_dir:
            Path(source_dir, "train.py").write_text("print('hello')\n")
            cases = render_grid()
            kept = {}
            if args.ids:
                kept = {case["id"]: case for case in json.loads((GOLDENS / "render.json").read_text())["cases"]
                        if not case["id"].startswith(args.ids)}
            for case in cases:
                if case["id"] in kept:
                    case["sdk"] = kept[case["id"]]["sdk"]
                else:
                    case["sdk"] = run_sdk(case["spec"], source_dir)
        _write(GOLDENS / "render.json", {"generator": "tests/differential/generate.py", "versions": versions(),
                                         "job_name": JOB, "cases": cases})
    if args.only in (None, "launch"):
        cases = launch_grid()
        for case in cases:
            case["toolkit"] = run_toolkit(case)
        _write(GOLDENS / "launch.json", {"generator": "tests/differential/generate.py", "versions": versions(),
                                         "cases": cases})


def write_instances() -> None:
    """goldens/instances.json: the GPU count and total GPU memory of every type the SDK's own table knows (the union
    over regions of sagemaker/image_uri_config/instance_gpu_info.json)."""
    import sagemaker

    table = json.loads((Path(sagemaker.__file__).parent / "image_uri_config" / "instance_gpu_info.json").read_text())
    merged: dict = {}
    for region in sorted(table):
        merged.update(table[region])
    path = GOLDENS / "instances.json"
    path.write_text(json.dumps({"generator": "tests/differential/generate.py --only instances",
                                "versions": versions(), "instances": dict(sorted(merged.items()))}, indent=1) + "\n")
    print(f"{path}: {len(merged)} instance types")


def _write(path: Path, data: dict) -> None:
    # One case per line: compact, and a regenerated golden diffs case by case.
    lines = [json.dumps({key: value for key, value in data.items() if key != "cases"}, sort_keys=True)[:-1]
             + ', "cases": [']
    # Keys keep their order: the SDK keeps the user's order of hyperparameters, channels and SMP parameters.
    lines += [json.dumps(case, default=str) + ("," if index < len(data["cases"]) - 1 else "")
              for index, case in enumerate(data["cases"])]
    lines.append("]}")
    path.write_text("\n".join(lines) + "\n")
    print(f"{path}: {len(data['cases'])} cases")


if __name__ == "__main__":
    main()
