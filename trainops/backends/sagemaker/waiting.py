"""The polling loop of the SageMaker backend's other resources: describe, classify by the states table, sleep, until
terminal.

Processing jobs, FSx tasks and associations wait through `poll`; only the describe call and the status field differ.
(A training job is the kit's: `SageMakerBackend.look` under `trainops.backends.polled.PolledBackend.wait`, with the
guards.) A describe that fails without proving anything (a timeout, a 5xx, throttling past botocore's
retries, a refused connection) is a failed look, not a failed job: `trainops.backends.looks` decides when the wait
gives up, and the job is never stopped for it. The clock and the sleep are parameters so tests walk through states
without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from trainops.aws.clients import translate_client_error
from trainops.backends.looks import REATTACH, LookPolicy, Looks
from trainops.backends.states import WaitTimedOut, classify


def poll(
    describe: Callable[[], dict[str, Any]],
    *,
    resource: str,
    status_of: Callable[[dict[str, Any]], str | None],
    bound_seconds: float,
    poll_seconds: float = 30.0,
    what: str = "",
    progress_of: Callable[[dict[str, Any]], Any] | None = None,
    on_update: Callable[[dict[str, Any]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    looks: LookPolicy | None = None,
    reattach: str = REATTACH,
) -> dict[str, Any]:
    """Call ``describe`` until the status it reports is terminal, and return that last response.

    Args:
        describe: returns the resource's current description (one AWS describe call).
        resource: the kind, a key of `trainops.backends.states.TABLES`.
        status_of: picks the status out of a description.
        bound_seconds: how long to keep polling; past it, `WaitTimedOut` is raised (the resource is left running).
        poll_seconds: the pause between two describe calls.
        what: how to name the resource in messages (``"training job my-job"``).
        progress_of: picks what counts as progress (default: the status); ``on_update`` is called when it changes.
        on_update: called with the description each time the progress changes, including the first time.
        clock, sleep: injectable time, for tests.
        looks, reattach: the failed-look policy (default: `LookPolicy.from_environment`) and how the give-up
            message says to re-attach. A describe that raises a failed look (`is_failed_look`) is looked
            at again; past both bounds `JobOutOfSight` is raised, the resource left as it is.

    Success and failure both return: the caller knows what a failure means for its resource and what to raise.
    """
    started = clock()
    progress = progress_of or status_of
    last_progress: Any = object()  # a sentinel no description equals, so the first one is always reported
    failed_looks = Looks(what or resource, reattach=reattach, poll_seconds=poll_seconds, policy=looks, clock=clock)
    while True:
        try:
            response = describe()
        except Exception as error:  # noqa: BLE001 - what is not a failed look is raised again by `failed`
            sleep(failed_looks.failed(error))
            continue
        current = progress(response)
        if current != last_progress:
            last_progress = current
            if on_update is not None:
                on_update(response)
        status = status_of(response)
        if classify(resource, status) != "waiting":
            return response
        failed_looks.succeeded()
        elapsed = clock() - started
        if elapsed >= bound_seconds:
            raise WaitTimedOut(
                f"gave up waiting for {what or resource} after {elapsed:.0f} s (bound {bound_seconds:.0f} s); "
                f"last status {status!r}. It was not stopped: check it, or stop it."
            )
        sleep(max(0.0, min(poll_seconds, bound_seconds - elapsed)))


def describer(call: Callable[..., dict[str, Any]], action: str, field: str = "job_name",
              **arguments: Any) -> Callable[[], dict[str, Any]]:
    """A `describe` for `poll`: one AWS describe call with these arguments, its ClientError turned into trainops'
    own error (`translate_client_error`) naming `action` and `field`."""
    def describe() -> dict[str, Any]:
        from botocore.exceptions import ClientError


        try:
            return call(**arguments)
        except ClientError as error:
            raise translate_client_error(error, action, field) from error
    return describe


def stop_unless_ended(status: str, *, resource: str, stopping: str, call: Callable[[], Any], action: str,
                      field: str) -> str:
    """Stop a job of the states table's ``resource`` whose current status is ``status``: nothing when it ended
    already or is ``stopping`` (not an error: ``on_kill`` may stop at any time), else ``call`` (its ClientError
    turned into trainops' own, naming ``action`` and ``field``). Returns the status it is in now."""
    if classify(resource, status) != "waiting" or status == stopping:
        return status
    describer(call, action, field)()
    return stopping
