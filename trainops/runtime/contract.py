"""Reading the SageMaker container contract: the files a training container finds under its base directory.

The base directory is ``/opt/ml``, or ``SAGEMAKER_BASE_DIR`` when set (the AWS toolkit's own convention); the layout
is in docs/contracts.md, section 3. Reading is the only thing done here: no hardware probing, no environment writes.
Every problem is a :class:`ContractError` that names the file and says what to do (the CLI exits 2 on it).

Function-local imports (runtime start): every process of the runtime (the launcher, each rank, a training script's
helpers) imports only what its command runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops.runtime.errors import TrainopsError
from trainops.runtime.untrusted import read_json, unreadable

DEFAULT_BASE_DIR = "/opt/ml"
#: The most one file of ``input/config`` may hold: SageMaker's own limits keep each far smaller (hyperparameters:
#: 100 of 2,500 characters at most).
CONFIG_LIMIT_BYTES = 1024 * 1024

#: Channels whose names start with this carry trainops itself (code, runtime), not the user's data.
FRAMEWORK_CHANNEL_PREFIX = "trainops_"

CODE_CHANNEL = "trainops_code"


class ContractError(TrainopsError):
    """The container contract is missing or malformed (exit code 2: bad input, not a failed job)."""

    exit_code = 2


@dataclass(frozen=True)
class Contract:
    """What one host's contract directory says, as read from disk."""

    base_dir: str
    current_host: str
    hosts: tuple[str, ...]  # sorted as strings, as SageMaker ranks them: algo-1, algo-10, algo-2
    instance_type: str
    network_interface: str
    current_group: str | None
    resource_config: dict[str, Any]
    hyperparameters: dict[str, Any]  # raw: the json-encoded strings of hyperparameters.json
    input_data_config: dict[str, Any]
    channels: dict[str, str] = field(default_factory=dict)  # user channels: name -> directory
    code_dir: str | None = None

    def path(self, *parts: str) -> str:
        """A path under the base directory."""
        return os.path.join(self.base_dir, *parts)

    @property
    def model_dir(self) -> str:
        return self.path("model")

    @property
    def output_dir(self) -> str:
        return self.path("output")

    @property
    def output_data_dir(self) -> str:
        return self.path("output", "data")

    @property
    def input_dir(self) -> str:
        return self.path("input")

    @property
    def input_config_dir(self) -> str:
        return self.path("input", "config")

    @property
    def failure_path(self) -> str:
        return self.path("output", "failure")

    @property
    def success_path(self) -> str:
        return self.path("output", "success")

    @property
    def default_checkpoint_dir(self) -> str:
        return self.path("checkpoints")

    @property
    def record_dir(self) -> str:
        """Where each rank of this host leaves its record and stderr tail (docs/contracts.md, section 4)."""
        return self.path("output", "ranks")


def base_directory(environ: Mapping[str, str] | None = None) -> str:
    """The contract's base directory: ``SAGEMAKER_BASE_DIR`` when set, else ``/opt/ml``."""
    environ = os.environ if environ is None else environ
    return os.path.abspath(environ.get("SAGEMAKER_BASE_DIR") or DEFAULT_BASE_DIR)


def read_config(path: str, required: bool = False, what_to_do: str = "") -> Any:
    """The JSON value of one file of ``input/config``; None when it is missing and not ``required``. Read as hostile
    (`read_json`: at most CONFIG_LIMIT_BYTES, a regular file only, never blocking on a FIFO): an earlier run's rank
    could have left anything in a reused contract directory. Anything unreadable is a `ContractError` naming it."""
    try:
        return read_json(path, CONFIG_LIMIT_BYTES, expect=object)
    except FileNotFoundError:
        if required:
            raise ContractError(f"missing {path}: {what_to_do}") from None
        return None
    except (OSError, ValueError) as error:
        raise ContractError(f"cannot read {unreadable(error)}; it must hold a JSON object") from None


def _expect_object(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ContractError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def code_tarball(base_dir: str) -> str | None:
    """The code channel's one ``.tar.gz`` file when the code arrived as a tarball (an ``s3://.../sourcedir.tar.gz``
    source_dir is sent as the channel as it is), else None."""
    channel = os.path.join(base_dir, "input", "data", CODE_CHANNEL)
    try:
        entries = [entry for entry in os.listdir(channel) if not entry.startswith(".")]
    except OSError:
        return None
    if len(entries) == 1 and entries[0].endswith(".tar.gz") and os.path.isfile(os.path.join(channel, entries[0])):
        return os.path.join(channel, entries[0])
    return None


def unpack_code_tarball(base_dir: str) -> str | None:
    """Unpack the code channel's tarball (`code_tarball`) into ``<base>/code``, once; returns that directory, or None
    when the code did not come as a tarball. Every header is checked before anything is written
    (`trainops.runtime.code_tarball`: no link, device, sparse member, absolute path or ``..``, no lying size or
    time, no bomb, nothing dropped after a corrupt header): a refusal is a ContractError naming the member."""
    import tarfile
    import zlib

    from trainops.runtime.code_tarball import TarballRefused, checked_members

    archive = code_tarball(base_dir)
    if archive is None:
        return None
    destination = os.path.join(base_dir, "code")
    marker = os.path.join(destination, ".trainops-unpacked")
    if os.path.exists(marker):
        return destination
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = checked_members(tar, archive)
            os.makedirs(destination, exist_ok=True)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(destination, members=members, filter="data")
            else:  # Pythons before 3.11.4: the members were checked above
                tar.extractall(destination, members=members)
    except (TarballRefused, OSError, tarfile.TarError, EOFError, zlib.error) as error:
        raise ContractError(f"cannot unpack the code tarball {archive}: {error}") from None
    from trainops.runtime.records import write_atomically

    write_atomically(marker, b"", 0o644)  # by rename: never through a link a member or a rank left there
    return destination


def find_code_dir(base_dir: str, environ: Mapping[str, str]) -> str | None:
    """The user's code directory, in the contract's lookup order: ``$TRAINOPS_CODE_DIR``, ``input/data/trainops_code/``
    (``code/`` when that channel holds a source tarball, which `unpack_code_tarball` unpacks there), ``code/``. None
    when none of them exists."""
    if not environ.get("TRAINOPS_CODE_DIR") and code_tarball(base_dir):
        return os.path.join(base_dir, "code")
    candidates = [environ.get("TRAINOPS_CODE_DIR") or "",
                  os.path.join(base_dir, "input", "data", CODE_CHANNEL),
                  os.path.join(base_dir, "code")]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            return os.path.abspath(candidate)
    return None


def _channels(base_dir: str, input_data_config: Mapping[str, Any]) -> dict[str, str]:
    data_dir = os.path.join(base_dir, "input", "data")
    names = set(input_data_config)
    # Channels laid out without an inputdataconfig entry still count (a hand-made local layout).
    if os.path.isdir(data_dir):
        names.update(entry for entry in os.listdir(data_dir) if os.path.isdir(os.path.join(data_dir, entry)))
    return {name: os.path.join(data_dir, name) for name in sorted(names)
            if not name.startswith(FRAMEWORK_CHANNEL_PREFIX)}


def read_contract(base_dir: str | None = None, environ: Mapping[str, str] | None = None) -> Contract:
    """Read one host's contract directory (``base_dir``, default :func:`base_directory`).

    Raises :class:`ContractError` when ``resourceconfig.json`` is missing or malformed, or when the current host is not
    one of the hosts. ``hyperparameters.json`` and ``inputdataconfig.json`` may be absent (read as empty).
    """
    environ = os.environ if environ is None else environ
    base_dir = os.path.abspath(base_dir) if base_dir else base_directory(environ)
    config_dir = os.path.join(base_dir, "input", "config")
    resource_path = os.path.join(config_dir, "resourceconfig.json")
    resource = _expect_object(read_config(
        resource_path, True,
        "every training host needs it (SageMaker writes it; locally the local backend does). Point "
        "SAGEMAKER_BASE_DIR (or --base-dir) at the contract directory that holds input/config/resourceconfig.json"),
        resource_path)
    hosts_value = resource.get("hosts")
    current = resource.get("current_host")
    if not isinstance(hosts_value, list) or not hosts_value or not all(isinstance(h, str) and h for h in hosts_value):
        raise ContractError(f"{resource_path}: 'hosts' must be a non-empty list of host names")
    if not isinstance(current, str) or current not in hosts_value:
        raise ContractError(f"{resource_path}: 'current_host' ({current!r}) must be one of 'hosts' {hosts_value}")
    hyper_path = os.path.join(config_dir, "hyperparameters.json")
    hyperparameters = _expect_object(read_config(hyper_path, False, ""), hyper_path)
    data_path = os.path.join(config_dir, "inputdataconfig.json")
    input_data_config = _expect_object(read_config(data_path, False, ""), data_path)
    group = resource.get("current_group_name")
    return Contract(
        base_dir=base_dir,
        current_host=current,
        hosts=tuple(sorted(hosts_value)),
        instance_type=str(resource.get("current_instance_type") or ""),
        network_interface=str(resource.get("network_interface_name") or "eth0"),
        current_group=str(group) if group else None,
        resource_config=resource,
        hyperparameters=hyperparameters,
        input_data_config=input_data_config,
        channels=_channels(base_dir, input_data_config),
        code_dir=find_code_dir(base_dir, environ),
    )
