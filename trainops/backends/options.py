"""Each backend's options for a training job, typed and checked by the backend that owns them.

A front end knows options only by name (a CLI flag, an operator argument, a KFP input); it hands them to
`Backend.submit`, whose backend parses them into its own type here. An option the backend does not know is a
`SpecError` naming the option and the backend's options, never ignored: a ``processes_per_host`` given to a SageMaker
job was silently dropped before, and so was a ``launcher`` typo. A value of None means "not given", so a front end may
pass every argument it has without deciding which backend reads which (an empty mapping or list counts as not given).

The types live beside the seam, not inside each backend, so that a front end can build them without importing a
concrete backend (kubeflow/sdk's options objects are the model); a third-party backend declares its own subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from trainops.errors import Problem, SpecError

#: The two launchers a SageMaker request can carry: trainops' runtime, or the image's own toolkit.
LAUNCHERS = ("trainops", "toolkit")

OptionsT = TypeVar("OptionsT", bound="BackendOptions")


@dataclass(frozen=True)
class BackendOptions:
    """The options one backend takes for a training job; subclasses declare their fields."""

    backend: ClassVar[str] = ""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(item.name for item in fields(cls))

    @classmethod
    def parse(cls: type[OptionsT], values: BackendOptions | Mapping[str, Any] | None = None,
              source: str | None = None) -> OptionsT:
        """These options from a mapping (None values left out), an instance of this type, or nothing.

        Raises `SpecError` naming every option this backend does not know, and an options object of another
        backend's type."""
        if values is None:
            return cls()
        if isinstance(values, cls):
            return values
        if isinstance(values, BackendOptions):
            raise SpecError(Problem("options", f"{type(values).__name__} holds options of the {values.backend} "
                                               f"backend, not of the {cls.backend} backend"), source)
        given = {key: value for key, value in values.items() if _given(value)}
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            known = ", ".join(cls.names()) or "none"
            raise SpecError([Problem(key, f"is not an option of the {cls.backend} backend (its options: {known}); "
                                          "leave it out or choose the backend it belongs to")
                             for key in unknown], source)
        return cls(**given)

    def merged(self: OptionsT, values: Mapping[str, Any]) -> OptionsT:
        """A copy with ``values`` (None values left out) laid over these options, checked the same way."""
        current = {name: getattr(self, name) for name in self.names()}
        return type(self).parse({**current, **{key: value for key, value in values.items() if _given(value)}})

    def to_dict(self) -> dict[str, Any]:
        """The options given (not None), for a record or an XCom; callables are left out."""
        return {name: value for name in self.names()
                if (value := getattr(self, name)) is not None and not callable(value)}


def _given(value: Any) -> bool:
    """None and an empty mapping or list mean "not given" (a CLI's ``--channel`` flags, none used, make ``{}``)."""
    return value is not None and not (isinstance(value, (Mapping, list, tuple)) and not value)


def _launcher_problem(launcher: str | None) -> Problem | None:
    if launcher is not None and launcher not in LAUNCHERS:
        return Problem("launcher", f"{launcher!r} is not a launcher; use one of {', '.join(LAUNCHERS)}")
    return None


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """Options of a job on the local backend (emulated hosts on this machine).

    Args:
        processes_per_host: ranks per emulated host (default: the spec's, else the GPUs, else one).
        channel_overrides: channel name -> a local directory, where the spec's channel is in S3 or FSx.
        checkpoint_key: the checkpoint directory's key under the state root (default: the job's name), so that the
            attempts of one task resume from the same checkpoints.
        launcher: ``trainops`` (the runtime) or ``toolkit`` (the image's own toolkit launches).
        image_python: the interpreter standing for the training image (a venv without trainops).
        on_job: called with the prepared job before it runs in this process (prefer ``Backend.stop(handle)``).
    """

    backend: ClassVar[str] = "local"

    processes_per_host: int | None = None
    channel_overrides: Mapping[str, str] | None = None
    checkpoint_key: str | None = None
    launcher: str | None = None
    image_python: str | None = None
    on_job: Callable[[Any], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        problems = []
        count = self.processes_per_host
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            problems.append(Problem("processes_per_host", f"{count!r} is not a whole number of at least 1"))
        overrides = self.channel_overrides
        if overrides is not None and (not isinstance(overrides, Mapping) or not all(
                isinstance(key, str) and isinstance(value, str) for key, value in overrides.items())):
            problems.append(Problem("channel_overrides", "give a mapping of channel name -> local directory "
                                                         "(both strings)"))
        if self.checkpoint_key is not None and not isinstance(self.checkpoint_key, str):
            problems.append(Problem("checkpoint_key", f"{self.checkpoint_key!r} is not a string"))
        if self.image_python is not None and not isinstance(self.image_python, str):
            problems.append(Problem("image_python", f"{self.image_python!r} is not a path to an interpreter"))
        if self.on_job is not None and not callable(self.on_job):
            problems.append(Problem("on_job", "is not callable"))
        launcher = _launcher_problem(self.launcher)
        problems += [launcher] if launcher else []
        if problems:
            raise SpecError(problems)


@dataclass(frozen=True)
class SageMakerOptions(BackendOptions):
    """Options of a job on the SageMaker backend.

    Args:
        launcher: ``trainops`` (the runtime as the entrypoint) or ``toolkit`` (the DLC's own toolkit; the SDK's
            hyperparameter encoding). Default: the spec's.
        preflight: check FSx, VPC and capacity settings with AWS calls before the job is created (default True).
    """

    backend: ClassVar[str] = "sagemaker"

    launcher: str | None = None
    preflight: bool = True

    def __post_init__(self) -> None:
        problems = []
        launcher = _launcher_problem(self.launcher)
        problems += [launcher] if launcher else []
        if not isinstance(self.preflight, bool):
            problems.append(Problem("preflight", f"{self.preflight!r} is not true or false"))
        if problems:
            raise SpecError(problems)
