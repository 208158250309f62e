"""Documentation generated from the model: docs/spec.md must be what `trainops schema --markdown` prints."""

from __future__ import annotations

import os
from pathlib import Path

from trainops.spec.distribution import SdkDistribution
from trainops.spec.docs import REGENERATE, fields_markdown, job_spec_schema, spec_reference_markdown
from trainops.spec.inputs import FileSystemInput, TrainingInput
from trainops.spec.job import JobSpec
from trainops.spec.rules import RULES

SPEC_MD = Path(__file__).resolve().parents[3] / "docs" / "spec.md"


def test_docs_spec_md_is_up_to_date():
    generated = spec_reference_markdown()
    if os.environ.get("TRAINOPS_UPDATE_GOLDEN"):
        SPEC_MD.write_text(generated)
    assert SPEC_MD.exists(), f"docs/spec.md is missing: run `{REGENERATE}`"
    assert SPEC_MD.read_text() == generated, f"docs/spec.md is stale: run `{REGENERATE}`"


def test_reference_documents_every_key():
    text = spec_reference_markdown()
    for model in (JobSpec, SdkDistribution, TrainingInput, FileSystemInput):
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in text, (model.__name__, name)
    for check in RULES:
        if getattr(check, "binds", None) in (None, "sagemaker_request"):  # an engine's own set: its engine's docs
            assert f"| `{check.__name__}` |" in text
    for variant in ("none", "torch_distributed", "pytorchddp", "smddp", "smp", "mpi", "parameter_server",
                    "pytorchxla", "multi_worker_mirrored_strategy"):
        assert f"| `{variant}` |" in text
    assert "Availability Zone" in text and "preflight" in text


def test_fields_table_has_a_row_per_field_with_type_default_and_description():
    rows = [line for line in fields_markdown().splitlines()[2:]]
    assert len(rows) == len(JobSpec.model_fields)
    by_key = {row.split("|")[1].strip(" `"): [cell.strip() for cell in row.split("|")[2:5]] for row in rows}
    # entry_point or (SDK v3) command: the rule entry_point_or_command requires one; the table says so
    assert by_key["entry_point"][1] == "-" and "or give command" in by_key["entry_point"][2]
    assert "| `s3_data` | str (length <= 1024) | required |" in spec_reference_markdown()
    assert by_key["instance_count"] == ["int (1-1000)", "`1`", "Number of hosts."]
    assert by_key["input_mode"][0] == "one of: File, FastFile, Pipe"
    assert by_key["use_spot_instances"][1] == "`false`"
    assert all(cells[2] for cells in by_key.values())  # every field is described


def test_schema_lists_both_distribution_spellings():
    schema = job_spec_schema()
    definitions = schema["$defs"]
    assert {"SdkDistribution", "SMDDP", "SMP", "MPI", "TorchDistributed"} <= set(definitions)
    assert definitions["SMDDP"]["properties"]["launcher"]["enum"] == ["mpirun", "torchrun"]
    assert {"type": "null"} in schema["properties"]["distribution"]["anyOf"]
