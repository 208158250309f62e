"""What the slurm backend takes: where the cluster is (`SlurmCluster`, the backend's context) and a job's options
(`SlurmOptions`), each checked by the backend that owns them.

Where the cluster is and how it is reached (``shared_dir``, ``transport``, the ``rest_*`` settings) bind the
backend (`SlurmBackend`'s keywords, `Backend.CONTEXT`) and travel in every handle, so `trainops status NAME` finds a
job with them alone; the others are the job's (partition, account, the interpreter on the nodes, HyperPod's
auto-resume...). A front end passes both in one mapping (the CLI's ``-o KEY=VALUE``, a pipeline file's
``backend_options``); the seam splits it and coerces text to the declared types.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from trainops.backends.options import BackendOptions, front_end_option_problems, path_problems
from trainops.backends.slurm.sbatch_names import FLAGS, resolve
from trainops.errors import Problem, SpecError

TRANSPORTS = ("cli", "rest")
#: The slurmrestd API this backend speaks, pinned (Slurm 22.05; `trainops.backends.slurm.rest` asks the server for it).
REST_API = "v0.0.38"
#: The settings that say where the cluster is (`SlurmCluster`): the backend's context, carried by every handle.
CLUSTER_SETTINGS = ("shared_dir", "transport", "rest_url", "rest_user", "rest_token_file")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@%,=+/-]*\Z")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _boolean(value: Any, name: str, problems: list[Problem]) -> Any:
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    if value is not None and not isinstance(value, bool):
        problems.append(Problem(name, f"{value!r} is not true or false"))
    return value


def _whole(value: Any, name: str, problems: list[Problem]) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        problems.append(Problem(name, f"{value!r} is not a whole number of at least 1"))
    return value


def _word(value: Any, name: str, problems: list[Problem], what: str) -> None:
    if value is not None and (not isinstance(value, str) or not _WORD.match(value)):
        problems.append(Problem(name, f"{value!r} is not {what} (letters, digits and . _ : @ % , = + / -, no "
                                      "spaces)"))


@dataclass(frozen=True)
class SlurmCluster:
    """Where a Slurm cluster's trainops jobs live and how it is reached (the slurm backend's context).

    Args:
        shared_dir: a directory every node and this machine see, yours alone (``jobs/``, ``checkpoints/`` and
            ``output/`` are kept under it; on HyperPod a directory on the FSx for Lustre mount, e.g.
            ``/fsx/<user>/trainops``).
        transport: ``cli`` (the Slurm commands, on a login node: default) or ``rest`` (slurmrestd).
        rest_url: slurmrestd's address (``http://host:6820``) for ``transport: rest``.
        rest_user: the Slurm user the token belongs to (default: this process's user).
        rest_token_file: a file holding the JWT (``scontrol token``); default: the ``SLURM_JWT`` variable.
    """

    shared_dir: str | None = None
    transport: str | None = None
    rest_url: str | None = None
    rest_user: str | None = None
    rest_token_file: str | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        path_problems(self.shared_dir, "shared_dir", problems, absolute=True)
        path_problems(self.rest_token_file, "rest_token_file", problems)
        if self.transport is not None and self.transport not in TRANSPORTS:
            problems.append(Problem("transport", f"{self.transport!r} is not a transport; use one of "
                                                 f"{', '.join(TRANSPORTS)}"))
        if self.rest_url is not None and not (isinstance(self.rest_url, str)
                                              and re.match(r"^https?://[^\s/]+(/[^\s]*)?\Z", self.rest_url)):
            problems.append(Problem("rest_url", f"{self.rest_url!r} is not an http:// or https:// address"))
        _word(self.rest_user, "rest_user", problems, "a user name")
        if problems:
            raise SpecError(problems, "slurm backend settings")

    def given(self) -> dict[str, str]:
        """The settings given (a handle's location)."""
        return {name: value for name in CLUSTER_SETTINGS if (value := getattr(self, name)) is not None}


@dataclass(frozen=True)
class SlurmOptions(BackendOptions):
    """Options of a job on the slurm backend.

    Args:
        partition, account, qos, reservation, constraint: as sbatch's options of those names.
        exclusive: whole nodes for the job (sbatch ``--exclusive``; default true: distributed training wants them).
        python: the interpreter on the nodes that runs the ranks (a conda or venv on the shared file system;
            default ``python3``); it needs the training script's packages, not trainops.
        processes_per_host: ranks per node (default: the spec's, else the GPUs, else one).
        channel_overrides: channel name -> a directory every node sees, for an FSx or S3 channel.
        fsx_mount: where the FSx for Lustre file system is mounted on the nodes (HyperPod: ``/fsx``): an FSx
            channel's ``/<mountname>/path`` is read at ``<fsx_mount>/path``.
        checkpoint_key: the checkpoint directory's key under ``shared_dir/checkpoints`` (the train step gives its job's
            name, so the attempts <name>-N resume; default: the spec's checkpoint_s3_uri, else the job's name).
        hyperpod: a SageMaker HyperPod cluster: ``srun --auto-resume=1`` (its plugin replaces a faulty node and runs
            the step again from the last checkpoint).
        sbatch_options: more sbatch options (``--name=value`` without the dashes, e.g. ``{"gres": "gpu:8"}``;
            ``transport: cli`` only): those of `trainops.backends.slurm.sbatch_names.PASSED` (and its ``FLAGS``,
            ``true``), each name read as sbatch reads it (any unambiguous prefix); those trainops sets are refused.
        launcher: ``trainops`` only (the toolkit needs /opt/ml and algo-N names: a container per host).
    """

    backend: ClassVar[str] = "slurm"

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    exclusive: bool | None = None
    python: str | None = None
    processes_per_host: int | None = None
    channel_overrides: Mapping[str, str] | None = None
    fsx_mount: str | None = None
    checkpoint_key: str | None = None
    hyperpod: bool | None = None
    sbatch_options: Mapping[str, str] | None = None
    launcher: str | None = None

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        for name in ("exclusive", "hyperpod"):
            object.__setattr__(self, name, _boolean(getattr(self, name), name, problems))
        object.__setattr__(self, "processes_per_host", _whole(self.processes_per_host, "processes_per_host",
                                                              problems))
        path_problems(self.python, "python", problems)
        path_problems(self.fsx_mount, "fsx_mount", problems, absolute=True)
        for name, what in (("partition", "a partition name"), ("account", "an account name"),
                           ("qos", "a QOS name"), ("reservation", "a reservation name"),
                           ("constraint", "a feature expression")):
            _word(getattr(self, name), name, problems, what)
        problems += front_end_option_problems(self.channel_overrides, self.checkpoint_key,
                                              directory="absolute directory every node sees",
                                              is_directory=os.path.isabs)
        object.__setattr__(self, "sbatch_options", _sbatch_options(self.sbatch_options, problems))
        if self.launcher is not None and self.launcher != "trainops":
            problems.append(Problem("launcher", f"{self.launcher!r}: the slurm backend runs the trainops launcher "
                                                "only (the toolkit reads /opt/ml and reaches hosts as algo-N, which "
                                                "needs a container per host); leave launcher out"))
        if problems:
            raise SpecError(problems, "slurm options")


def _sbatch_options(values: Any, problems: list[Problem]) -> dict[str, str] | None:
    """``sbatch_options`` with each name resolved as sbatch resolves it (`sbatch_names.resolve`: any unambiguous
    prefix), as {full option name: value}; a flag's value is ``true`` (``false`` leaves it out)."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        problems.append(Problem("sbatch_options", "give a mapping of sbatch option name (no dashes) -> value"))
        return None
    chosen: dict[str, str] = {}
    for key, value in values.items():
        option, refused = resolve(str(key)) if isinstance(key, str) else (None, "is not an sbatch option name")
        if refused is not None or option is None:
            problems.append(Problem(f"sbatch_options.{key}", refused or "is not an sbatch option"))
        elif option in chosen:
            problems.append(Problem(f"sbatch_options.{key}", f"names --{option} again"))
        elif option in FLAGS:
            flag = _boolean(value, f"sbatch_options.{key}", problems)
            if flag is True:
                chosen[option] = "true"
        elif not isinstance(value, (str, int)) or isinstance(value, bool) or not _WORD.match(str(value)):
            problems.append(Problem(f"sbatch_options.{key}", f"{value!r}: give one word (no spaces, quotes or "
                                                             "line breaks)"))
        else:
            chosen[option] = str(value)
    return chosen
