"""Input channels, spelled as the SageMaker SDK spells them.

A channel is an `"s3://..."` string, the SDK's `TrainingInput` fields, or its `FileSystemInput` fields (FSx for
Lustre or EFS). Local paths and `file://` URIs are accepted too (the SDK's local-mode convention); the local backend
uses them and the SageMaker backend refuses them with a message saying how to stage the data.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator

from trainops.spec.base import FILE_SYSTEM_ID, S3_URI, CoreModel

# "s3:/bkt", "s3:bkt", "file:/x": a scheme and a colon without the two slashes. A local path never starts that way
# (Windows drive letters are one character, and are not paths of a Linux container anyway).
_LOOKS_LIKE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:(?!//)")


def is_local_uri(uri: str) -> bool:
    """True for `file://` URIs and plain paths: data on this machine, usable by the local backend only."""
    return not uri.startswith("s3://")


def local_path(uri: str) -> str:
    """The filesystem path of a `file://` URI or a plain path."""
    if uri.startswith("file://localhost/"):
        return uri[len("file://localhost"):]
    return uri[len("file://"):] if uri.startswith("file://") else uri


def check_data_uri(value: str) -> str:
    """Validate an `s3://bucket/key` URI, or accept a local path / `file://` URI as is."""
    if value.startswith("s3://"):
        if not S3_URI.match(value):
            raise ValueError(
                f"{value!r} is not a valid S3 URI: expected s3://bucket/prefix with a 3-63 character lowercase bucket"
            )
        return value
    if "://" in value:
        scheme = value.split("://", 1)[0]
        if scheme != "file":
            raise ValueError(f"scheme {scheme}:// is not supported: use s3://, file:// or a local path")
        host = value[len("file://"):].split("/", 1)[0]
        if host not in ("", "localhost"):
            raise ValueError(f"{value!r} names the host {host!r}: a file:// URI is a path on this machine, "
                             "file:///absolute/path (three slashes)")
    elif _LOOKS_LIKE_URI.match(value):
        scheme = value.split(":", 1)[0]
        raise ValueError(f"{value!r} looks like a URI but is malformed: write {scheme}:// followed by the "
                         f"{'bucket' if scheme.lower() == 's3' else 'location'} (e.g. s3://bucket/prefix)")
    if not local_path(value):
        raise ValueError("is empty: give an s3:// URI, a file:// URI or a local path")
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


class ShuffleConfig(CoreModel):
    """The SDK's ShuffleConfig: the seed of the shuffle."""

    seed: int = Field(ge=-(2**63), le=2**63 - 1, description="Seed of the shuffle.")


class TrainingInput(CoreModel):
    """The SDK's `TrainingInput`: an S3 (or, locally, file://) data source for one channel."""

    s3_data: str = Field(max_length=1024, description="s3://bucket/prefix (or a file:// URI / local path for the "
                         "local backend); at most 1,024 characters (the API's S3Uri).")
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = Field(
        default="FullyReplicated", description="Whether every host gets all objects or a shard of them."
    )
    input_mode: Literal["File", "FastFile", "Pipe"] | None = Field(
        default=None, description="Overrides the job's input_mode for this channel."
    )
    content_type: str | None = Field(default=None, max_length=256, description="MIME type of the channel's data.")
    s3_data_type: Literal["S3Prefix", "ManifestFile", "AugmentedManifestFile"] = Field(
        default="S3Prefix", description="What s3_data names: a prefix or a manifest file.")
    # The SDK's other TrainingInput options (rendered as its _TrainingJob does; spec.channel_rules checks them).
    compression: Literal["None", "Gzip"] | None = Field(
        default=None, description="Gzip: the objects are gzip-compressed and reach the container decompressed "
        "(Pipe mode only, as the API documents; the local engine decompresses them).")
    record_wrapping: Literal["None", "RecordIO"] | None = Field(
        default=None, description="RecordIO: each object is wrapped in a RecordIO record (Pipe mode only).")
    shuffle_config: ShuffleConfig | None = Field(
        default=None, description="{seed}: the objects (or manifest lines) shuffled with this seed; with "
        "ShardedByS3Key the shards are drawn from the shuffled order.")
    attribute_names: list[str] | None = Field(
        default=None, max_length=16, description="The augmented manifest's attributes to read "
        "(AugmentedManifestFile only).")
    instance_groups: list[str] | None = Field(
        default=None, max_length=5, description="The instance groups whose hosts get this channel (heterogeneous "
        "clusters); default: every host.")

    @field_validator("s3_data")
    @classmethod
    def _s3_data(cls, value: str) -> str:
        return check_data_uri(value)

    @property
    def uri(self) -> str:
        return self.s3_data


class FileSystemInput(CoreModel):
    """The SDK's `FileSystemInput`: FSx for Lustre or EFS mounted into the training containers (needs VpcConfig)."""

    file_system_id: str = Field(description="fs-... id of the file system.")
    file_system_type: Literal["FSxLustre", "EFS"] = Field(default="FSxLustre", description="FSx for Lustre or EFS.")
    directory_path: str = Field(description="For FSx for Lustre: /<mount name>/<path>; for EFS: /<path>.")
    file_system_access_mode: Literal["ro", "rw"] = Field(default="ro", description="Read-only or read-write mount.")
    content_type: str | None = Field(default=None, max_length=256, description="MIME type of the channel's data.")

    @field_validator("file_system_id")
    @classmethod
    def _file_system_id(cls, value: str) -> str:
        if not FILE_SYSTEM_ID.match(value):
            raise ValueError(f"{value!r} is not a file system id: expected fs- followed by hexadecimal digits")
        return value

    @field_validator("directory_path")
    @classmethod
    def _directory_path(cls, value: str) -> str:
        if not value.startswith("/") or ".." in value.split("/") or "\x00" in value or len(value) > 4096:
            raise ValueError(f"{value!r} must be an absolute path without '..' (for FSx: /<mount name>/...)")
        return value


def _which_input(value: Any) -> str:
    if isinstance(value, str):
        return "uri"
    if isinstance(value, FileSystemInput) or (isinstance(value, dict) and "file_system_id" in value):
        return "file_system"
    return "s3"


ChannelInput = Annotated[
    Annotated[Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(check_data_uri)], Tag("uri")]
    | Annotated[TrainingInput, Tag("s3")]
    | Annotated[FileSystemInput, Tag("file_system")],
    Discriminator(_which_input),
]


def normalise_channel(value: str | TrainingInput | FileSystemInput) -> TrainingInput | FileSystemInput:
    """Turn the bare-URI spelling into a `TrainingInput`, so code downstream sees two shapes, not three."""
    if isinstance(value, str):
        return TrainingInput(s3_data=value)
    return value
