"""docs/spec.md's section on the SageMaker API's own limits (`trainops.backends.request.api_limits`), each with its
source: generated from the same model file the checks read, so the figures cannot drift from the checks."""

from __future__ import annotations

from trainops.spec.api_model import api_model, request_constraints

_API = "https://docs.aws.amazon.com/sagemaker/latest/APIReference"


def api_limits_section() -> list[str]:
    model = request_constraints()
    version = api_model()["botocore"]
    uri = model["InputDataConfig[].DataSource.S3DataSource.S3Uri"]["max"]
    return [
        "## The API's own limits, checked before anything is created",
        "",
        f"`render` and every submission check the whole CreateTrainingJob request against botocore {version}'s "
        "service model of SageMaker (`trainops/spec/sagemaker_api.json`, written by "
        "`tests/differential/generate_api_model.py`; a test fails when it and the installed botocore differ): every "
        "maximum length and count, pattern and enumeration the model states. boto3 itself checks only the minimums; "
        "the service would refuse the rest after the code was uploaded. Each problem names the spec field to change.",
        "",
        "| limit | value | source |",
        "| --- | --- | --- |",
        f"| instance types (sagemaker and local engines) | one of the {len(api_model()['training_instance_types'])} "
        "of `TrainingInstanceType`, with \"did you mean\" | botocore's model, enum `TrainingInstanceType` |",
        f"| hyperparameters | at most {model['HyperParameters']['max']} entries **counting the launcher's own** "
        "(`sagemaker_program`, `sagemaker_job_name`, `sagemaker_region`, `trainops_distribution`; the toolkit "
        "launcher's `sagemaker_*` keys); keys 256, values 2,500 characters | botocore's model, `HyperParameters`; "
        f"{_API}/API_CreateTrainingJob.html |",
        f"| environment | at most {model['Environment']['max']} variables counting the launcher's (`PYTHONPATH`, "
        "`TRAINOPS_*`) | botocore's model, `TrainingEnvironmentMap` |",
        f"| S3 URIs (channels, output, checkpoints, TensorBoard, the launcher's code channels) | at most {uri} "
        f"characters | botocore's model, `S3Uri` |",
        f"| tags | at most {model['Tags']['max']}; keys 1-128 and values 0-256 characters of letters, digits, spaces "
        "and `_ . : / = + - @`; a key once; no `aws:` key prefix | botocore's model, `TagKey` / `TagValue`; "
        "https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html (the `aws:` prefix is reserved) |",
        f"| `keep_alive_period_in_seconds` | 0-{model['ResourceConfig.KeepAlivePeriodInSeconds']['max']} | "
        "botocore's model, `KeepAlivePeriodInSeconds` |",
        "| `volume_kms_key` | refused on instance types with local NVMe storage (g4dn, g5, g6, g6e, p3dn, p4d, p4de, "
        "p5, p5e, p5en, p6, r5d, trn1, trn1n, trn2) | botocore's documentation of `ResourceConfig.VolumeKmsKeyId` "
        "(\"You can't request a VolumeKmsKeyId when using an instance type with local storage\"); "
        "https://docs.aws.amazon.com/sagemaker/latest/dg/model-train-storage-tips-considerations.html |",
        "| `s3_data_type: AugmentedManifestFile` | Pipe mode only | botocore's documentation of "
        "`S3DataSource.S3DataType` (\"AugmentedManifestFile can only be used if the Channel's input mode is Pipe\") |",
        "| `compression`, `record_wrapping` | not in File mode | botocore's documentation of `Channel.CompressionType` "
        "and `Channel.RecordWrapperType` (\"In File mode, leave this field unset or set it to None\") |",
        "",
        "File-system (FSx, EFS) channels in a FastFile or Pipe job are sent as the SDK sends them: no AWS source says "
        "the API refuses them (issue 46; trainops refused them before).",
        "",
    ]
