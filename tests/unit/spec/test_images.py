"""Tests for trainops.spec.images: resolving the AWS training image from framework, versions, instance and region."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from trainops.errors import SpecError
from trainops.spec import images
from trainops.spec.images import resolve_training_image

URI = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.(?P<domain>[a-z0-9.]+)/"
                 r"(?P<repository>[a-z-]+):(?P<tag>[A-Za-z0-9._-]+)$")


def problems_of(excinfo) -> dict[str, str]:
    return {problem.path: problem.message for problem in excinfo.value.problems}


# --- the branches -----------------------------------------------------------------------------------------------

def test_gpu_instance_gets_the_gpu_training_image():
    uri = resolve_training_image("pytorch", "2.1.0", "py310", "ml.p4d.24xlarge", "us-west-2")
    assert uri == "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-gpu-py310"


def test_cpu_instance_gets_the_cpu_training_image():
    uri = resolve_training_image("pytorch", "2.4.0", "py311", "ml.m5.xlarge", "eu-west-1")
    assert uri == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.4.0-cpu-py311"


def test_trainium_instance_gets_the_neuron_image_with_its_full_tag():
    uri = resolve_training_image("pytorch", "2.8.0", None, "ml.trn1.32xlarge", "us-east-1")
    assert uri == ("763104351884.dkr.ecr.us-east-1.amazonaws.com/"
                   "pytorch-training-neuronx:2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04")


def test_neuron_flag_forces_the_neuron_table():
    uri = resolve_training_image("pytorch", "2.1", None, "ml.m5.xlarge", "us-west-2", neuron=True)
    assert URI.match(uri)["repository"] == "pytorch-training-neuronx"
    assert URI.match(uri)["tag"].startswith("2.1.2-neuronx-py310-sdk")


def test_smp_v2_gets_the_smp_image_tagged_by_pytorch_version():
    uri = resolve_training_image("pytorch", "2.4.1", None, "ml.p5.48xlarge", "us-east-1", smp_v2=True)
    assert uri == "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311-cu121"


def test_smp_v2_short_version_resolves_to_the_smp_line():
    uri = resolve_training_image("pytorch", "2.2", None, "ml.p4d.24xlarge", "us-west-2", smp_v2=True)
    assert uri.endswith("/smdistributed-modelparallel:2.2.0-gpu-py310-cu121")


def test_tensorflow_gpu_and_cpu():
    gpu = resolve_training_image("tensorflow", "2.19.0", None, "ml.g5.xlarge", "us-east-1")
    cpu = resolve_training_image("TensorFlow", "2.13", None, "ml.c5.xlarge", "us-east-1")
    assert gpu.endswith("/tensorflow-training:2.19.0-gpu-py312")
    assert cpu.endswith("/tensorflow-training:2.13-cpu-py310")  # the SDK tags the version as written


def test_china_region_uses_its_account_and_the_cn_domain():
    uri = resolve_training_image("pytorch", "2.4.0", None, "ml.g5.12xlarge", "cn-northwest-1")
    assert uri == "727897471807.dkr.ecr.cn-northwest-1.amazonaws.com.cn/pytorch-training:2.4.0-gpu-py311"


@pytest.mark.parametrize(
    ("region", "account", "domain"),
    [
        ("af-south-1", "626614931356", "amazonaws.com"),
        ("ap-east-1", "871362719292", "amazonaws.com"),
        ("me-south-1", "217643126080", "amazonaws.com"),
        ("eu-south-1", "692866216735", "amazonaws.com"),
        ("us-gov-west-1", "442386744353", "amazonaws.com"),
        ("us-iso-east-1", "886529160074", "c2s.ic.gov"),
        ("us-isob-east-1", "094389454867", "sc2s.sgov.gov"),
        ("eu-central-1", "763104351884", "amazonaws.com"),
    ],
)
def test_region_exceptions_take_their_own_ecr_account(region, account, domain):
    match = URI.match(resolve_training_image("pytorch", "2.1.0", None, "ml.p3.2xlarge", region))
    assert (match["account"], match["region"], match["domain"]) == (account, region, domain)


@pytest.mark.parametrize(("short", "full"), [("2.1", "2.1.0"), ("2.5", "2.5.1"), ("1.13", "1.13.1"),
                                             ("2.7", "2.7.1")])
def test_short_versions_resolve_like_the_sdk_aliases(short, full):
    # The alias picks the full version's Python; the tag keeps the short form, as the SDK writes it (the DLCs carry
    # both tags). Checked against SDK 2.257 in tests/differential.
    uri = resolve_training_image("pytorch", short, None, "ml.g5.xlarge", "us-east-1")
    full_uri = resolve_training_image("pytorch", full, None, "ml.g5.xlarge", "us-east-1")
    assert URI.match(uri)["tag"] == URI.match(full_uri)["tag"].replace(f"{full}-", f"{short}-", 1)


def test_py_version_none_takes_the_version_default():
    uri = resolve_training_image("pytorch", "1.13.1", None, "ml.g4dn.xlarge", "us-east-1")
    assert uri.endswith(":1.13.1-gpu-py39")


def test_local_mode_types_follow_their_processor():
    assert ":2.2-gpu-" in resolve_training_image("pytorch", "2.2", None, "local_gpu", "us-east-1")
    assert ":2.2-cpu-" in resolve_training_image("pytorch", "2.2", None, "local", "us-east-1")


def test_types_missing_from_the_catalog_fall_back_to_the_family_letter():
    assert ":2.6-gpu-" in resolve_training_image("pytorch", "2.6", None, "ml.g7.2xlarge", "us-east-1")
    assert ":2.6-cpu-" in resolve_training_image("pytorch", "2.6", None, "ml.m8i.large", "us-east-1")
    assert "neuronx" in resolve_training_image("pytorch", "2.6", None, "ml.trn3.48xlarge", "us-east-1")


# --- the errors -------------------------------------------------------------------------------------------------

def test_unknown_version_lists_the_supported_ones():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "0.3", None, "ml.p4d.24xlarge", "us-east-1")
    message = problems_of(excinfo)["framework_version"]
    assert "'0.3'" in message
    for version in images.supported_versions("pytorch"):
        assert version in message
    assert excinfo.value.exit_code == 2


def test_unknown_neuron_version_suggests_the_same_minor_line():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.1.0", None, "ml.trn1.2xlarge", "us-east-1")
    message = problems_of(excinfo)["framework_version"]
    assert "Trainium" in message and "2.1.2" in message and "did you mean 2.1.2?" in message


def test_unknown_smp_version_lists_the_smp_versions():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.6.0", None, "ml.p5.48xlarge", "us-east-1", smp_v2=True)
    message = problems_of(excinfo)["framework_version"]
    assert "SMP v2" in message and all(v in message for v in images.smp_v2_versions())


def test_wrong_py_version_names_the_field_and_the_choice():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.1.0", "py38", "ml.p4d.24xlarge", "us-east-1")
    assert set(problems_of(excinfo)) == {"py_version"}
    assert "py310" in problems_of(excinfo)["py_version"] and "'py38'" in problems_of(excinfo)["py_version"]


def test_unknown_region_lists_the_regions():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.1.0", None, "ml.p4d.24xlarge", "mars-north-1")
    message = problems_of(excinfo)["region"]
    assert "'mars-north-1'" in message and "us-east-1" in message and "cn-north-1" in message


def test_neuron_images_exist_in_fewer_regions():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.8.0", None, "ml.trn1.32xlarge", "cn-north-1")
    message = problems_of(excinfo)["region"]
    available = message.split("available in:")[1]
    assert "pytorch-training-neuronx" in message and "us-west-2" in available and "cn-north-1" not in available


def test_smp_images_are_not_in_china():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.4.1", None, "ml.p4d.24xlarge", "cn-north-1", smp_v2=True)
    assert "region" in problems_of(excinfo)


def test_every_problem_is_reported_at_once():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "0.9", None, "ml.p4d.24xlarge", "nowhere-1")
    assert set(problems_of(excinfo)) == {"framework_version", "region"}


def test_unknown_framework():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("mxnet", "1.9.0", None, "ml.p3.2xlarge", "us-east-1")
    assert "pytorch" in problems_of(excinfo)["framework"]


def test_tensorflow_has_no_trainium_images():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("tensorflow", "2.19", None, "ml.trn1.32xlarge", "us-east-1")
    assert "pytorch" in problems_of(excinfo)["framework"]


@pytest.mark.parametrize("instance_type", ["ml.m5.xlarge", "ml.trn1.32xlarge", "local"])
def test_smp_v2_needs_a_gpu_instance(instance_type):
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.4.1", None, instance_type, "us-east-1", smp_v2=True)
    assert "GPU" in problems_of(excinfo)["instance_type"]


@pytest.mark.parametrize("instance_type", [None, "", "  "])
def test_a_missing_instance_type_names_the_field(instance_type):
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.4.0", None, instance_type, "us-east-1")
    assert set(problems_of(excinfo)) == {"instance_type"}


def test_refusing_neuron_on_a_trainium_instance_is_an_error():
    with pytest.raises(SpecError) as excinfo:
        resolve_training_image("pytorch", "2.8.0", None, "ml.trn1.32xlarge", "us-east-1", neuron=False)
    assert "Trainium" in problems_of(excinfo)["instance_type"]


# --- the tables and helpers -------------------------------------------------------------------------------------

def test_supported_versions_by_kind():
    training = images.supported_versions("pytorch")
    assert training == images.supported_versions("pytorch", "gpu") == images.supported_versions("pytorch", "cpu")
    assert "1.12.0" in training and "2.1.0" in training and training == sorted(training, key=images._version_key)
    assert "2.8.0" in images.supported_versions("pytorch", "neuron")
    assert images.supported_versions("pytorch", "smp") == list(images.smp_v2_versions())
    assert images.supported_versions("tensorflow", "neuron") == []
    assert images.supported_versions("jax") == []
    with pytest.raises(ValueError):
        images.supported_versions("pytorch", "tpu")


def test_tensorflow_covers_the_2x_line():
    versions = images.supported_versions("tensorflow")
    # The SDK's table (regenerated by tests/differential/regenerate_tables.py) reaches back to 1.4.1.
    assert versions[0] == "1.4.1" and "2.12.0" in versions and versions[-1] == "2.21.0"  # v3 SDK (sagemaker-core 2.27.0)


def test_every_version_in_the_tables_resolves_in_us_east_1():
    for framework, kinds in (("pytorch", ("training", "neuron", "smp")), ("tensorflow", ("training",))):
        for kind in kinds:
            instance = {"training": "ml.p4d.24xlarge", "neuron": "ml.trn1.32xlarge", "smp": "ml.p5.48xlarge"}[kind]
            for version in images.supported_versions(framework, kind):
                if framework == "tensorflow" and not images.is_version_at_least(version, "1.11"):
                    # legacy mode only (the SDK refuses these without image_uri): refused, naming the field
                    with pytest.raises(SpecError, match="supports only legacy mode") as error:
                        resolve_training_image(framework, version, None, instance, "us-east-1")
                    assert [problem.path for problem in error.value.problems] == ["framework_version"]
                    continue
                uri = resolve_training_image(framework, version, None, instance, "us-east-1", smp_v2=kind == "smp")
                assert URI.match(uri), uri
                assert version in URI.match(uri)["tag"]


def test_every_alias_points_at_a_listed_version():
    tables = json.loads(resources.files("trainops.spec").joinpath("image_tables.json").read_text())
    for framework, kinds in tables["images"].items():
        for kind, table in kinds.items():
            for alias, target in table["version_aliases"].items():
                assert target in table["versions"], (framework, kind, alias)
    assert tables["_sources"]


def test_smddp_versions_come_from_the_aws_table():
    versions = images.smddp_supported_pytorch_versions()
    # 1.10.2: SMDDP 1.4.0 added it (the library's release notes; the SDK's table has it too).
    assert versions[0] == "1.10.2" and "2.0.1" in versions and versions[-1] == "2.3.0"
    assert "2.4.0" not in versions  # AWS lists no framework container with SMDDP after 2.3.0


def test_smp_v2_versions_map_pytorch_to_the_library():
    mapping = images.smp_v2_versions()
    assert mapping["2.0.1"] == "2.0.0" and mapping["2.5.1"] == "2.8.0"
    assert list(mapping) == sorted(mapping, key=images._version_key)


@pytest.mark.parametrize(
    ("version", "minimum", "expected"),
    [("2.1.0", "2.1", True), ("2.1", "2.1.0", True), ("2.10.0", "2.9.2", True), ("1.13.1", "1.13.0", True),
     ("1.12.1", "1.13.0", False), ("2.0", "2.0.1", False), ("2.1.0rc1", "2.1.0", True), ("3", "2.99", True)],
)
def test_is_version_at_least(version, minimum, expected):
    assert images.is_version_at_least(version, minimum) is expected


@pytest.mark.parametrize("framework, version, py, region, expected", [
    # issue 27 item 4: the oldest versions are in the older repositories and accounts, as the SDK resolves them
    ("pytorch", "1.0.0", "py3", "us-east-1",
     "520713654638.dkr.ecr.us-east-1.amazonaws.com/sagemaker-pytorch:1.0.0-gpu-py3"),
    ("pytorch", "1.1.0", "py2", "eu-south-1",
     "048378556238.dkr.ecr.eu-south-1.amazonaws.com/sagemaker-pytorch:1.1.0-gpu-py2"),
    ("tensorflow", "1.12.0", "py3", "cn-north-1",
     "422961961927.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-tensorflow-scriptmode:1.12.0-gpu-py3"),
    ("tensorflow", "1.13.1", "py2", "us-east-1",
     "520713654638.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tensorflow-scriptmode:1.13.1-gpu-py2"),
    ("tensorflow", "1.13.1", "py3", "us-east-1",
     "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:1.13.1-gpu-py3"),
    ("pytorch", "1.2.0", "py3", "us-east-1",
     "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.2.0-gpu-py3"),
])
def test_legacy_versions_resolve_to_their_own_repositories(framework, version, py, region, expected):
    assert resolve_training_image(framework, version, py, "ml.p3.2xlarge", region) == expected


def test_a_version_never_published_in_a_region_is_refused_there():
    # the legacy family has no images in the regions opened after it (il-central-1), the newer ones have some
    with pytest.raises(SpecError, match="no sagemaker-pytorch images in region 'il-central-1'"):
        resolve_training_image("pytorch", "1.0.0", "py3", "ml.p3.2xlarge", "il-central-1")
    with pytest.raises(SpecError, match="1.13.1 was never published in region 'ap-southeast-5'") as error:
        resolve_training_image("tensorflow", "1.13.1", "py3", "ml.p3.2xlarge", "ap-southeast-5")
    assert [problem.path for problem in error.value.problems] == ["framework_version"]
    assert resolve_training_image("tensorflow", "2.11.0", "py39", "ml.p3.2xlarge", "ap-southeast-5").startswith(
        "550225433462.dkr.ecr.ap-southeast-5.amazonaws.com/tensorflow-training:2.11.0-gpu-py39")
