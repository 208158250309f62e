"""The instance catalog's GPU facts against the SageMaker SDK's own table (goldens/instances.json, captured from
sagemaker/image_uri_config/instance_gpu_info.json by generate.py --only instances)."""

from __future__ import annotations

import json

from differential.compare import HERE
from trainops.runtime import catalog

GOLDEN = json.loads((HERE / "goldens" / "instances.json").read_text())


def test_gpu_counts_and_memory_agree_with_the_sdk_for_every_type_both_know():
    known = {name: facts for name, facts in GOLDEN["instances"].items() if catalog.lookup(name) is not None}
    assert len(known) >= 15
    for name, facts in known.items():
        instance = catalog.lookup(name)
        assert instance.gpus == facts["Count"], name
        total_gib = instance.gpus * instance.gpu_memory_gib
        # The SDK counts MiB as the driver reports them; the catalog keeps the datasheet GiB per GPU.
        assert abs(total_gib * 1024 - facts["TotalGpuMemoryInMiB"]) <= 0.1 * facts["TotalGpuMemoryInMiB"], name


def test_the_types_the_catalog_leaves_out_are_known_ones():
    # The catalog leaves out p2 (K80 GPUs: Kepler, which CUDA 12 and so the current DLCs no longer support) and g5n
    # (absent from botocore's TrainingInstanceType).
    missing = sorted(name for name in GOLDEN["instances"] if catalog.lookup(name) is None)
    assert all(name.startswith(("ml.p2.", "ml.g5n.")) for name in missing), missing
