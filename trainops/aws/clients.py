"""Where boto3 clients come from, and how AWS errors become trainops errors.

Every function of the SageMaker backend takes a `ClientFactory`: a callable from a service name (``"sagemaker"``,
``"s3"``, ``"logs"``, ``"fsx"``, ``"ec2"``) to a boto3 client. The CLI uses `default_client_factory`; the Airflow
operator builds one from the Amazon provider's ``AwsBaseHook`` session (`client_factory_from_session`); tests pass
clients wrapped in botocore's ``Stubber`` or clients pointed at a moto server.

Endpoints are boto3's own business: ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_<SERVICE>`` and the ``endpoint_url``
setting of a profile all work, with no endpoint logic here. boto3 is imported inside functions only, so importing
this module stays cheap for DAG files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from trainops.errors import JobFailed, Problem, SpecError, TrainopsError

#: A callable from a service name to a boto3 client for that service.
ClientFactory = Callable[[str], Any]

#: Adaptive retry: botocore retries throttling and transient errors with backoff and also rate-limits the client
#: side, which is what polling loops (many jobs, many triggers) need; the legacy default gives up after 4 attempts.
RETRY_SETTINGS: dict[str, Any] = {"mode": "adaptive", "max_attempts": 10}


def client_config(**overrides: Any) -> Any:
    """The ``botocore.config.Config`` every trainops client uses: adaptive retries, 10 attempts, unless the
    environment says otherwise (``AWS_RETRY_MODE``, ``AWS_MAX_ATTEMPTS``: boto3's own settings, which an explicit
    ``Config`` would otherwise silently override).

    Keyword arguments are passed on to ``Config`` (for example ``connect_timeout``) and win over the defaults.
    """
    import os

    from botocore.config import Config

    retries = {key: value for key, value in RETRY_SETTINGS.items()
               if not os.environ.get({"mode": "AWS_RETRY_MODE", "max_attempts": "AWS_MAX_ATTEMPTS"}[key])}
    settings: dict[str, Any] = {"retries": retries}
    settings.update(overrides)
    return Config(**settings)


def client_factory_from_session(session: Any, config: Any = None) -> ClientFactory:
    """A factory that builds (and caches) one client per service from a ready boto3 ``Session``.

    For callers that own credential handling, such as the Airflow operator with ``AwsBaseHook.get_session()``.
    Clients are cached because creating one costs tens of milliseconds; boto3 clients are thread-safe, but a
    session is not, so creation is serialised.
    """
    chosen_config = config if config is not None else client_config()
    clients: dict[str, Any] = {}
    lock = threading.Lock()

    def factory(service: str) -> Any:
        with lock:
            if service not in clients:
                clients[service] = session.client(service, config=chosen_config)
            return clients[service]

    return factory


def default_client_factory(region: str | None = None, profile: str | None = None) -> ClientFactory:
    """The factory the CLI and the backend use by default: a boto3 session for ``region`` and ``profile``.

    Args:
        region: the AWS region; ``None`` lets boto3 decide (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile).
        profile: a named profile of the shared AWS config; ``None`` for the default credential chain.
    """
    import boto3

    session = boto3.session.Session(region_name=region, profile_name=profile)
    return client_factory_from_session(session)


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (``"ValidationException"``, ...), or ``""``."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(error: BaseException) -> str:
    """The AWS error message of a botocore ``ClientError``, or the exception's text."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(error)


#: Codes that mean the request itself is wrong (bad input: exit code 2), not that something failed while running.
_BAD_REQUEST_CODES = frozenset({"ValidationException", "ValidationError", "InvalidParameterValue", "BadRequest"})


def translate_client_error(error: BaseException, action: str, field: str = "") -> TrainopsError:
    """Turn an AWS error into the trainops error a user should see, naming the action that failed.

    Validation errors become `SpecError` (exit code 2: fix the input); everything else becomes `JobFailed`
    (exit code 1). Use as ``raise translate_client_error(error, "CreateTrainingJob my-job") from error``.
    """
    code = error_code(error)
    message = error_message(error)
    if code in _BAD_REQUEST_CODES:
        return SpecError(
            Problem(field, f"AWS rejected {action}: {message}; fix this value and submit again"),
            source="request",
        )
    if code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}:
        return JobFailed(f"{action}: access denied ({message}); grant the caller's role this permission")
    return JobFailed(f"{action} failed: {code or type(error).__name__}: {message}")
