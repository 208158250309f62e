"""Where boto3 clients come from, and how AWS errors become trainops errors.

Every function of the SageMaker backend takes a `ClientFactory`: a callable from a service name (``"sagemaker"``,
``"s3"``, ``"logs"``, ``"fsx"``, ``"ec2"``) to a boto3 client. The CLI uses `default_client_factory`; the Airflow
operator builds one from the Amazon provider's ``AwsBaseHook`` session (`client_factory_from_session`); tests pass
clients wrapped in botocore's ``Stubber`` or clients pointed at a moto server.

Endpoints are boto3's own business: ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_<SERVICE>`` and the ``endpoint_url``
setting of a profile all work, with no endpoint logic here. boto3 is imported inside functions only, so importing
this module stays cheap for DAG files. Reads that only advise (the preflight's quotas, running jobs, a plan's zone)
use `advisory_client`: one retry and short timeouts, so a look that cannot be made costs seconds, not minutes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from trainops.aws.reach import REFUSED_CREDENTIAL_CODES, refused_credentials, unreachable
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


#: Advisory reads (quotas, running jobs, a training plan's zone): a look that fails becomes a note, so it must fail
#: fast; one retry and short timeouts, never the minute of adaptive backoff a poll may wait through.
ADVISORY_SETTINGS: dict[str, Any] = {"retries": {"mode": "standard", "total_max_attempts": 2}, "connect_timeout": 5,
                                     "read_timeout": 10}

#: Every way to give the SageMaker backend its region, for the message that says none was found.
REGION_WAYS = ("-o region=... (or --region) on the command line, region: in the spec, AWS_REGION or "
               "AWS_DEFAULT_REGION, the region of the AWS profile (aws configure set region us-east-1), or region_name "
               "in the extra of the Airflow AWS connection")


def missing_region() -> SpecError:
    """The error of a SageMaker call without a region (exit code 2), naming every way to set one."""
    return SpecError(Problem("region", f"the sagemaker backend needs a region: give one with {REGION_WAYS}"))


def region_note(spec_region: str | None, backend_region: str | None, named_as: str | None = None) -> str | None:
    """What to tell the user when a spec's region overrides the one its backend was given (a named backend's, -o
    region, --region, AWS_REGION): the spec's wins, since its images and S3 locations are that region's. None when
    they agree or either is missing."""
    if not spec_region or not backend_region or spec_region == backend_region:
        return None
    backend = f"the backend {named_as}'s" if named_as else "the backend's"
    return (f"[trainops] region: the job runs in the spec's region {spec_region}, not {backend} {backend_region} "
            f"(a spec's region wins over the backend's); remove region: from the spec to run in {backend_region}")


def resolve_region(region: str | None = None, profile: str | None = None) -> str | None:
    """The region to use: ``region``, else ``AWS_REGION`` (which boto3 itself does not read), else boto3's own
    (``AWS_DEFAULT_REGION``, the profile's configuration); None when there is none."""
    if region or os.environ.get("AWS_REGION"):
        return region or os.environ["AWS_REGION"]
    import boto3

    return boto3.session.Session(profile_name=profile).region_name


class SessionClients:
    """A `ClientFactory` over one boto3 ``Session``: one cached client per service, and `advisory` clients (few
    retries, short timeouts) for reads whose failure only becomes a note.

    Clients are cached because creating one costs tens of milliseconds; boto3 clients are thread-safe, but a session
    is not, so creation is serialised. A client that cannot be made for want of a region is `missing_region`.
    ``config`` is the botocore ``Config`` of every client (default `client_config`), which the advisory clients'
    retries and timeouts override; ``arguments(service)`` gives more keywords of ``session.client`` (an Airflow
    connection's ``endpoint_url`` and ``verify``).
    """

    def __init__(self, session: Any, config: Any = None,
                 arguments: Callable[[str], dict[str, Any]] | None = None):
        from botocore.config import Config

        self.session = session
        base = config if config is not None else client_config()
        self._configs = {"": base, "advisory": base.merge(Config(**ADVISORY_SETTINGS))}
        self._arguments = arguments or (lambda service: {})
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def _client(self, service: str, kind: str) -> Any:
        from botocore.exceptions import NoRegionError

        with self._lock:
            if (service, kind) not in self._clients:
                try:
                    client = self.session.client(service, config=self._configs[kind], **self._arguments(service))
                except NoRegionError:
                    raise missing_region() from None
                client.meta.events.register("needs-retry", _FirstUnanswered(client))
                self._clients[(service, kind)] = client
            return self._clients[(service, kind)]

    def __call__(self, service: str) -> Any:
        return self._client(service, "")

    def advisory(self, service: str) -> Any:
        """A client of ``service`` for advisory reads (`ADVISORY_SETTINGS`)."""
        return self._client(service, "advisory")


class _FirstUnanswered:
    """Says at once, on stderr, that a client's endpoint did not answer, the first time one of its calls fails
    without an answer (a refused connection, a timeout), while botocore's retries go on as configured: with the
    default adaptive policy (10 attempts, backoff) an endpoint that never answers takes about 20 s to become an
    error, and a user who mistyped ``AWS_ENDPOINT_URL`` or has no network should not wait that long to learn it.
    A `needs-retry` handler that returns None: it observes, and botocore's own handler decides the retry."""

    def __init__(self, client: Any):
        self.client = client
        self.said = False

    def __call__(self, attempts: int = 0, caught_exception: BaseException | None = None, **_: Any) -> None:
        if self.said or caught_exception is None or not unreachable(caught_exception):
            return
        self.said = True
        retries = self.client.meta.config.retries or {}
        limit = retries.get("total_max_attempts") or (
            retries["max_attempts"] + 1 if isinstance(retries.get("max_attempts"), int) else None)
        if limit is not None and attempts >= limit:
            return  # no retry follows: the error itself comes now
        how = f"up to {limit} attempts" if limit else "as AWS_MAX_ATTEMPTS and AWS_RETRY_MODE say"
        print(f"[trainops] AWS endpoint {self.client.meta.endpoint_url} did not answer "
              f"({type(caught_exception).__name__}: {caught_exception}); botocore tries again, {how} with "
              "backoff, before trainops says what to check", file=sys.stderr, flush=True)


def advisory_client(factory: ClientFactory, service: str) -> Any:
    """The factory's advisory client of ``service`` (`SessionClients.advisory`), or its ordinary one when it has none
    (a test's stubbed clients)."""
    advisory = getattr(factory, "advisory", None)
    return advisory(service) if callable(advisory) else factory(service)


def client_factory_from_session(session: Any, config: Any = None) -> ClientFactory:
    """A factory that builds (and caches) one client per service from a ready boto3 ``Session`` (`SessionClients`).

    For callers that own credential handling, such as the Airflow operator with ``AwsBaseHook.get_session()``.
    """
    return SessionClients(session, config)


def default_client_factory(region: str | None = None, profile: str | None = None) -> ClientFactory:
    """The factory the CLI and the backend use by default: a boto3 session for ``region`` and ``profile``.

    Args:
        region: the AWS region; ``None``: `resolve_region` (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile).
        profile: a named profile of the shared AWS config; ``None`` for the default credential chain.
    """
    import boto3

    session = boto3.session.Session(region_name=resolve_region(region, profile), profile_name=profile)
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

    Validation errors become `SpecError` (exit code 2: fix the input), credentials AWS refuses an `AwsSetUpError`
    (exit code 2: fix the set-up, `trainops.aws.reach`); everything else becomes `JobFailed` (exit code 1).
    Use as ``raise translate_client_error(error, "CreateTrainingJob my-job") from error``.
    """
    code = error_code(error)
    message = error_message(error)
    if code in _BAD_REQUEST_CODES:
        return SpecError(
            Problem(field, f"AWS rejected {action}: {message}; fix this value and submit again"),
            source="request",
        )

    if code in REFUSED_CREDENTIAL_CODES:
        return refused_credentials(code, f"{action}: {message}")
    if code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}:
        return JobFailed(f"{action}: access denied ({message}); grant the caller's role this permission")
    return JobFailed(f"{action} failed: {code or type(error).__name__}: {message}")
