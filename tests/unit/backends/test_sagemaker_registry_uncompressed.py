"""A model trained with disable_output_compression (its files under .../output/model/) is registered as an
uncompressed S3 prefix, which botocore's CreateModelPackage model accepts; a model.tar.gz stays ModelDataUrl."""

from __future__ import annotations

import botocore.session
from botocore.validate import ParamValidator

from trainops.backends.sagemaker.registry import _registered, build_model_package_request

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"


def _request(uri):
    return build_model_package_request(group="digits", image_uri=IMAGE, model_artifact_uri=uri, metrics={"acc": 0.9},
                                       metrics_uri="s3://bkt/jobs/j/evaluation/metrics.json", approval="Approved")


def test_a_prefix_is_an_uncompressed_model_data_source_and_reads_back():
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.operation_model("CreateModelPackage").input_shape
    uncompressed = _request("s3://bkt/jobs/j/output/model/")
    (container,) = uncompressed["InferenceSpecification"]["Containers"]
    assert container["ModelDataSource"] == {"S3DataSource": {"S3Uri": "s3://bkt/jobs/j/output/model/",
                                                             "S3DataType": "S3Prefix", "CompressionType": "None"}}
    assert "ModelDataUrl" not in container
    assert not ParamValidator().validate(uncompressed, shape).has_errors()
    archive = _request("s3://bkt/jobs/j/output/model.tar.gz")
    assert archive["InferenceSpecification"]["Containers"][0]["ModelDataUrl"].endswith("model.tar.gz")
    described = {"ModelPackageArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/digits/1",
                 "InferenceSpecification": uncompressed["InferenceSpecification"]}
    assert _registered(described, "digits").model_artifact_uri == "s3://bkt/jobs/j/output/model/"
