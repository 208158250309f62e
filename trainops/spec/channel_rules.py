"""Rules of the channel options of the SDK's TrainingInput (compression, record wrapping, shuffle, attribute names,
per-channel instance groups), registered into `trainops.spec.rule_registry.RULES` with the others. What the API's
documentation says of each (botocore's service model, docs/spec.md) decides them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem
from trainops.spec.inputs import TrainingInput
from trainops.spec.rule_registry import rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec


@rule("inputs", "input_mode", "instance_groups")
def channel_options_fit_the_job(spec: JobSpec) -> Iterator[Problem]:
    """Compression and record wrapping in Pipe or FastFile mode only (Channel.CompressionType / RecordWrapperType:
    "In File mode, leave this field unset or set it to None"); attribute names for an augmented manifest only
    (S3DataSource.AttributeNames); a channel's instance groups among the job's (S3DataSource.InstanceGroupNames)."""
    groups = {group.instance_group_name for group in spec.instance_groups or []}
    for name, channel in spec.channels.items():
        if not isinstance(channel, TrainingInput):
            continue
        path = f"inputs.{name}"
        mode = channel.input_mode or spec.input_mode
        for field, value in (("compression", channel.compression), ("record_wrapping", channel.record_wrapping)):
            if value not in (None, "None") and mode == "File":
                yield Problem(f"{path}.{field}", f"{value} is for Pipe mode; this channel is read in File mode (the "
                                                 "API: in File mode, leave it unset): set input_mode: Pipe, or "
                                                 f"remove {field}")
        if channel.attribute_names is not None and channel.s3_data_type != "AugmentedManifestFile":
            yield Problem(f"{path}.attribute_names", "name attributes of an augmented manifest: set s3_data_type: "
                                                     "AugmentedManifestFile, or remove attribute_names")
        if channel.instance_groups is not None:
            if not groups:
                yield Problem(f"{path}.instance_groups", "the job defines no instance_groups: add them, or remove "
                                                         "the channel's instance_groups")
            for group in channel.instance_groups:
                if groups and group not in groups:
                    yield Problem(f"{path}.instance_groups", f"{group!r} is not one of the job's instance groups "
                                                             f"{sorted(groups)}")
