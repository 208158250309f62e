"""Documentation generated from the model itself: the JSON Schema and the spec-field reference (docs/spec.md).

`trainops schema --markdown > docs/spec.md` regenerates the reference; a unit test fails when the file is stale, so
the documentation cannot drift from the model.
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from trainops.spec import distribution as d
from trainops.spec import smp
from trainops.spec.api_limits_docs import api_limits_section
from trainops.spec.inputs import FileSystemInput, TrainingInput
from trainops.spec.job import InstanceGroup, JobSpec, Tag
from trainops.spec.rule_registry import SAGEMAKER_REQUEST
from trainops.spec.rules import RULES
from trainops.spec.sdk_coverage import COVERED, LEFT_OUT, SDK_VERSION, sdk_parameters
from trainops.spec.sdk_differences import DIFFERENCES
from trainops.spec.v3_docs import v3_section

REGENERATE = "trainops schema --markdown > docs/spec.md"


def job_spec_schema() -> dict[str, Any]:
    """The JSON Schema of a job spec file (both spellings of `distribution` included)."""
    schema = JobSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "trainops job spec"
    # entry_point or SDK v3's command, exactly one (the rule entry_point_or_command): pydantic sees neither required
    schema["oneOf"] = [{"required": ["entry_point"]}, {"required": ["command"]}]
    return schema


def _limits(metadata: list[Any]) -> str:
    """`1-1000`, `>= 0`, `length <= 255` from pydantic's constraint metadata."""
    bounds: dict[str, Any] = {}
    for item in metadata:
        for name in ("ge", "le", "gt", "lt", "min_length", "max_length"):
            value = getattr(item, name, None)
            if value is not None:
                bounds[name] = value
        for inner in getattr(item, "metadata", ()) or ():  # a FieldInfo inside Annotated[...]
            for name in ("ge", "le", "min_length", "max_length"):
                value = getattr(inner, name, None)
                if value is not None:
                    bounds[name] = value
    ranges = (_range_text(bounds, "ge", "le", ""), _range_text(bounds, "min_length", "max_length", "length "))
    return ", ".join(text for text in ranges if text)


def _range_text(bounds: dict[str, Any], low: str, high: str, prefix: str) -> str:
    """``1-1024``, ``>= 1`` or ``<= 1024`` for the bounds named ``low`` and ``high`` ("" when neither is set)."""
    if low in bounds and high in bounds:
        return f"{prefix}{bounds[low]}-{bounds[high]}"
    if low in bounds:
        return f"{prefix}>= {bounds[low]}"
    if high in bounds:
        return f"{prefix}<= {bounds[high]}"
    return ""


def _type_text(annotation: Any) -> str:
    """A short, readable type: `one of: File, FastFile, Pipe`, `int (1-1024) or None`, `list[str]`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        limits = _limits(list(args[1:]))
        return _type_text(args[0]) + (f" ({limits})" if limits else "")
    if origin is Literal:
        return "one of: " + ", ".join(str(arg) for arg in args)
    if origin in (Union, UnionType):
        return " or ".join(_type_text(arg) for arg in args)
    if annotation is type(None):
        return "None"
    if origin is not None:
        inner = ", ".join(_type_text(arg) for arg in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and annotation.__name__.startswith("_"):
        # The SDK form's private section models: say what to write, not the class name.
        keys = list(annotation.model_fields)  # type: ignore[attr-defined]  # a BaseModel subclass (checked above)
        return "{enabled: true}" if keys == ["enabled"] else "mapping (below)"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "`" + str(getattr(value, "type", type(value).__name__)) + "`"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{value!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "or").replace("\n", " ")


def _model_rows(model: type[BaseModel], kinds: dict[str, str] | None = None, skip: tuple[str, ...] = ()) -> list[str]:
    rows = ["| key | type | default | what it is |", "| --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        key = field.alias or name
        kind = (kinds or {}).get(name) or _type_text(field.annotation)
        limits = _limits(field.metadata)
        if limits:
            kind += f" ({limits})"
        rows.append(f"| `{key}` | {_cell(kind)} | {_default_text(field)} | {_cell(field.description or '')} |")
    return rows


def fields_markdown() -> str:
    """A Markdown table of every job-spec field: key, type (with limits), default and description."""
    kinds = {
        "distribution": "SDK dict or typed form (see below)",
        "inputs": "channel name -> `s3://` URI, TrainingInput or FileSystemInput (see below)",
        "tags": "list of {Key, Value}, or a mapping",
    }
    return "\n".join(_model_rows(JobSpec, kinds)) + "\n"


def _distribution_section() -> list[str]:
    lines = [
        "## `distribution`",
        "",
        "Two spellings, parsed into one typed model (`trainops.spec.distribution`). A mapping with a `type` key is the "
        "typed form; any other mapping is the SageMaker Python SDK's dict form. Leaving the field out (or `null`, or "
        "`{}`) means one plain process per host.",
        "",
        "### The SDK dict form",
        "",
        "Every key the SDK's `distribution` argument knows, with the same meaning. One strategy at a time, except "
        "`smdistributed` with its launcher (`torch_distributed` for SMP v2 or SMDDP AllGather, `mpi` for SMP v1).",
        "",
        *_model_rows(d.SdkDistribution),
        "",
        "`smdistributed.dataparallel`:",
        "",
        *_model_rows(d._SdkDataParallel),
        "",
        "`smdistributed.modelparallel`:",
        "",
        *_model_rows(d._SdkModelParallel),
        "",
        "`mpi`:",
        "",
        *_model_rows(d._SdkMpi),
        "",
        "### The typed form",
        "",
        "`type` picks the variant (docs/contracts.md, section 1, is the JSON the runtime receives). Every variant also "
        "takes `instance_groups`.",
        "",
        "| `type` | launcher in the container | what it is | other keys |",
        "| --- | --- | --- | --- |",
    ]
    variants: list[Any] = [d.NoDistribution, d.TorchDistributed, d.PyTorchDDP, d.SMDDP, d.SMP, d.MPI,
                                       d.ParameterServer, d.PyTorchXLA, d.MultiWorkerMirroredStrategy]
    for variant in variants:
        instance = variant()
        keys = [f"`{field.alias or name}`" for name, field in variant.model_fields.items()
                if name not in ("type", "instance_groups")]
        doc = (variant.__doc__ or "").strip().splitlines()[0]
        launcher = instance.launcher
        if "launcher_kind" in variant.model_fields:
            choices = get_args(variant.model_fields["launcher_kind"].annotation)
            launcher = " or ".join(f"{choice}{' (default)' if choice == launcher else ''}" for choice in choices)
        lines.append(f"| `{instance.type}` | {launcher} | {_cell(doc)} | {', '.join(keys) or '-'} |")
    lines += ["", "Keys of the typed variants:", ""]
    seen: set[str] = set()
    rows = ["| key | variants | type | default | what it is |", "| --- | --- | --- | --- | --- |"]
    for variant in variants:
        for name, field in variant.model_fields.items():
            key = field.alias or name
            if name == "type" or key in seen:
                continue
            seen.add(key)
            owners = [f"`{v().type}`" for v in variants if name in v.model_fields]
            owners_text = "all" if len(owners) == len(variants) else ", ".join(owners)
            kind = _type_text(field.annotation)
            limits = _limits(field.metadata)
            kind += f" ({limits})" if limits else ""
            rows.append(f"| `{key}` | {owners_text} | {_cell(kind)} | {_default_text(field)} | "
                        f"{_cell(field.description or '')} |")
    return lines + rows + [""]


def _smp_section() -> list[str]:
    def keys(names: set[str]) -> str:
        return ", ".join(f"`{name}`" for name in sorted(names))

    return [
        "### SMP parameters",
        "",
        "`parameters` of `smdistributed.modelparallel` (or of `type: smp`) are checked against the library version "
        "the launcher implies: torchrun means SMP v2 (PyTorch >= 2.0), mpirun means SMP v1. A key of the other "
        "version is an error that says so.",
        "",
        f"- SMP v2, whole numbers: {keys(smp.V2_INTEGER_KEYS)}; true/false: {keys(smp.V2_BOOLEAN_KEYS)}. The "
        f"degrees ({', '.join(f'`{k}`' for k in smp.V2_DEGREE_KEYS)}) must divide the number of GPUs.",
        f"- SMP v1, positive whole numbers: {keys(smp.V1_POSITIVE_KEYS)}; true/false: {keys(smp.V1_BOOLEAN_KEYS)}; "
        + "; ".join(f"`{key}` one of {', '.join(choices)}" for key, choices in sorted(smp.V1_CHOICES.items()))
        + f"; also {keys(smp.V1_OTHER_KEYS)}. `partitions` (or `pipeline_parallel_degree`) is required.",
        "",
    ]


def _inputs_section() -> list[str]:
    return [
        "## `inputs`",
        "",
        "A mapping of channel name (1-64 of letters, digits, `.`, `_`, `-`; at most 20; `trainops_*` is reserved) "
        "to one of:",
        "",
        "- a URI string: `s3://bucket/prefix` (a `file://` URI or a local path works for the local backend only);",
        "- the SDK's `TrainingInput` fields:",
        "",
        *_model_rows(TrainingInput),
        "",
        "- the SDK's `FileSystemInput` fields (FSx for Lustre or EFS; needs `subnets` and `security_group_ids`; "
        "recognised by its `file_system_id` key):",
        "",
        *_model_rows(FileSystemInput),
        "",
        "## `instance_groups`",
        "",
        "A heterogeneous cluster, instead of `instance_type` / `instance_count`; the distribution names the one group "
        "that runs it (`distribution.instance_groups`). Each group:",
        "",
        *_model_rows(InstanceGroup),
        "",
        "## `tags`",
        "",
        "A list of `{Key, Value}` (as the API spells them) or a plain mapping (`team: vision`); at most 50.",
        "",
        *_model_rows(Tag),
        "",
    ]


def _rules_section() -> list[str]:
    lines = [
        "## Rules across fields",
        "",
        "Checked by `trainops validate` (and before anything is created), all at once: every problem is reported, each "
        "with its field path and what to do. When some fields are invalid, the rules that do not read them still run.",
        "",
        "Which engine a rule binds (`trainops.spec.rule_registry`): *every* engine, or the rule set of the SageMaker "
        f"request (`{SAGEMAKER_REQUEST}`: `ml.*` instance types, their accelerators, the distribution strategies as "
        "SageMaker runs them), which binds where the job runs as that request: the `sagemaker` and `local` backends. "
        "Another engine declares the sets it binds in its vocabulary (`trainops.backends.vocabulary`) and may bring "
        "its own: the `slurm` backend binds its own set (`trainops.backends.slurm.spec_rules`: `instance_type` "
        "describes its nodes, `ml.*` or not, and `torch_distributed` runs on a CPU partition), not the SageMaker "
        "request's. A spec checked without naming its backend (`trainops validate` alone) is checked as the default "
        "backend (local) checks it.",
        "",
        "| rule | binds | reads | what it checks |",
        "| --- | --- | --- | --- |",
    ]
    for check in RULES:
        binds = getattr(check, "binds", None)
        if binds not in (None, SAGEMAKER_REQUEST):
            continue  # an engine's own set: documented with its engine (whether its package is loaded or not)
        doc = " ".join((check.__doc__ or "").split())
        reads = ", ".join(f"`{name}`" for name in sorted(check.reads))  # type: ignore[attr-defined]
        where = "every engine" if binds is None else "sagemaker, local"
        lines.append(f"| `{check.__name__}` | {where} | {reads} | {_cell(doc)} |")
    return lines + [""]


def _backend_section() -> list[str]:
    return [
        "## Checked by the SageMaker backend, not by the spec",
        "",
        "- `trainops render` / submission need `role`, a region (the spec's `region`, `--region`, `AWS_REGION` / "
        "`AWS_DEFAULT_REGION`, the AWS profile's region, or the Airflow AWS connection's `region_name`; the spec's "
        "wins, and clients given for another region are refused), an `s3://` `output_path`, S3 (or FSx/EFS) "
        "channels, `ml.*` instance types, and `framework_version` (or `image_uri`) to pick the AWS Deep Learning "
        "Container. A spec that lacks them is still a valid spec for the local backend.",
        "- Checks that need AWS calls run in the SageMaker backend's preflight (`trainops.backends.sagemaker."
        "preflight`), before anything is created, for FSx for Lustre channels: that every subnet is in the file "
        "system's Availability Zone (one AZ for the instances, the subnet and FSx; several subnets in different AZs "
        "are an error), that the security groups allow Lustre traffic (TCP 988, 1018-1023) among themselves, and "
        "that `directory_path` starts with the file system's mount name. The spec cannot see AZs or security-group "
        "rules without AWS calls, so `trainops validate` does not report these; for EFS only the VPC rule above "
        "applies.",
        "- The preflight also checks capacity (`trainops.backends.sagemaker.capacity`), every problem at once with "
        "its field: a `training_plan` (DescribeTrainingPlan) must be Active, or Scheduled to start within the 2 days "
        "a job may wait Pending for it, be for training jobs, reserve the job's instance type with at least "
        "`instance_count` instances available, have its Availability Zone among the `subnets`', and its capacity "
        "must last past the job's start + `max_run` + the 30 minutes before its end from which SageMaker reclaims the "
        "instances; a job without a plan must fit in the account's service quota for "
        "its instance type (on-demand or spot) beside the InProgress training jobs; `FI_PROVIDER=efa` in "
        "`environment` is refused on an instance type without EFA (the instance catalog), and a multi-host "
        "accelerator job on one is noted. It reads with `sagemaker:DescribeTrainingPlan`, `ec2:DescribeSubnets`, "
        "`servicequotas:ListServiceQuotas`, `servicequotas:GetServiceQuota`, `sagemaker:ListTrainingJobs` and "
        "`sagemaker:DescribeTrainingJob`.",
        "- The preflight refuses a job only for what it read. A read that fails (no permission, an endpoint without "
        "the API such as a moto server or a VPC endpoint that does not reach Service Quotas, a throttled or failing "
        "service, a timeout: one retry, a 10 s read timeout) or an answer without the field a check needs (a file "
        "system described without its Lifecycle or MountName) is a note naming what was not checked and why "
        "(`preflight: ...` before the job is created), never a refusal. The preflight is on by default and is switched "
        "off per run with the SageMaker backend's `preflight: false` option.",
        "",
    ]


def _fidelity_section() -> list[str]:
    return [
        "## YAML numbers and booleans",
        "",
        "Spec files are read with YAML 1.2's core schema, as every current YAML tool reads them (PyYAML alone follows "
        "YAML 1.1): `1e-5` and `1.5e10` are numbers, `0123` is 123, `0o17` octal and `0x1F` hexadecimal; `1:30`, "
        "`1_000` and dates such as `2024-01-01` stay text; only `true` / `false` (also `True`, `TRUE`, `False`, "
        "`FALSE`) are booleans, so `yes`, `no`, `on` and `off` are text; `~`, `null` and an empty value are null. "
        "Quote a value to be sure it stays text (`framework_version: \"2.10\"`).",
        "",
        *_left_out_section(),
        *_differences_section(),
        "## Regenerating the goldens and the image tables",
        "",
        "The differential tests (`tests/differential/`, part of `make test`) compare trainops with the SageMaker "
        "Python SDK v2 and AWS's training toolkits through committed goldens. To regenerate them with the pinned "
        "oracle packages, in a venv of their own (never trainops' dependencies): "
        "`tests/differential/build_oracle_venv.sh`, then `~/.cache/trainops-oracle/bin/python "
        "tests/differential/generate.py`. The image tables (`trainops/spec/image_tables.json`) are regenerated from "
        "the newest SDK's own JSON (v3's sagemaker-core) plus the documented additions by "
        "`tests/differential/build_oracle_venv.sh --v3` and `~/.cache/trainops-oracle-v3/bin/python "
        "tests/differential/regenerate_tables.py`; never edit their SDK-derived parts by hand.",
        "",
    ]


def _differences_section() -> list[str]:
    return [
        "## Deliberate differences from the SDK",
        "",
        "Where the request (or the verdict) differs from the SDK's on purpose; each row is an adjudication of "
        "`tests/differential/ADJUDICATIONS.md` of the same name, pinned by the differential cases it settles.",
        "",
        "| difference | the SDK | trainops | source |",
        "| --- | --- | --- | --- |",
        *[f"| `{row.name}` | {_cell(row.sdk)} | {_cell(row.trainops)} | {_cell(row.source)} |" for row in DIFFERENCES],
        "",
    ]


def _left_out_section() -> list[str]:
    renamed = [f"`{sdk}` is `{field}`" for sdk, field in sorted(COVERED.items()) if sdk != field]
    return [
        "## What the SDK adds and trainops leaves out",
        "",
        f"The SDK v2 estimator (sagemaker {SDK_VERSION}: `EstimatorBase`, `Framework`, `PyTorch`) has "
        f"{len(sdk_parameters())} parameters; the spec takes {len(COVERED)} of them under the SDK's names and value "
        f"shapes ({'; '.join(renamed)}), rendered as the SDK renders them "
        "(`trainops.backends.request.render_options` for the newer ones). These it leaves out:",
        "",
        *[f"- `{name}`: {reason}" for name, reason in sorted(LEFT_OUT.items())],
        "",
        "The SDK's framework estimators also add `DebugHookConfig` (SageMaker Debugger's hook, writing tensors to the "
        "output path for the smdebug library) to every request; trainops does not, so the hook stays off, which "
        "costs nothing and writes nothing. `ProfilerConfig` is sent as the SDK sends it: system monitoring on, under "
        "the output path, except with `disable_profiler: true`, in the regions without the profiler and on Trainium "
        "(`{DisableProfiler: true}`). Everything else `trainops render --launcher toolkit` sends is what the SDK v2 "
        "sends for the same estimator arguments, or a refusal where the SDK would fail; the deliberate differences are "
        "in the table below, each with the AWS documentation that decides it and the differential case that pins it "
        "(`tests/differential/ADJUDICATIONS.md`).",
        "",
        "The local backend runs what it can of these options: `disable_output_compression` leaves the model files "
        "under `<output_path>/<job>/output/model/` and the output data's under `.../output/data/`, as SageMaker's "
        "uncompressed upload mode does (no model.tar.gz, no output.tar.gz), `tensorboard_output_config` "
        "copies the container's TensorBoard directory to its output path when the job ends, `model_uri` is the model "
        "channel, `dependencies` travel with the code, and `container_entry_point` / `container_arguments` start "
        "each emulated host. `enable_infra_check` and `enable_remote_debug` are recorded in the request but not "
        "emulated (the job's log says so); `training_plan`, `instance_placement_config`, `enable_session_tag_chaining`"
        " and `training_repository_*` have no meaning on this machine and are recorded only.",
        "",
    ]


def spec_reference_markdown() -> str:
    """docs/spec.md: every spec field, the distribution forms, channels, SMP parameters and the rules."""
    lines = [
        f"<!-- Generated from the model by `{REGENERATE}`; do not edit by hand. -->",
        "",
        "# The job spec",
        "",
        "A job spec is a YAML or JSON file describing one distributed-training job. Field names follow the SageMaker "
        "Python SDK v2 estimator (`PyTorch(...)`), so an estimator moves over with its argument names. Unknown keys "
        "are errors (with a suggestion for a misspelt one). `trainops validate FILE` checks a spec and the files it "
        "names on this machine (`source_dir`, the `entry_point` in it, each of `dependencies`; relative paths are "
        "against the spec file's directory) with the checks `trainops run` makes before it creates anything, "
        "`trainops render FILE` shows the SageMaker request it becomes, `trainops schema` prints its JSON Schema.",
        "",
        "```yaml",
        "name: smddp-p4d",
        "role: arn:aws:iam::111122223333:role/SageMakerTrainingRole",
        "region: us-east-1",
        "framework_version: \"2.3.0\"",
        "entry_point: train.py",
        "source_dir: src",
        "instance_type: ml.p4d.24xlarge",
        "instance_count: 2",
        "distribution:",
        "  smdistributed:",
        "    dataparallel:",
        "      enabled: true",
        "inputs:",
        "  train: s3://example-training-data/imagenet/train/",
        "output_path: s3://example-training-output/smddp",
        "```",
        "",
        "More in `examples/specs/`.",
        "",
        "## Fields",
        "",
        fields_markdown().rstrip("\n"),
        "",
        *_distribution_section(),
        *_smp_section(),
        *_inputs_section(),
        *_rules_section(),
        *_backend_section(),
        *api_limits_section(),
        *v3_section(),
        *_fidelity_section(),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"
