"""trainops' failure classifier as an Airflow retry policy (AIP-105: pluggable retry policies, Airflow 3.3+).

Airflow's own ``retries`` retry every failure alike, so a deterministic error (``No module named sklearn``, a bad
label in the user's script) is retried twice for nothing. Where the installed Airflow has retry policies
(``airflow.sdk.definitions.retry_policy``, 3.3 and later), every trainops operator gets `FailureClassRetryPolicy`:
the task's exception is classified: the failure class an operator attached from `trainops.backends.failures` (a
job's failure, classified from its reason and status walk), else the exception's type, and

- a user error (and an import, syntax or type error of the task's own code) fails the task at once;
- an infrastructure failure (capacity, a lost host, throttling, a dropped connection) is retried on the task's
  budget (``retries``) after the task's delay;
- anything else falls through to Airflow's standard behaviour.

A retry never duplicates a job: the job's name is the task instance's, so the next try re-attaches. On Airflow 2.11
and 3.0-3.2 `retry_policy()` is None and nothing changes. The worker runs ``evaluate``; the scheduler only sees the
decision (the policy is serialized as a flag).
"""

from __future__ import annotations

from typing import Any

try:  # Airflow 3.3+
    from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy
except ImportError:  # Airflow 2.11, 3.0-3.2: no retry policies
    RetryDecision = RetryPolicy = None  # type: ignore[assignment,misc]

#: Exceptions of the task's own code that another try cannot fix.
DETERMINISTIC = (ImportError, SyntaxError, TypeError, NameError)
#: Exceptions of the way to a service, which another try may not meet (botocore's by name: no import here).
TRANSIENT = (ConnectionError, TimeoutError)
TRANSIENT_NAMES = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                             "ConnectionClosedError", "ThrottlingException"})


def failure_class_of(exception: BaseException) -> str | None:
    """The trainops failure class of a task's exception: the one an operator attached (``failure_class``), else the
    classifier's verdict on the exception's type and text; None when nothing says."""
    klass = getattr(exception, "failure_class", None)
    if klass:
        return str(klass)
    if isinstance(exception, DETERMINISTIC):
        return "user"
    if isinstance(exception, TRANSIENT) or type(exception).__name__ in TRANSIENT_NAMES:
        return "infrastructure"
    return None  # a bug or an unknown failure: Airflow's standard retries decide


if RetryPolicy is not None:

    class FailureClassRetryPolicy(RetryPolicy):  # type: ignore[misc,valid-type]
        """Fail at once on a user error, retry an infrastructure failure, else Airflow's standard retries."""

        def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                     context: Any = None) -> Any:
            klass = failure_class_of(exception)
            if klass in ("user", "setup", "timeout", "stopped"):
                return RetryDecision.fail(reason=f"trainops: a {klass} failure; another try would fail the same way")
            if klass == "infrastructure":
                return RetryDecision.retry(reason="trainops: an infrastructure failure; the next try re-attaches or "
                                                  "starts the next attempt")
            return RetryDecision.default()

        def serialize(self) -> dict[str, Any]:
            return {"__type": f"{__name__}.FailureClassRetryPolicy"}

        @classmethod
        def deserialize(cls, data: dict[str, Any]) -> FailureClassRetryPolicy:
            return cls()


def retry_policy() -> Any:
    """The policy where the installed Airflow has retry policies, else None."""
    return FailureClassRetryPolicy() if RetryPolicy is not None else None
