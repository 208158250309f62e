"""Moved to `trainops.aws.clients` (both backends use it); re-exported here for existing imports."""

from trainops.aws.clients import (  # noqa: F401 - re-exported
    RETRY_SETTINGS,
    ClientFactory,
    client_config,
    client_factory_from_session,
    default_client_factory,
    error_code,
    error_message,
    translate_client_error,
)
