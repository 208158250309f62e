"""The channel options of a CreateTrainingJob request as an engine on hosts of its own honours them (the local and
Slurm engines, through `trainops.backends.hostfs.contract_dir.fill_container`):

- ``S3DataSource.InstanceGroupNames``: only the hosts of those instance groups get the channel, as SageMaker gives
  it (a heterogeneous cluster's data group reads what the training group does not);
- ``CompressionType: Gzip``: each ``.gz`` object reaches the container decompressed, under its name without ``.gz``
  (SageMaker decompresses a Gzip channel on its way to the container);
- ``ShuffleConfig``: with ``ShardedByS3Key`` the objects are shuffled with the seed before each host takes its
  share, so the shards differ from the sorted split as SageMaker's do (with one host, or without sharding, the
  order of files in a directory carries no meaning and nothing changes).

``RecordWrapperType`` and ``AttributeNames`` are not emulated: `unhonoured_problems` refuses them for those engines.
"""

from __future__ import annotations

import gzip
import random
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainops.backends.request.hosts import host_groups
from trainops.errors import Problem
from trainops.spec.inputs import TrainingInput


@dataclass(frozen=True)
class ChannelOptions:
    """What one channel's options mean on one host."""

    on_this_host: bool = True
    gzip: bool = False
    seed: int | None = None
    #: This host's place among the hosts that get the channel (its instance groups'), for ShardedByS3Key.
    share: tuple[int, int] | None = None

    @property
    def rewrites(self) -> bool:
        """Whether the channel needs a directory of its own (not a link to the data)."""
        return self.gzip or self.seed is not None or self.share is not None

    def lay_out(self, link: Path, source: Path, index: int, count: int, *, sharded: bool) -> None:
        """Fill ``link`` (a directory of this host) with the channel's data as the options say."""
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        link.mkdir(parents=True)
        files = sorted(path for path in source.rglob("*") if path.is_file()) if source.is_dir() else [source]
        if self.seed is not None:
            random.Random(self.seed).shuffle(files)
        if self.share is not None:
            index, count = self.share  # SageMaker splits the keys between the hosts that get the channel
        if sharded and count > 1:
            files = files[index::count]
        for path in files:
            relative = path.relative_to(source) if source.is_dir() else Path(path.name)
            if self.gzip and path.suffix == ".gz":
                target = link / relative.with_suffix("")
                target.parent.mkdir(parents=True, exist_ok=True)
                with gzip.open(path, "rb") as compressed, open(target, "wb") as plain:
                    shutil.copyfileobj(compressed, plain)
            else:
                entry = link / relative  # ``link`` was emptied above: nothing stands at ``entry`` yet
                entry.parent.mkdir(parents=True, exist_ok=True)
                entry.symlink_to(path)


def channel_options(request: Mapping[str, Any], host: str) -> dict[str, ChannelOptions]:
    """Each channel with options, as they apply on ``host``."""
    hosts = host_groups(request)
    group = next((name for member, name, _ in hosts if member == host), None)
    found: dict[str, ChannelOptions] = {}
    for channel in request.get("InputDataConfig") or []:
        source = channel.get("DataSource", {}).get("S3DataSource") or {}
        groups = source.get("InstanceGroupNames")
        seed = (channel.get("ShuffleConfig") or {}).get("Seed")
        members = [member for member, name, _ in hosts if name in groups] if groups else []
        share = (members.index(host), len(members)) if host in members else None
        option = ChannelOptions(on_this_host=not groups or group in groups,
                                gzip=channel.get("CompressionType") == "Gzip", seed=seed, share=share)
        if option != ChannelOptions():
            found[channel["ChannelName"]] = option
    return found


def unhonoured_problems(spec: Any, engine: str) -> list[Problem]:
    """The channel options ``engine`` (local, slurm) does not emulate, refused at their fields."""
    problems = []
    for name, channel in spec.channels.items():
        if not isinstance(channel, TrainingInput):
            continue
        if channel.record_wrapping not in (None, "None"):
            problems.append(Problem(f"inputs.{name}.record_wrapping", f"the {engine} engine does not wrap objects in "
                                                                      "RecordIO records: wrap the data yourself, or "
                                                                      "run on SageMaker"))
        if channel.attribute_names is not None:
            problems.append(Problem(f"inputs.{name}.attribute_names", f"the {engine} engine does not read augmented "
                                                                      "manifests' attributes: run on SageMaker"))
    if engine == "slurm" and getattr(spec, "max_pending_time", None) is not None:
        # A Slurm job may wait in the queue for as long as the cluster is busy; nothing here stops it after a bound.
        problems.append(Problem("max_pending_time", "the slurm engine does not stop a job that waits in the queue: "
                                                    "remove it, or run on SageMaker"))
    return problems
