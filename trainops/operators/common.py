"""What every trainops operator shares: errors as Airflow failures, job names from the task, AWS clients from the hook.

Operators only translate: they call the typed steps (`trainops.steps`) and turn what comes back into Airflow terms.
This module keeps that translation in one place:

- `airflow_error`: a trainops `SpecError` (bad input) becomes an ``AirflowFailException`` (a retry cannot fix a
  bad spec, so Airflow should not retry it) whose message lists every problem with its field; a `JobFailed` becomes
  an ``AirflowException`` (a retry may help: spot capacity, a flaky host).
- `task_job_name`: the deterministic job name of a task instance. It covers the DAG id, task id, run id and map index,
  but not the try number, so a retried or cleared task finds the job its first try created (re-attach) instead of
  starting a duplicate.
- `aws_client_factory`: trainops' client factory built from the Amazon provider's ``AwsBaseHook``, so the Airflow
  connection (``aws_conn_id``) decides credentials, role assumption, region, endpoint URL and botocore config;
  trainops never handles credentials itself. Unit tests replace this one function with stubbed clients.

Imports: the standard library and Airflow's light modules (`trainops.operators.compat`) only at module level
(this module is imported when a DAG file is parsed); trainops' steps, boto3 and the Amazon provider are imported
inside functions.

Function-local imports (DAG-parse path): a DAG file imports the operators (bench/dag_parse.py measures it); the
steps, the spec and the backends load when a task runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from trainops.operators.compat import AirflowException, AirflowFailException

ClientFactory = Callable[[str], Any]

#: Every trainops operator retries twice, a minute apart, unless the task or the DAG's default_args say otherwise:
#: the steps re-attach to what the failed try started (jobs are named per task instance), so a retry never
#: duplicates work, and most failures a retry can fix (a lost worker, a throttled API, spot capacity) are transient.
DEFAULT_RETRIES = 2
DEFAULT_RETRY_DELAY_SECONDS = 60



#: Failure classes a retry cannot fix (`trainops.backends.failures`): the task fails without using Airflow's retries
#: (a spent budget cannot pay for another try either).
NOT_RETRIED = ("user", "setup", "timeout", "stopped", "budget")


def failure_exception(message: str, result: Any) -> AirflowException:
    """The Airflow exception for a failed training job: `AirflowFailException` when its class is one a retry cannot
    fix (a user error, a time limit, a stop), so Airflow's own retries stay for Airflow's own failures."""
    from trainops.backends.vocabulary import classify_result

    verdict = None
    if isinstance(result, dict) and result.get("secondary_status_history") and not result.get("secondary_statuses"):
        from trainops.backends.failures import status_walk

        result = {**result, "secondary_statuses": status_walk(result["secondary_status_history"])}
    if isinstance(result, dict) and result:
        klass = result.get("failure_class")
        verdict = classify_result(result) if not klass else None
        klass = klass or (verdict.failure_class if verdict else None)
        evidence = (result.get("failure_evidence") or {}).get("evidence") or (verdict.evidence if verdict else "")
        if klass and klass != "unknown":
            message = f"{message} [{klass} failure{': ' + evidence if evidence else ''}]"
        if klass in NOT_RETRIED:
            why = "the run's max_cost_usd is spent" if klass == "budget" else "another try would fail the same way"
            failed = AirflowFailException(f"{message} (not retried: {why})")
            failed.failure_class = klass  # type: ignore[attr-defined]
            return failed
        if klass:
            error = AirflowException(message)
            error.failure_class = klass  # type: ignore[attr-defined]  # read by the retry policy (Airflow 3.3+)
            return error
    return AirflowException(message)


def airflow_error(error: BaseException) -> AirflowException:
    """The Airflow exception to raise for a trainops error (``raise airflow_error(error) from error``)."""
    from trainops.errors import JobFailed, SpecError

    if isinstance(error, SpecError):
        return AirflowFailException(str(error))
    if isinstance(error, JobFailed):
        summary = getattr(error, "summary", None)  # a SageMaker wait's failure carries the job's summary
        result = getattr(error, "result", None) or (summary.to_dict() if summary is not None
                                                    and hasattr(summary, "to_dict") else None)
        return failure_exception(str(error), result)
    return AirflowException(str(error))


class translated_errors:
    """``with translated_errors(): ...`` re-raises trainops errors as Airflow ones (see `airflow_error`).

    Other exceptions pass unchanged: they are bugs or infrastructure failures, and their traceback matters.
    """

    def __enter__(self) -> translated_errors:
        return self

    def __exit__(self, kind, error, traceback) -> Literal[False]:
        from trainops.errors import TrainopsError

        if error is not None and isinstance(error, TrainopsError):
            raise airflow_error(error) from error
        return False


def check_backend(backend: Any) -> None:
    """Refuse, with an ``AirflowFailException`` naming the field, a task's ``backend`` that no backend is registered
    or named under (the built-in ones, an installed package's, the platform's named ones:
    `trainops.backends.choices`); None passes (the connection's backend, else the registry's default, is chosen
    when the backend is opened, `BackendChoice.settings`)."""
    from trainops.backends import choices

    if backend is None:
        return
    names = choices()
    if not isinstance(backend, str) or backend not in names:
        raise AirflowFailException(f"invalid input: 1 problem\n  - backend: {backend!r} is not one of "
                                   f"{', '.join(names)}")


def with_shorthands(backend_options: Any, field: str = "backend_options", **shorthands: Any) -> dict[str, Any]:
    """An operator's one mapping of settings (``backend_options``, templated: a mapping, or its JSON text; ``field``
    names it in messages), with the settings its own arguments stand for (``launcher``, ``preflight``...; None: not
    given) laid in; a setting given both ways is refused, naming it."""
    import json

    from trainops.errors import Problem, SpecError

    options = backend_options
    if isinstance(options, str):  # a templated value rendered as text
        try:
            options = json.loads(options) if options.strip() else {}
        except ValueError:
            options = None
    if options is not None and not isinstance(options, dict):
        raise SpecError(Problem(field, "must be a mapping of setting -> value (or its JSON text)"))
    options = dict(options or {})
    both = sorted(key for key, value in shorthands.items() if value is not None and options.get(key) is not None)
    if both:
        raise SpecError([Problem(key, f"is given twice (an argument and {field}): give it once")
                         for key in both])
    options.update({key: value for key, value in shorthands.items() if value is not None})
    return options


def command_hint(command: str, handle: Any, backend: str | None = None, *more: str) -> str:
    """The command line that reaches a job from a shell (``trainops logs NAME --backend B -o workdir=...``): the
    task's backend as it names it (a named one keeps its settings), and where the handle says the job lives (an
    Airflow worker's work directory is not the command line's default)."""
    import shlex

    where = "".join(f" -o {shlex.quote(f'{key}={value}')}" for key, value in handle.location.items())
    extra = "".join(f" {part}" for part in more)
    return f"trainops {command} {handle.job_name}{extra} --backend {backend or handle.backend}{where}"


def with_retry_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` of an operator with trainops' retry defaults where neither the task nor the DAG's ``default_args``
    (which Airflow hands to ``__init__`` as ``default_args``) set them."""
    from datetime import timedelta

    from trainops.operators.retry_policy import retry_policy

    defaults = kwargs.get("default_args") or {}
    for key, value in (("retries", DEFAULT_RETRIES), ("retry_delay", timedelta(seconds=DEFAULT_RETRY_DELAY_SECONDS))):
        if key not in kwargs and key not in defaults:
            kwargs[key] = value
    policy = retry_policy()  # Airflow 3.3+: user errors fail at once, infrastructure failures retry
    if policy is not None and "retry_policy" not in kwargs and "retry_policy" not in defaults:
        kwargs["retry_policy"] = policy
    return kwargs


def task_identity(context: Any) -> tuple[str, str, str, int]:
    """(dag_id, task_id, run_id, map_index) of the running task instance; map_index is -1 when not mapped."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return str(ti.dag_id), str(ti.task_id), str(ti.run_id), -1 if map_index is None else int(map_index)


def task_job_name(context: Any, base: str | None) -> str:
    """``<base>-<hash of dag id, task id, run id, map index>``, at most 63 characters (docs/contracts.md section 5).

    The try number is deliberately left out: every try of a task instance gets the same name, which is what makes
    a retry re-attach. ``base`` defaults to the task id.
    """
    from trainops.spec.names import deterministic_job_name

    dag_id, task_id, run_id, map_index = task_identity(context)
    return deterministic_job_name(base or task_id, dag_id, task_id, run_id, map_index)


class _LazyClients:
    """`aws_client_factory`'s clients, built on the first call; its advisory clients too (`advisory_client`), so the
    preflight's reads keep their one retry and short timeouts under Airflow, not the ordinary clients' ten attempts."""

    def __init__(self, aws_conn_id: str | None, region_name: str | None):
        import threading

        self._connection = (aws_conn_id, region_name)
        self._built: list[ClientFactory] = []
        self._lock = threading.Lock()

    def _factory(self) -> ClientFactory:
        with self._lock:
            if not self._built:
                self._built.append(aws_client_factory(*self._connection)[0])
        return self._built[0]

    def __call__(self, service: str) -> Any:
        return self._factory()(service)

    def advisory(self, service: str) -> Any:
        from trainops.aws.clients import advisory_client

        return advisory_client(self._factory(), service)


def lazy_aws_client_factory(aws_conn_id: str | None, region_name: str | None) -> ClientFactory:
    """`aws_client_factory`, built on its first call: a task whose backend never calls AWS (local, local sources)
    never reads the connection, so every operator can hand one to any backend."""
    return _LazyClients(aws_conn_id, region_name)


def aws_client_factory(aws_conn_id: str | None, region_name: str | None) -> tuple[ClientFactory, str | None]:
    """A trainops client factory built from the Airflow connection as the Amazon provider builds its own clients,
    and the region it resolved.

    Every client comes from ``AwsBaseHook(aws_conn_id=...)``'s session (credentials, ``role_arn`` assumption,
    profile), with the connection's ``endpoint_url`` (or the service's own one under ``service_config``), its
    ``verify`` and its botocore ``config_kwargs`` merged over trainops' retry settings: a connection that points at a
    VPC endpoint, LocalStack or moto is where the calls go. The region is ``region_name`` when given, else the
    connection's (``region_name`` in its extra), else boto3's own default chain (``AWS_DEFAULT_REGION``...).
    """
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from trainops.aws.clients import SessionClients, client_config

    hook = AwsBaseHook(aws_conn_id=aws_conn_id, region_name=region_name)  # the clients are built per service below
    wrapper = hook.conn_config
    session = hook.get_session(region_name=region_name)
    config = client_config()
    if wrapper.botocore_config is not None:
        config = config.merge(wrapper.botocore_config)  # the connection's settings win over trainops' defaults
    # One client per service (a boto3 session is not thread-safe: the log follower and the wait share the factory),
    # and the preflight's advisory clients with the same endpoint.
    factory = SessionClients(session, config, lambda service: {
        "endpoint_url": wrapper.get_service_endpoint_url(service), "verify": wrapper.verify})
    return factory, region_name or hook.region_name or session.region_name


def task_logger(operator: Any) -> Callable[[str], None]:
    """A one-argument log function that writes each line into the task log (the steps' ``log`` callback)."""
    log = operator.log

    def write(line: str) -> None:
        log.info("%s", line)

    return write
