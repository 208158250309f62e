"""The distribution-config model: one discriminated union shared by the runtime, the operators and the components.

Two spellings parse into it (docs/contracts.md, section 1):
- the typed, tagged form: `{"type": "smddp", "custom_mpi_options": "..."}`;
- the SageMaker Python SDK's dict form: `{"smdistributed": {"dataparallel": {"enabled": true}}}`.
Both round-trip: `to_sdk_dict()` gives the SDK's dict back and `model_dump(mode="json")` the tagged JSON the runtime
reads.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from trainops.errors import Problem
from trainops.spec.base import CoreModel, raise_problems, shell_metacharacter_problem
from trainops.spec.smp import smp_parameter_problems

ProcessesPerHost = Annotated[int, Field(ge=1, le=1024)]


class _Distribution(CoreModel):
    """Fields every variant shares."""

    instance_groups: list[str] | None = Field(
        default=None, description="Names of the instance groups (heterogeneous clusters) that run the distribution."
    )
    # The SDK dict the user wrote, when the spec used that spelling: the SDK encodes it section by section (a section
    # present but disabled still sends its flag), so the toolkit launcher's hyperparameters are derived from it.
    _sdk_form: dict[str, Any] | None = PrivateAttr(default=None)
    if TYPE_CHECKING:  # every variant declares its own Literal ``type`` (the discriminator)
        type: str

    def __eq__(self, other: object) -> bool:
        # Equal distributions are equal whichever spelling they came from: the remembered SDK dict is not compared.
        return type(self) is type(other) and self.__dict__ == other.__dict__  # type: ignore[union-attr]

    __hash__ = None  # type: ignore[assignment]

    def sdk_form(self) -> dict[str, Any]:
        """The SDK's dict as the user wrote it, else this variant's equivalent (`to_sdk_dict`)."""
        return self._sdk_form if self._sdk_form is not None else self.to_sdk_dict()

    def to_sdk_dict(self) -> dict[str, Any]:
        """The SageMaker SDK's `distribution` dict for this variant."""
        body = self._sdk_body()
        if self.instance_groups:
            body["instance_groups"] = list(self.instance_groups)
        return body

    def to_canonical(self) -> dict[str, Any]:
        """The typed JSON form the runtime reads (docs/contracts.md, section 1): `type` first, no nulls."""
        body = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {"type": body.pop("type"), **body}

    def _sdk_body(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def launcher(self) -> str:
        """Which launcher runs the ranks in the container: none, torchrun, mpirun or per-host (TF_CONFIG)."""
        raise NotImplementedError


class _MpiOptions(CoreModel):
    custom_mpi_options: str = Field(
        default="", max_length=4096, description="Extra mpirun options, split like a shell would; never run by one."
    )

    @field_validator("custom_mpi_options")
    @classmethod
    def _options_are_safe(cls, value: str) -> str:
        problem = shell_metacharacter_problem("", value)
        if problem:
            raise ValueError(problem.message)
        try:
            shlex.split(value)
        except ValueError as error:
            raise ValueError(f"cannot be split into arguments ({error}): check the quotes") from None
        return value

    def mpi_arguments(self) -> list[str]:
        """The custom options as the argv items they become."""
        return shlex.split(self.custom_mpi_options)


class NoDistribution(_Distribution):
    """One process per host, started plainly."""

    type: Literal["none"] = "none"

    def _sdk_body(self) -> dict[str, Any]:
        return {}

    @property
    def launcher(self) -> str:
        return "none"


class TorchDistributed(_Distribution):
    """PyTorch DDP (or anything torchrun runs) through torchrun; on Trainium over NeuronCores."""

    type: Literal["torch_distributed"] = "torch_distributed"
    processes_per_host: ProcessesPerHost | None = Field(
        default=None, description="Ranks per host; default: GPUs, else NeuronCores, else 1. The toolkit launcher "
        "sends it as the SDK's sagemaker_mpi_num_of_processes_per_host, which AWS's toolkit gives torchrun as "
        "--nproc_per_node (the SDK's own form cannot send it with torch_distributed alone)."
    )
    neuron_parallel_compile: bool = Field(
        default=False, description="Trainium: run once under neuron_parallel_compile to fill the compile cache."
    )

    def _sdk_body(self) -> dict[str, Any]:
        return {"torch_distributed": {"enabled": True}}

    @property
    def launcher(self) -> str:
        return "torchrun"


class PyTorchDDP(_MpiOptions, _Distribution):
    """The SDK's `pytorchddp`: PyTorch DDP launched by mpirun in the container."""

    type: Literal["pytorchddp"] = "pytorchddp"

    def _sdk_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"enabled": True}
        if self.custom_mpi_options:
            body["custom_mpi_options"] = self.custom_mpi_options
        return {"pytorchddp": body}

    @property
    def launcher(self) -> str:
        return "mpirun"


class SMDDP(_MpiOptions, _Distribution):
    """The SageMaker distributed data parallel library (SMDDP): mpirun for AllReduce, torchrun for AllGather."""

    type: Literal["smddp"] = "smddp"
    launcher_kind: Literal["mpirun", "torchrun"] = Field(
        default="mpirun", alias="launcher", description="mpirun (AllReduce) or torchrun (AllGather)."
    )
    processes_per_host: ProcessesPerHost | None = Field(
        default=None, description="Ranks per host (default: the GPU count); the SDK's form: mpi: {processes_per_host: "
        "N} beside smdistributed.")

    def _sdk_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"smdistributed": {"dataparallel": {"enabled": True}}}
        if self.custom_mpi_options:
            body["smdistributed"]["dataparallel"]["custom_mpi_options"] = self.custom_mpi_options
        if self.launcher_kind == "torchrun":
            body["torch_distributed"] = {"enabled": True}
        if self.processes_per_host is not None:
            body["mpi"] = {"processes_per_host": self.processes_per_host}  # sent, disabled: the toolkit reads it
        return body

    @property
    def launcher(self) -> str:
        return self.launcher_kind


class SMP(_MpiOptions, _Distribution):
    """The SageMaker model parallelism library: v2 (torchrun, FSDP + tensor parallel) or v1 (mpirun)."""

    type: Literal["smp"] = "smp"
    launcher_kind: Literal["torchrun", "mpirun"] = Field(
        default="torchrun", alias="launcher", description="torchrun (SMP v2) or mpirun (SMP v1)."
    )
    parameters: dict[str, Any] = Field(default_factory=dict, description="The library's parameters (v2 or v1 keys).")
    processes_per_host: ProcessesPerHost | None = Field(
        default=None, description="Ranks per host (default: the GPU count).")

    @property
    def version(self) -> int:
        """2 for the torchrun-launched library (PyTorch 2.x), 1 for the mpirun one."""
        return 2 if self.launcher_kind == "torchrun" else 1

    @model_validator(mode="after")
    def _parameters_fit_the_version(self) -> SMP:
        raise_problems("SMP", smp_parameter_problems(self.parameters, self.version, "parameters"), self.parameters)
        return self

    def _sdk_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"smdistributed": {"modelparallel": {"enabled": True,
                                                                   "parameters": dict(self.parameters)}}}
        if self.version == 2:
            body["torch_distributed"] = {"enabled": True}
            if self.processes_per_host is not None:
                body["mpi"] = {"processes_per_host": self.processes_per_host}  # sent, disabled: torchrun reads it
        else:
            mpi: dict[str, Any] = {"enabled": True}
            if self.processes_per_host is not None:
                mpi["processes_per_host"] = self.processes_per_host
            if self.custom_mpi_options:
                mpi["custom_mpi_options"] = self.custom_mpi_options
            body["mpi"] = mpi
        return body

    @property
    def launcher(self) -> str:
        return self.launcher_kind


class MPI(_MpiOptions, _Distribution):
    """Plain MPI: mpirun starts `processes_per_host` ranks on every host."""

    type: Literal["mpi"] = "mpi"
    processes_per_host: ProcessesPerHost | None = Field(
        default=None, description="Ranks per host; default: GPUs, else NeuronCores, else 1.")

    def _sdk_body(self) -> dict[str, Any]:
        mpi: dict[str, Any] = {"enabled": True}
        if self.processes_per_host is not None:
            mpi["processes_per_host"] = self.processes_per_host
        if self.custom_mpi_options:
            mpi["custom_mpi_options"] = self.custom_mpi_options
        return {"mpi": mpi}

    @property
    def launcher(self) -> str:
        return "mpirun"


class ParameterServer(_Distribution):
    """TensorFlow parameter servers: one worker per host, cluster spec in TF_CONFIG."""

    type: Literal["parameter_server"] = "parameter_server"

    def _sdk_body(self) -> dict[str, Any]:
        return {"parameter_server": {"enabled": True}}

    @property
    def launcher(self) -> str:
        return "per_host"


class PyTorchXLA(_Distribution):
    """PyTorch/XLA multi-worker (SageMaker Training Compiler on GPUs)."""

    type: Literal["pytorchxla"] = "pytorchxla"

    def _sdk_body(self) -> dict[str, Any]:
        return {"pytorchxla": {"enabled": True}}

    @property
    def launcher(self) -> str:
        return "torchrun"


class MultiWorkerMirroredStrategy(_Distribution):
    """TensorFlow's MultiWorkerMirroredStrategy: one process per host, cluster spec in TF_CONFIG."""

    type: Literal["multi_worker_mirrored_strategy"] = "multi_worker_mirrored_strategy"

    def _sdk_body(self) -> dict[str, Any]:
        return {"multi_worker_mirrored_strategy": {"enabled": True}}

    @property
    def launcher(self) -> str:
        return "per_host"


TypedDistribution = Annotated[
    NoDistribution | TorchDistributed | PyTorchDDP | SMDDP | SMP | MPI | ParameterServer | PyTorchXLA
    | MultiWorkerMirroredStrategy,
    Field(discriminator="type"),
]

# ---------------------------------------------------------------------------------------------------------------
# The SDK's dict form, modelled key by key so a typo inside it is reported at its own path.


class _Enabled(CoreModel):
    enabled: bool = Field(default=False, description="Turns the strategy on.")


class _SdkMpi(_MpiOptions, _Enabled):
    processes_per_host: ProcessesPerHost | None = Field(
        default=None, description="Ranks mpirun starts per host; default: GPUs, else NeuronCores, else 1.")


class _SdkDataParallel(_MpiOptions, _Enabled):
    pass


class _SdkModelParallel(_Enabled):
    parameters: dict[str, Any] = Field(default_factory=dict, description="SMP parameters (v2 or v1 keys).")


class _SdkSmdistributed(CoreModel):
    dataparallel: _SdkDataParallel | None = Field(
        default=None, description="SMDDP: {enabled, custom_mpi_options}.")
    modelparallel: _SdkModelParallel | None = Field(
        default=None, description="SMP: {enabled, parameters}; with torch_distributed (v2) or mpi (v1).")


class SdkDistribution(CoreModel):
    """The SageMaker Python SDK's `distribution` dict, with every key the SDK knows."""

    pytorchddp: _SdkDataParallel | None = Field(
        default=None, description="PyTorch DDP launched by mpirun (smddprun): {enabled, custom_mpi_options}.")
    torch_distributed: _Enabled | None = Field(
        default=None, description="torchrun (GPU or Trainium); with smdistributed: SMP v2 or SMDDP AllGather.")
    smdistributed: _SdkSmdistributed | None = Field(
        default=None, description="The SageMaker libraries: dataparallel (SMDDP) or modelparallel (SMP).")
    mpi: _SdkMpi | None = Field(
        default=None, description="mpirun: {enabled, processes_per_host, custom_mpi_options}; with SMP: v1.")
    parameter_server: _Enabled | None = Field(default=None, description="TensorFlow parameter servers.")
    pytorchxla: _Enabled | None = Field(default=None, description="PyTorch/XLA multi-worker (Training Compiler).")
    multi_worker_mirrored_strategy: _Enabled | None = Field(
        default=None, description="TensorFlow MultiWorkerMirroredStrategy.")
    instance_groups: list[str] | None = Field(
        default=None, description="The instance group that runs the distribution (heterogeneous clusters).")

    def _enabled(self, name: str) -> bool:
        section = getattr(self, name)
        return bool(section and section.enabled)

    def to_typed(self) -> _Distribution:
        """The one typed variant this dict asks for; every conflicting combination is a problem at its path."""
        smd = self.smdistributed
        data_parallel = bool(smd and smd.dataparallel and smd.dataparallel.enabled)
        model_parallel = bool(smd and smd.modelparallel and smd.modelparallel.enabled)
        groups: dict[str, Any] = {"instance_groups": self.instance_groups}
        problems: list[Problem] = []
        if data_parallel and model_parallel:
            problems.append(Problem("smdistributed", "use one smdistributed strategy at a time: dataparallel or "
                                                     "modelparallel"))
        if self._enabled("pytorchddp") and (data_parallel or model_parallel):
            problems.append(Problem("pytorchddp", "pytorchddp and smdistributed cannot be combined: choose one"))
        if model_parallel and not problems:
            return self._model_parallel(groups)
        if data_parallel and not problems:
            if self._enabled("mpi"):
                problems.append(Problem("mpi", "smdistributed.dataparallel brings its own mpirun: remove mpi"))
            else:
                launcher: Literal["torchrun", "mpirun"] = "torchrun" if self._enabled("torch_distributed") else "mpirun"
                assert smd is not None and smd.dataparallel is not None  # data_parallel says it is enabled
                # The SDK sends the mpi section's processes_per_host beside smdistributed, and the toolkit's SMDDP
                # mpirun and torchrun both start that many ranks per host.
                return SMDDP(launcher=launcher, custom_mpi_options=smd.dataparallel.custom_mpi_options,
                             processes_per_host=self.mpi.processes_per_host if self.mpi else None, **groups)
        simple = [
            name
            for name in ("pytorchddp", "torch_distributed", "mpi", "parameter_server", "pytorchxla",
                         "multi_worker_mirrored_strategy")
            if self._enabled(name)
        ]
        if simple[:2] == ["torch_distributed", "mpi"] and len(simple) == 2:
            # The SDK's PyTorch estimator sends torch_distributed alone when both are enabled (mpi is dropped).
            simple = ["torch_distributed"]
        if simple[:1] in (["torch_distributed"], ["pytorchddp"]) and self.mpi and self.mpi.processes_per_host \
                and not problems:
            # The SDK's PyTorch estimator sends only the launcher's own keys here (sagemaker/pytorch/estimator.py):
            # the toolkit would start one rank per GPU whatever this says.
            typed = "{type: torch_distributed, processes_per_host: N}" if simple[0] == "torch_distributed" else \
                "smdistributed.dataparallel with mpi: {processes_per_host: N}"
            problems.append(Problem("mpi.processes_per_host", f"is not sent with {simple[0]} alone (the SDK drops the "
                                                              f"mpi section, so the toolkit would start one rank per "
                                                              f"GPU): use {typed}, or remove it"))
        if len(simple) > 1 and not problems:
            together = " and ".join(simple)
            problems.append(Problem(simple[1], f"{together} are enabled together: enable only one strategy"))
        raise_problems("distribution", problems, self.model_dump())
        if not simple:
            return NoDistribution(**groups)
        name = simple[0]
        if name == "mpi":
            assert self.mpi is not None  # enabled, so given
            return MPI(processes_per_host=self.mpi.processes_per_host, custom_mpi_options=self.mpi.custom_mpi_options,
                       **groups)
        if name == "pytorchddp":
            assert self.pytorchddp is not None  # enabled, so given
            return PyTorchDDP(custom_mpi_options=self.pytorchddp.custom_mpi_options, **groups)
        variant = {
            "torch_distributed": TorchDistributed,
            "parameter_server": ParameterServer,
            "pytorchxla": PyTorchXLA,
            "multi_worker_mirrored_strategy": MultiWorkerMirroredStrategy,
        }[name]
        return variant(**groups)

    def _model_parallel(self, groups: dict[str, Any]) -> SMP:
        assert self.smdistributed is not None and self.smdistributed.modelparallel is not None  # enabled, so given
        parameters = self.smdistributed.modelparallel.parameters
        if self._enabled("torch_distributed") and self._enabled("mpi"):
            raise_problems("distribution", [Problem(
                "mpi", "smdistributed.modelparallel runs under torch_distributed (SMP v2) or mpi (SMP v1), not both: "
                       "remove one")], parameters)
        if self._enabled("torch_distributed"):
            # A disabled mpi section's processes_per_host is sent (and read by the toolkit's torchrun).
            processes = self.mpi.processes_per_host if self.mpi else None
            return _at_sdk_path(lambda: SMP(launcher="torchrun", parameters=parameters,
                                            processes_per_host=processes, **groups))
        if self._enabled("mpi"):
            assert self.mpi is not None  # enabled, so given
            mpi = self.mpi
            return _at_sdk_path(lambda: SMP(
                launcher="mpirun", parameters=parameters, processes_per_host=mpi.processes_per_host,
                custom_mpi_options=mpi.custom_mpi_options, **groups))
        raise_problems(
            "distribution",
            [Problem("smdistributed.modelparallel",
                     "needs a launcher: add torch_distributed: {enabled: true} (SMP v2, PyTorch 2.x) or "
                     "mpi: {enabled: true, processes_per_host: N} (SMP v1)")],
            parameters,
        )
        raise AssertionError("unreachable")  # raise_problems raised


def _at_sdk_path(build: Any) -> SMP:
    """Build the SMP variant, reporting its parameter problems where the SDK form spells them."""
    try:
        return build()
    except ValidationError as error:
        raise_problems("distribution", [
            Problem(".".join(["smdistributed", "modelparallel", *map(str, item["loc"])]),
                    item["ctx"]["message"] if item["type"] == "trainops_rule" else item["msg"])
            for item in error.errors(include_url=False)
        ], None)
        raise


def _which_form(value: Any) -> str:
    if isinstance(value, dict) and "type" in value:
        return "typed"
    if isinstance(value, _Distribution):
        return "typed"
    return "sdk"


# What the job spec's `distribution` field accepts: either spelling. The job spec converts the SDK form to the typed
# variant right after validation, so code downstream only ever sees `_Distribution` subclasses.
DistributionInput = Annotated[
    Annotated[TypedDistribution, Tag("typed")] | Annotated[SdkDistribution, Tag("sdk")],
    Discriminator(_which_form),
]

Distribution = _Distribution

__all__ = [
    "Distribution",
    "DistributionInput",
    "MPI",
    "MultiWorkerMirroredStrategy",
    "NoDistribution",
    "ParameterServer",
    "PyTorchDDP",
    "PyTorchXLA",
    "SMDDP",
    "SMP",
    "SdkDistribution",
    "TorchDistributed",
    "TypedDistribution",
    "parse_distribution",
]


def parse_distribution(value: Any) -> _Distribution:
    """Parse either spelling into the typed variant (raises pydantic's ValidationError on bad input)."""
    parsed = TypeAdapter(DistributionInput).validate_python(value if value is not None else {})
    return parsed.to_typed() if isinstance(parsed, SdkDistribution) else parsed
