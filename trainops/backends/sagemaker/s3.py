"""Moved to `trainops.aws.s3` (both backends use it); re-exported here for existing imports."""

from trainops.aws.s3 import get_bytes, join_uri, parse_s3_uri, put_bytes  # noqa: F401 - re-exported
