"""Capture the SDK's requests for the estimator options of issue 25 (training plans, infra check, placement, ...).

Runs in the oracle venv (README.md), beside generate.py, whose offline SDK harness it reuses:

    ~/.cache/trainops-oracle/bin/python tests/differential/generate_estimator_params.py

Writes two goldens:
- goldens/render_estimator_params.json: every option alone, the options together (the issue's "done when" spec:
  training plan, infra check, placement, no compression, TensorBoard and a private registry), and each option and
  the combination with every distribution of generate.py's grid; for each, the CreateTrainingJob request the SDK
  sends or its error;
- goldens/estimator_signature.json: the parameter names of `EstimatorBase`, `Framework` and `PyTorch`, so the
  spec's coverage table (trainops/spec/sdk_coverage.py) is compared with the SDK without the SDK.
"""

from __future__ import annotations

import copy
import inspect
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402  (generate.py's offline SDK harness)

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-reserved-plan"
CREDENTIALS = "arn:aws:lambda:us-east-1:123456789012:function:registry-credentials"
PRIVATE_IMAGE = "10.0.0.5:5000/team/pytorch-training:2.2.0"
VPC = {"subnets": generate.SUBNETS, "security_group_ids": generate.GROUPS}

#: Each option alone, as a spec fragment in the SDK's names and value shapes.
OPTIONS = {
    "training-plan": {"training_plan": PLAN},
    "infra-check-on": {"enable_infra_check": True},
    "infra-check-off": {"enable_infra_check": False},
    "placement": {"instance_placement_config": {"EnableMultipleJobs": True, "PlacementSpecifications": [
        {"UltraServerId": "ultraserver-1", "InstanceCount": 2}]}},
    "placement-any-server": {"instance_placement_config": {"PlacementSpecifications": [{"InstanceCount": 1}]}},
    "no-compression": {"disable_output_compression": True},
    "compression-default": {"disable_output_compression": False},
    "tensorboard": {"tensorboard_output_config": {"s3_output_path": "s3://trainops-oracle-out/tensorboard"}},
    "tensorboard-local-path": {"tensorboard_output_config": {"s3_output_path": "s3://trainops-oracle-out/tb",
                                                             "container_local_output_path": "/opt/ml/output/tb"}},
    "entry-point": {"container_entry_point": ["python3", "/opt/ml/code/bootstrap.py"]},
    "entry-point-arguments": {"container_entry_point": ["bash", "-c"], "container_arguments": ["run.sh", "--fast"]},
    "arguments-only": {"container_arguments": ["--epochs", "3"]},
    "registry-platform": {"training_repository_access_mode": "Platform"},
    "registry-vpc": {"training_repository_access_mode": "Vpc", "image_uri": PRIVATE_IMAGE,
                     "framework_version": None, "py_version": None, **VPC},
    "registry-vpc-credentials": {"training_repository_access_mode": "Vpc",
                                 "training_repository_credentials_provider_arn": CREDENTIALS,
                                 "image_uri": PRIVATE_IMAGE, "framework_version": None, "py_version": None, **VPC},
    "registry-credentials-without-mode": {"training_repository_credentials_provider_arn": CREDENTIALS},
    "remote-debug-on": {"enable_remote_debug": True},
    "remote-debug-off": {"enable_remote_debug": False},
    "session-chaining-on": {"enable_session_tag_chaining": True},
    "session-chaining-off": {"enable_session_tag_chaining": False},
    "profiler-disabled": {"disable_profiler": True},
    "log-level-debug": {"container_log_level": 10},
    "log-level-warning": {"container_log_level": 30},
    "model-object": {"model_uri": "s3://trainops-oracle-data/models/base/model.tar.gz"},
    "model-prefix-named": {"model_uri": "s3://trainops-oracle-data/models/base/", "model_channel_name": "pretrained"},
    "model-isolated": {"model_uri": "s3://trainops-oracle-data/models/base/model.tar.gz",
                       "enable_network_isolation": True},
    "model-name-clash": {"model_uri": "s3://trainops-oracle-data/models/base/", "model_channel_name": "train"},
    "model-file-uri": {"model_uri": "file:///tmp/model"},
    "code-location": {"code_location": "s3://trainops-oracle-code/prefix"},
    "code-location-isolated": {"code_location": "s3://trainops-oracle-code/prefix", "enable_network_isolation": True},
    "dependencies": {"dependencies": ["libs/common", "vendor"]},
}

#: The issue's "done when" spec: all of them together, on a capacity-reserved fleet.
TOGETHER = {
    "training_plan": PLAN, "enable_infra_check": True,
    "instance_placement_config": {"EnableMultipleJobs": False, "PlacementSpecifications": [
        {"UltraServerId": "ultraserver-1", "InstanceCount": 2}]},
    "disable_output_compression": True,
    "tensorboard_output_config": {"s3_output_path": "s3://trainops-oracle-out/tensorboard",
                                  "container_local_output_path": "/opt/ml/output/tensorboard"},
    "training_repository_access_mode": "Vpc", "training_repository_credentials_provider_arn": CREDENTIALS,
    "image_uri": PRIVATE_IMAGE, "framework_version": None, "py_version": None, **VPC,
}
EVERYTHING = {**TOGETHER, "enable_remote_debug": True, "enable_session_tag_chaining": True, "disable_profiler": True,
              "container_log_level": 10, "model_uri": "s3://trainops-oracle-data/models/base/",
              "code_location": "s3://trainops-oracle-code/prefix", "dependencies": ["libs/common"]}
#: Options that combine with every distribution (not the entrypoint, which replaces the toolkit's launch).
WITH_EVERY_DISTRIBUTION = ("training-plan", "infra-check-on", "placement", "no-compression", "tensorboard",
                           "registry-vpc-credentials", "remote-debug-on", "session-chaining-on", "profiler-disabled",
                           "log-level-debug", "model-object", "code-location")


def _distribution_base(name: str, **overrides) -> dict:
    framework = "tensorflow" if name in ("mwms", "parameter_server") else "pytorch"
    version, py = ("2.11.0", "py39") if framework == "tensorflow" else ("2.2.0", "py310")
    settings = {"distribution": copy.deepcopy(generate.DISTRIBUTIONS[name]), "framework": framework,
                "framework_version": version, "py_version": py}
    settings.update(overrides)  # an image_uri option clears the versions...
    if framework == "tensorflow":
        # ...except for TensorFlow: its SDK estimator reads framework_version to check the distribution and fails
        # with a TypeError without it, even when image_uri is given.
        settings.update(framework_version=version, py_version=py)
    return generate._base(**settings)


def grid() -> list[dict]:
    cases = []
    for name, option in OPTIONS.items():
        cases.append({"id": f"option-{name}", "spec": generate._base(**copy.deepcopy(option))})
    cases.append({"id": "together", "spec": generate._base(**copy.deepcopy(TOGETHER))})
    cases.append({"id": "everything", "spec": generate._base(**copy.deepcopy(EVERYTHING))})
    cases.append({"id": "together-p5", "spec": generate._base(instance_type="ml.p5.48xlarge",
                                                              **copy.deepcopy(TOGETHER))})
    for distribution in generate.DISTRIBUTIONS:
        cases.append({"id": f"together-{distribution}",
                      "spec": _distribution_base(distribution, **copy.deepcopy(TOGETHER))})
        for name in WITH_EVERY_DISTRIBUTION:
            option = copy.deepcopy(OPTIONS[name])
            cases.append({"id": f"dist-{distribution}-{name}", "spec": _distribution_base(distribution, **option)})
    ids = [case["id"] for case in cases]
    assert len(set(ids)) == len(ids)
    return cases


def _sdk_arguments(spec: dict) -> dict:
    """The spec as the SDK takes it: TensorBoard as the SDK's TensorBoardOutputConfig object."""
    from sagemaker.debugger import TensorBoardOutputConfig

    spec = copy.deepcopy(spec)
    tensorboard = spec.get("tensorboard_output_config")
    if tensorboard is not None:
        spec["tensorboard_output_config"] = TensorBoardOutputConfig(**tensorboard)
    return spec


def signatures() -> dict:
    from sagemaker.estimator import EstimatorBase, Framework
    from sagemaker.pytorch import PyTorch

    return {cls.__name__: [name for name in inspect.signature(cls.__init__).parameters
                           if name not in ("self", "kwargs")]
            for cls in (EstimatorBase, Framework, PyTorch)}


def main() -> None:
    generate._quiet_sdk()
    generate._no_upload()
    cases = grid()
    with tempfile.TemporaryDirectory(prefix="trainops-oracle-src-") as source_dir:
        Path(source_dir, "train.py").write_text("print('hello')\n")
        for case in cases:
            case["sdk"] = generate.run_sdk(_sdk_arguments(case["spec"]), source_dir)
    generate._write(generate.GOLDENS / "render_estimator_params.json",
                    {"generator": "tests/differential/generate_estimator_params.py", "versions": generate.versions(),
                     "job_name": generate.JOB, "cases": cases})
    path = generate.GOLDENS / "estimator_signature.json"
    path.write_text(json.dumps({"generator": "tests/differential/generate_estimator_params.py",
                                "versions": generate.versions(), "signatures": signatures()}, indent=1) + "\n")
    print(f"{path}: {sum(len(names) for names in signatures().values())} parameters")


if __name__ == "__main__":
    main()
