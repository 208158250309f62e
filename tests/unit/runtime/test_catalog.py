"""Tests for trainops.runtime.catalog: the instance catalog read from instances.json."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import pytest

from trainops.runtime import catalog


@pytest.mark.parametrize(
    ("name", "gpus", "gpu_memory_gib", "model"),
    [
        ("ml.p3.2xlarge", 1, 16, "V100"),
        ("ml.p3.8xlarge", 4, 16, "V100"),
        ("ml.p3.16xlarge", 8, 16, "V100"),
        ("ml.p3dn.24xlarge", 8, 32, "V100"),
        ("ml.p4d.24xlarge", 8, 40, "A100-40GB"),
        ("ml.p4de.24xlarge", 8, 80, "A100-80GB"),
        ("ml.p5.48xlarge", 8, 80, "H100"),
        ("ml.p5e.48xlarge", 8, 141, "H200"),
        ("ml.p5en.48xlarge", 8, 141, "H200"),
        ("ml.g4dn.xlarge", 1, 16, "T4"),
        ("ml.g4dn.12xlarge", 4, 16, "T4"),
        ("ml.g5.xlarge", 1, 24, "A10G"),
        ("ml.g5.12xlarge", 4, 24, "A10G"),
        ("ml.g5.48xlarge", 8, 24, "A10G"),
        ("ml.g6.12xlarge", 4, 24, "L4"),
        ("ml.g6e.48xlarge", 8, 48, "L40S"),
    ],
)
def test_gpu_instances_carry_their_gpu_count_memory_and_model(name, gpus, gpu_memory_gib, model):
    instance = catalog.lookup(name)
    assert instance is not None
    assert instance.accelerator == "nvidia"
    assert (instance.gpus, instance.gpu_memory_gib, instance.accelerator_model) == (gpus, gpu_memory_gib, model)
    assert instance.neuron_devices == 0 and instance.neuron_cores == 0


@pytest.mark.parametrize(
    ("name", "chips", "cores", "model"),
    [
        ("ml.trn1.2xlarge", 1, 2, "Trainium"),
        ("ml.trn1.32xlarge", 16, 32, "Trainium"),
        ("ml.trn1n.32xlarge", 16, 32, "Trainium"),
        ("ml.trn2.48xlarge", 16, 64, "Trainium2"),
    ],
)
def test_trainium_instances_count_chips_and_neuron_cores(name, chips, cores, model):
    instance = catalog.lookup(name)
    assert instance is not None
    assert instance.accelerator == "neuron"
    assert (instance.neuron_devices, instance.neuron_cores, instance.accelerator_model) == (chips, cores, model)
    assert instance.gpus == 0 and instance.gpu_memory_gib == 0
    assert instance.accelerators == chips


def test_trn1_has_two_neuron_cores_per_chip_as_the_seed_document_says():
    for name in ("ml.trn1.2xlarge", "ml.trn1.32xlarge", "ml.trn1n.32xlarge"):
        instance = catalog.lookup(name)
        assert instance.neuron_cores == 2 * instance.neuron_devices


@pytest.mark.parametrize(
    ("name", "efa", "rdma", "interfaces"),
    [
        ("ml.p3.16xlarge", False, False, 0),
        ("ml.p3dn.24xlarge", True, False, 1),
        ("ml.p4d.24xlarge", True, True, 4),
        ("ml.p4de.24xlarge", True, True, 4),
        ("ml.p5.48xlarge", True, True, 32),
        ("ml.p5.4xlarge", True, True, 1),
        ("ml.p5en.48xlarge", True, True, 16),
        ("ml.trn1.2xlarge", False, False, 0),
        ("ml.trn1.32xlarge", True, True, 8),
        ("ml.trn1n.32xlarge", True, True, 16),
        ("ml.g4dn.xlarge", False, False, 0),
        ("ml.g4dn.12xlarge", True, False, 1),
        ("ml.g5.48xlarge", True, False, 1),
        ("ml.c5n.18xlarge", True, False, 1),
        ("ml.m5.24xlarge", False, False, 0),
    ],
)
def test_efa_and_gpudirect_rdma_flags(name, efa, rdma, interfaces):
    instance = catalog.lookup(name)
    assert (instance.efa, instance.gpudirect_rdma, instance.efa_interfaces) == (efa, rdma, interfaces)


def test_rdma_and_efa_interfaces_only_where_efa_is():
    for name in catalog.names():
        instance = catalog.lookup(name)
        if not instance.efa:
            assert not instance.gpudirect_rdma, name
            assert instance.efa_interfaces == 0, name
        else:
            assert instance.efa_interfaces >= 1, name


def test_smddp_support_follows_the_current_aws_documentation():
    supported = {name for name in catalog.names() if catalog.lookup(name).smddp_supported}
    assert supported == {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}


def test_cpu_instances_have_no_accelerator():
    for name in ("ml.m5.xlarge", "ml.c5.2xlarge", "ml.c6i.32xlarge", "ml.r5.large", "ml.m6i.large", "ml.t3.medium"):
        instance = catalog.lookup(name)
        assert instance is not None, name
        assert instance.accelerator is None and instance.accelerator_model is None
        assert instance.gpus == instance.neuron_devices == instance.neuron_cores == instance.accelerators == 0
        assert instance.bf16_tflops is None and instance.memory_bandwidth_gbps is None


def test_cpu_sizes_read_vcpus_and_memory():
    m5 = catalog.lookup("ml.m5.24xlarge")
    assert (m5.vcpus, m5.memory_gib) == (96, 384.0)
    c5 = catalog.lookup("ml.c5.9xlarge")
    assert (c5.vcpus, c5.memory_gib) == (36, 72.0)


def test_datasheet_figures_for_the_health_check():
    p4d = catalog.lookup("ml.p4d.24xlarge")
    p5 = catalog.lookup("ml.p5.48xlarge")
    assert p4d.bf16_tflops == 312.0 and p4d.memory_bandwidth_gbps == 1555.0
    assert p5.bf16_tflops > p4d.bf16_tflops
    assert catalog.lookup("ml.p4de.24xlarge").memory_bandwidth_gbps > p4d.memory_bandwidth_gbps
    # V100 has no bf16 tensor cores: no figure rather than a made-up one
    assert catalog.lookup("ml.p3.2xlarge").bf16_tflops is None


def test_every_catalogued_accelerator_model_is_described():
    table = json.loads(resources.files("trainops.runtime").joinpath("instances.json").read_text())
    models = {record.get("accelerator_model") for record in table["instances"].values()} - {None}
    assert models <= set(table["accelerators"])


def test_family_is_derived_from_the_name():
    assert catalog.lookup("ml.p4d.24xlarge").family == "p4d"
    assert catalog.lookup("ml.trn1n.32xlarge").family == "trn1n"
    assert catalog.family_of("ml.p6-b200.48xlarge") == "p6-b200"
    assert catalog.family_of("not-an-instance") == ""


@pytest.mark.parametrize("name", ["ml.p9.96xlarge", "p4d.24xlarge", "", "ml.p4d", "local", "local_gpu"])
def test_unknown_and_local_types_are_not_in_the_catalog(name):
    assert catalog.lookup(name) is None


def test_lookup_of_a_non_string_is_none():
    assert catalog.lookup(None) is None  # type: ignore[arg-type]


def test_local_types():
    assert catalog.LOCAL_TYPES == ("local", "local_gpu")
    assert catalog.is_local("local") and catalog.is_local("local_gpu")
    assert not catalog.is_local("ml.p4d.24xlarge")


def test_names_are_sorted_and_cover_the_families_in_use():
    listed = catalog.names()
    assert listed == sorted(listed)
    assert all(name.startswith("ml.") for name in listed)
    for family in ("p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e",
                   "trn1", "trn1n", "trn2", "m5", "c5", "c5n", "m6i", "c6i", "r5"):
        assert family in catalog.families(), family


def test_catalog_names_are_types_the_sagemaker_api_accepts_for_training():
    botocore = pytest.importorskip("botocore")
    import gzip
    from pathlib import Path

    model = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"
    if not model.exists():
        pytest.skip("botocore ships no compressed SageMaker model here")
    enum = set(json.loads(gzip.decompress(model.read_bytes()))["shapes"]["TrainingInstanceType"]["enum"])
    assert set(catalog.names()) <= enum


def test_hourly_price_in_us_east_1():
    assert catalog.hourly_price("ml.p4d.24xlarge") == pytest.approx(37.688)
    assert catalog.hourly_price("ml.g5.xlarge", "us-east-1") == catalog.lookup("ml.g5.xlarge").price_per_hour


def test_hourly_price_scales_by_the_region_multiplier():
    multipliers = catalog.region_price_multipliers()
    assert multipliers["us-east-1"] == 1.0
    for region, factor in multipliers.items():
        assert catalog.hourly_price("ml.m5.xlarge", region) == pytest.approx(0.23 * factor)


def test_hourly_price_is_none_when_unknown():
    assert catalog.hourly_price("ml.p9.96xlarge") is None
    assert catalog.hourly_price("local") is None
    assert catalog.hourly_price("ml.m5.xlarge", "xx-nowhere-1") is None
    no_price = [name for name in catalog.names() if catalog.lookup(name).price_per_hour is None]
    assert no_price, "some prices are unknown on purpose; they must stay None rather than invented"
    assert catalog.hourly_price(no_price[0]) is None


def test_prices_grow_with_size_within_a_family():
    for family in ("g5", "m5", "c5", "r5", "p3"):
        members = [catalog.lookup(name) for name in catalog.names() if catalog.lookup(name).family == family]
        priced = sorted((m for m in members if m.price_per_hour is not None), key=lambda m: (m.gpus, m.vcpus))
        prices = [m.price_per_hour for m in priced]
        assert prices == sorted(prices), family


def test_the_table_says_where_its_facts_come_from():
    table = json.loads(resources.files("trainops.runtime").joinpath("instances.json").read_text())
    assert table["_sources"] and all("where" in source for source in table["_sources"])
    assert "approximate" in table["_note"] and "us-east-1" in table["_note"]


def test_catalog_imports_no_pydantic_and_nothing_heavy():
    code = (
        "import sys\n"
        "from trainops.runtime import catalog\n"
        "catalog.lookup('ml.p4d.24xlarge')\n"
        "heavy = [m for m in ('pydantic', 'yaml', 'boto3', 'torch', 'kfp', 'airflow') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
