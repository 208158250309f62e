"""Input channels: an s3:// URI, the SDK's TrainingInput fields, or its FileSystemInput fields."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from trainops.spec.inputs import (
    ChannelInput,
    FileSystemInput,
    TrainingInput,
    check_data_uri,
    is_local_uri,
    local_path,
    normalise_channel,
)

CHANNEL = TypeAdapter(ChannelInput)


@pytest.mark.parametrize("uri", ["s3://bucket/prefix/", "s3://my.bucket-1", "file:///data/train", "/data/train",
                                 "data/train", "./x"])
def test_data_uris_accepted(uri):
    assert check_data_uri(uri) == uri


@pytest.mark.parametrize("uri, words", [
    ("s3://B/x", "not a valid S3 URI"),
    ("s3://ab/x", "not a valid S3 URI"),
    ("http://example.com/x", "scheme http:// is not supported"),
    ("gs://bucket/x", "scheme gs:// is not supported"),
    ("file://", "is empty"),
    ("/data/\x00x", "NUL"),
])
def test_bad_data_uris(uri, words):
    with pytest.raises(ValueError) as caught:
        check_data_uri(uri)
    assert words in str(caught.value)


def test_local_uris():
    assert is_local_uri("file:///x") and is_local_uri("/x") and not is_local_uri("s3://bucket/x")
    assert local_path("file:///data/x") == "/data/x"
    assert local_path("data/x") == "data/x"


def test_bare_uri_becomes_training_input():
    assert CHANNEL.validate_python("s3://bucket/train/") == "s3://bucket/train/"
    channel = normalise_channel("s3://bucket/train/")
    assert channel == TrainingInput(s3_data="s3://bucket/train/")
    assert channel.uri == "s3://bucket/train/"
    assert channel.distribution == "FullyReplicated" and channel.input_mode is None
    assert channel.s3_data_type == "S3Prefix"


def test_training_input_fields():
    channel = CHANNEL.validate_python({"s3_data": "s3://bucket/x", "distribution": "ShardedByS3Key",
                                       "input_mode": "FastFile", "content_type": "application/x-parquet",
                                       "s3_data_type": "ManifestFile"})
    assert isinstance(channel, TrainingInput)
    assert channel.distribution == "ShardedByS3Key" and channel.input_mode == "FastFile"
    assert normalise_channel(channel) is channel


def test_file_system_input_fields():
    channel = CHANNEL.validate_python({"file_system_id": "fs-0123456789abcdef0", "file_system_type": "EFS",
                                       "directory_path": "/data", "file_system_access_mode": "rw"})
    assert isinstance(channel, FileSystemInput)
    assert channel.file_system_type == "EFS" and channel.file_system_access_mode == "rw"
    fsx = FileSystemInput(file_system_id="fs-0123456789abcdef0", directory_path="/fsx1a2b3c/train")
    assert (fsx.file_system_type, fsx.file_system_access_mode) == ("FSxLustre", "ro")


@pytest.mark.parametrize("value, field", [
    ({"s3_data": "s3://bucket/x", "distribution": "Sharded"}, "distribution"),
    ({"s3_data": "s3://bucket/x", "input_mode": "Stream"}, "input_mode"),
    ({"s3_data": "s3://bucket/x", "s3_data_type": "Prefix"}, "s3_data_type"),
    ({"s3_data": "s3://bucket/x", "content_type": "x" * 257}, "content_type"),
    ({"s3_data": "ftp://host/x"}, "s3_data"),
    ({"distribution": "FullyReplicated"}, "s3_data"),
    ({"s3_data": "s3://bucket/x", "s3_uri": "s3://bucket/y"}, "s3_uri"),
    ({"file_system_id": "fs-xyz", "directory_path": "/fsx/x"}, "file_system_id"),
    ({"file_system_id": "fs-0123456789abcdef0", "directory_path": "fsx/x"}, "directory_path"),
    ({"file_system_id": "fs-0123456789abcdef0", "directory_path": "/fsx/../etc"}, "directory_path"),
    ({"file_system_id": "fs-0123456789abcdef0"}, "directory_path"),
    ({"file_system_id": "fs-0123456789abcdef0", "directory_path": "/f", "file_system_type": "Lustre"},
     "file_system_type"),
    ({"file_system_id": "fs-0123456789abcdef0", "directory_path": "/f", "file_system_access_mode": "write"},
     "file_system_access_mode"),
])
def test_bad_channel_fields_name_the_field(value, field):
    with pytest.raises(ValidationError) as caught:
        CHANNEL.validate_python(value)
    assert field in [str(error["loc"][-1]) for error in caught.value.errors()]


@pytest.mark.parametrize("value", ["", "x" * 1025])
def test_bare_uri_length(value):
    with pytest.raises(ValidationError):
        CHANNEL.validate_python(value)
