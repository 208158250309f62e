"""A status look that fails is not a failed job: the one policy of every loop that polls a job, on every backend.

A look (DescribeTrainingJob, a local status record, squeue, slurmrestd) can fail for reasons that say nothing about
the job: a timeout, a 5xx answer, throttling, a refused or closed connection, a controller that restarts. SkyPilot
once recovered a healthy 19-hour job 24 times after 25 status-fetch timeouts (skypilot#10155) and since requires
both a time and a count of consecutive failures before it acts. trainops never acts on a failed look at all: the
wait looks again at its poll interval, and gives up only when the failures in a row reach BOTH bounds,
`LookPolicy.count` looks and `LookPolicy.seconds` since the first failure of the streak (a look that succeeds ends
the streak). It then raises `JobOutOfSight`, which says the job may still be running and how to re-attach; the job
is never stopped, failed or submitted again because of it.

Errors that prove something are not failed looks and surface at once: the job does not exist, access is denied,
the request is invalid (`SpecError`, an AWS 4xx other than throttling). `is_failed_look` is the one classifier; a
backend whose own calls fail in ways it recognises (a Slurm command that cannot reach slurmctld) raises
`LookFailed` from its describe to say so.

Standard library only: the Airflow trigger and the KFP components import it.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from time import monotonic
from time import sleep as _sleep
from typing import Any, TypeVar

from trainops.errors import Problem, SpecError, TrainopsError

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The production bounds: a wait gives up after at least this many seconds AND this many failed looks in a row.
DEFAULT_SECONDS = 60.0
DEFAULT_COUNT = 5
#: The longest pause between two looks while they fail (the poll interval, at least a second).
MAX_PAUSE_SECONDS = 300.0
#: Environment variables that change the bounds for every wait of a process (a deployment whose control plane is
#: often slow may allow longer; tests allow less).
SECONDS_VARIABLE = "TRAINOPS_FAILED_LOOKS_SECONDS"
COUNT_VARIABLE = "TRAINOPS_FAILED_LOOKS_COUNT"

#: What a re-attach looks like, when the caller has nothing more exact to say.
REATTACH = ("Re-attach by running the same command or task again with the same job name: it follows the job of "
            "that name instead of starting another.")


class LookFailed(TrainopsError):
    """One look at a job failed without saying anything about the job (a backend raises it from its describe for
    errors of its own transport; `is_failed_look` is true for it)."""

    exit_code = 1


class JobOutOfSight(TrainopsError):
    """A wait gave up because its looks kept failing past both bounds: the job's outcome is unknown, and it was
    neither stopped nor failed. Not a job failure: no retry classifies it, no new attempt starts from it."""

    exit_code = 1

    def __init__(self, what: str, *, failures: int, seconds: float, last_error: BaseException | str,
                 reattach: str = REATTACH):
        self.what, self.failures, self.seconds = what, failures, seconds
        self.last_error = described(last_error) if isinstance(last_error, BaseException) else str(last_error)
        self.reattach = reattach
        super().__init__(f"could not look at {what}: {failures} look{'s' if failures != 1 else ''} in a row failed "
                         f"over {seconds:.0f} s (last: "
                         f"{self.last_error}). It may still be running: this wait did not stop it. {reattach}")

    def reattach_with(self, reattach: str) -> JobOutOfSight:
        """The same error with a front end's own way to re-attach."""
        return JobOutOfSight(self.what, failures=self.failures, seconds=self.seconds, last_error=self.last_error,
                             reattach=reattach)


def described(error: BaseException) -> str:
    """An error of a look in a message: trainops' own as its text (its class, JobFailed, would read as the job's
    failure), any other with its class (EndpointConnectionError: ..., TimeoutError: ...)."""
    return str(error) if isinstance(error, TrainopsError) else f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class LookPolicy:
    """When a wait whose looks fail gives up: after ``count`` failed looks in a row AND ``seconds`` since the first of
    them, both; and how long it pauses between them (its poll interval, at least a second, at most ``max_pause``)."""

    seconds: float = DEFAULT_SECONDS
    count: int = DEFAULT_COUNT
    max_pause: float = MAX_PAUSE_SECONDS

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> LookPolicy:
        """The defaults, or what `SECONDS_VARIABLE` / `COUNT_VARIABLE` say; a bad value is a `SpecError` naming it."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for variable, key, kind in ((SECONDS_VARIABLE, "seconds", float), (COUNT_VARIABLE, "count", int)):
            text = environ.get(variable, "").strip()
            if not text:
                continue
            try:
                value = kind(text)
            except ValueError:
                value = -1
            if value < 0:
                wanted = "a number of seconds" if kind is float else "a whole number"
                raise SpecError(Problem(variable, f"{text!r} is not {wanted} >= 0: unset it for the default "
                                                  f"({getattr(cls, key)})"), source="environment")
            values[key] = value
        return cls(**values)

    def pause(self, poll_seconds: float) -> float:
        """Seconds to wait before the look after a failed one: the poll interval (botocore's adaptive retries have
        backed off within the call already), at least a second so that the time bound is not a busy loop."""
        return min(self.max_pause, max(1.0, float(poll_seconds)))

    def gives_up(self, failures: int, seconds: float) -> bool:
        """Whether a streak of ``failures`` failed looks over ``seconds`` passed both bounds."""
        return failures >= self.count and seconds >= self.seconds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LookPolicy:
        return cls(**{key: value for key, value in (data or {}).items() if key in ("seconds", "count", "max_pause")})


class Looks:
    """The failed looks of one wait: the streak so far, judged by a `LookPolicy`.

    A loop calls `failed` with each error of its look (it re-raises one that is not a failed look, raises
    `JobOutOfSight` past both bounds, and otherwise returns the pause before the next look) and `succeeded` after
    each look that worked; or lets `look` do both around one call.

    Args:
        what: how messages name the job (``"training job digits-1"``).
        reattach: how to re-attach, in the give-up message (the front end knows; default `REATTACH`).
        poll_seconds: the loop's poll interval: the pause before looking again (at least a second).
        policy: the bounds (default: `LookPolicy.from_environment`).
        clock, sleep: injectable time, for tests (``sleep`` is `look`'s pause).
        log: where to say that a look failed (default: this module's logger, as a warning).
    """

    def __init__(self, what: str, *, reattach: str = REATTACH, poll_seconds: float = 30.0,
                 policy: LookPolicy | None = None, clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], Any] | None = None, log: Callable[[str], Any] | None = None):
        self.what, self.reattach, self.poll_seconds = what, reattach, poll_seconds
        self.policy = policy if policy is not None else LookPolicy.from_environment()
        self.clock = clock or monotonic
        self.sleep = sleep or _sleep
        self.log = log or logger.warning
        self.failures = 0
        self.first_failure: float | None = None

    def failed(self, error: BaseException) -> float:
        """Count ``error`` (raised by a look) in the streak; the seconds to wait before looking again."""
        if not is_failed_look(error):
            raise error
        now = self.clock()
        if self.first_failure is None:
            self.first_failure = now
        self.failures += 1
        seconds = now - self.first_failure
        if self.policy.gives_up(self.failures, seconds):
            raise JobOutOfSight(self.what, failures=self.failures, seconds=seconds, last_error=error,
                                reattach=self.reattach) from error
        wait = self.policy.pause(self.poll_seconds)
        self.log(f"[trainops] could not look at {self.what} ({described(error)}); not a failure of "
                 f"the job: looking again in {wait:.0f} s ({self.failures} in a row; the wait gives up after "
                 f"{self.policy.count} in a row and {self.policy.seconds:.0f} s)")
        return wait

    def succeeded(self) -> None:
        """A look worked: the streak is over."""
        self.failures, self.first_failure = 0, None

    def look(self, call: Callable[[], T]) -> T:
        """``call()`` (one look), again after each failed look, until it works or the policy gives up."""
        while True:
            try:
                answer = call()
            except Exception as error:  # noqa: BLE001 - sorted by `failed`: what is not a failed look is raised
                self.sleep(self.failed(error))
                continue
            self.succeeded()
            return answer


# --- the classifier ------------------------------------------------------------------------------------------
#: AWS error codes of a throttled call (botocore's adaptive retries gave up on it).
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "RequestThrottled",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "SlowDown", "EC2ThrottledException", "PriorRequestNotComplete",
})
#: AWS error codes of a service that did not answer in time or failed inside (whatever the HTTP status says).
TRANSIENT_CODES = frozenset({
    "InternalFailure", "InternalError", "InternalServerError", "InternalServerException", "ServiceUnavailable",
    "ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException", "IDPCommunicationError",
})
#: HTTP statuses of an answer that proves nothing about the job: too many requests, and the server's own failures.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504, 509})
#: errno values of a read or a connection that may work the next time (a busy or remote file system, no
#: descriptors or memory left for the moment, a network path that went away).
TRANSIENT_ERRNOS = frozenset(getattr(errno, name) for name in (
    "EAGAIN", "EINTR", "EIO", "EMFILE", "ENFILE", "ENOMEM", "ENOBUFS", "ESTALE", "ETIMEDOUT", "EBUSY",
    "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EHOSTUNREACH", "EHOSTDOWN", "ENETUNREACH", "ENETDOWN", "EPIPE",
    "ENOLINK", "ECOMM", "EPROTO", "EREMOTEIO") if hasattr(errno, name))
#: Class names (anywhere in an error's MRO) of the HTTP clients' transport errors: botocore (EndpointConnectionError,
#: ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError, ...), urllib3, requests, and a command that hung
#: (subprocess's TimeoutExpired). By name, so that this module imports none of them.
TRANSPORT_ERRORS = frozenset({
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ProxyConnectionError", "HTTPClientError", "ResponseStreamingError", "IncompleteReadError", "ConnectionError",
    "ProtocolError", "NewConnectionError", "ConnectTimeout", "ReadTimeout", "Timeout", "RemoteDisconnected",
    "IncompleteRead", "ChunkedEncodingError", "TimeoutExpired",
})


def is_failed_look(error: BaseException) -> bool:
    """Whether ``error``, raised by a look at a job, says nothing about the job: a timeout, a refused, reset or closed
    connection, a 5xx or throttled answer, a transient read error, or a `LookFailed` a backend raised. The error
    and its causes (``raise ... from``) are read in order; the first that decides wins. Proof is never a failed
    look: `SpecError` (no such job, an invalid request), access denied and other 4xx answers, a `JobOutOfSight`;
    nor is an error none of these decide (a look that fails in an unforeseen way is raised, as before)."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen and len(seen) < 16:
        seen.add(id(link))
        verdict = _verdict(link)
        if verdict is not None:
            return verdict
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return False


def _verdict(error: BaseException) -> bool | None:
    """True / False when this one error decides, None when its cause should."""
    if isinstance(error, LookFailed):
        return True
    if isinstance(error, (JobOutOfSight, SpecError)):
        return False
    response = getattr(error, "response", None)
    if isinstance(response, Mapping) and isinstance(response.get("Error"), Mapping):  # botocore's ClientError
        code = str(response["Error"].get("Code", ""))
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return code in THROTTLING_CODES or code in TRANSIENT_CODES or status in TRANSIENT_STATUSES
    status = getattr(error, "code", None) if isinstance(getattr(error, "code", None), int) \
        else getattr(response, "status_code", None)  # urllib's HTTPError; requests' HTTPError
    if isinstance(status, int) and 400 <= status < 600:
        return status in TRANSIENT_STATUSES
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    if any(kind.__name__ in TRANSPORT_ERRORS for kind in type(error).__mro__):
        return True
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno in TRANSIENT_ERRNOS
    reason = getattr(error, "reason", None)  # urllib's URLError keeps the socket's error as its reason
    if isinstance(reason, BaseException):
        return _verdict(reason)
    return None
