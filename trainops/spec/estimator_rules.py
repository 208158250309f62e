"""Rules across the SDK v2 estimator options of `trainops.spec.estimator_options` (registered into
`trainops.spec.rule_registry.RULES`, so `trainops validate` reports them with the others).

Where the SDK passes a setting on that the API would then ignore or refuse (a private registry's credentials
without the Vpc access mode, a model channel with a data channel's name), trainops says so before anything is
created. Checks that need the account (the training plan's state, quotas) are the SageMaker preflight's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainops.errors import Problem
from trainops.spec.rule_registry import rule

if TYPE_CHECKING:
    from trainops.spec.job import JobSpec

#: Channels the launchers add themselves (trainops launcher: trainops_*, toolkit under network isolation: code).
LAUNCHER_CHANNELS = ("trainops_code", "trainops_runtime", "code")


@rule("training_repository_access_mode", "training_repository_credentials_provider_arn", "subnets")
def private_registry_settings(spec: JobSpec) -> Iterator[Problem]:
    """A private registry's credentials need training_repository_access_mode Vpc (the SDK drops them otherwise),
    and Vpc mode needs the job's subnets: the registry is reached through the VPC."""
    if spec.training_repository_credentials_provider_arn and spec.training_repository_access_mode != "Vpc":
        yield Problem("training_repository_credentials_provider_arn",
                      "is used only for an image in a private registry: set training_repository_access_mode: Vpc "
                      "(the SDK would silently drop the credentials)")
    if spec.training_repository_access_mode == "Vpc" and not spec.subnets:
        yield Problem("training_repository_access_mode",
                      "Vpc pulls the image from a registry inside your VPC: give subnets and security_group_ids "
                      "that reach it")


@rule("model_uri", "model_channel_name", "inputs")
def model_channel_is_its_own(spec: JobSpec) -> Iterator[Problem]:
    """The model channel is one more input channel: its name must not be a data channel's or a launcher's."""
    if spec.model_uri is None:
        return
    if spec.model_channel_name in spec.inputs:
        yield Problem("model_channel_name", f"{spec.model_channel_name!r} is also an input channel: rename one "
                                            "(model_uri arrives as its own channel)")
    elif spec.model_channel_name in LAUNCHER_CHANNELS:
        yield Problem("model_channel_name", f"{spec.model_channel_name!r} is a channel the launcher adds: choose "
                                            "another name, e.g. model")
    if len(spec.inputs) >= 20:
        yield Problem("model_uri", "the model channel would be a 21st channel; SageMaker allows 20")


@rule("instance_placement_config", "instance_count", "instance_groups")
def placement_fits_the_job(spec: JobSpec) -> Iterator[Problem]:
    """UltraServer placement cannot place more instances than the job has."""
    placement = spec.instance_placement_config
    if placement is None:
        return
    placed = sum(item.instance_count for item in placement.placement_specifications)
    if placed > spec.host_count():
        yield Problem("instance_placement_config.PlacementSpecifications",
                      f"places {placed} instances but the job has {spec.host_count()}: make the InstanceCounts add "
                      "up to at most instance_count")


@rule("dependencies", "source_dir")
def dependencies_need_local_code(spec: JobSpec) -> Iterator[Problem]:
    """Dependencies are packed with local code; an s3:// source_dir is a tarball used as it is (the SDK would drop
    them silently)."""
    if spec.dependencies and spec.source_dir and spec.source_dir.startswith("s3://"):
        yield Problem("dependencies", "are packed with a local source_dir, but source_dir is an uploaded tarball "
                                      "(s3://), used as it is: put them into that tarball, or give the local directory")
