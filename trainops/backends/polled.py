"""A backend whose jobs run away from this process and are followed by looking at them: `PolledBackend`.

The backend writes what only it knows, one look at a job (`PolledBackend.look`: where it stands, a `JobResult`, and
what the guards observe of it, an `Observation`), how to stop it (`Backend.stop`) and, optionally, the log lines
written after a cursor (`PolledBackend.read_logs`). The helper gives everything else, once for every engine:

- `wait`: look at the poll interval until the job ends, printing its new log lines; the guards
  (`trainops.backends.guards`: the wait bound from the job's own start, ``max_cost_usd``, ``stall_timeout``) are
  checked at each look, and a guard that trips stops the job, which the result then carries (`settle`);
- `watch`: the same per-look guard check for a caller that polls the job itself (the Airflow trigger, a worker);
- failed looks (`trainops.backends.looks`): a look that fails without proving anything is looked at again, and the
  wait gives up (the job left alone) only past both bounds of the policy;
- `describe`, `log_lines` (the cursor a poller streams logs with) and `logs` (``trainops logs --follow``);
- what a wait says as the job goes (the module's logger): each change of its status, with what the engine's
  vocabulary says the state means (`Vocabulary.explain_state`: a spot interruption, a queue), and how it ended.

So a backend that is a `PolledBackend` keeps every guard without writing a wait loop. Standard library and trainops'
light modules only: the Airflow trigger imports the seam.
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trainops.backends.api import Backend, JobHandle, JobResult, Log, OptionsT
from trainops.backends.guards import WAIT_BOUND, JobGuards, Observation, Tripped, Watchdog, act, settle, stops
from trainops.backends.looks import REATTACH, Looks, is_failed_look
from trainops.backends.states import WaitTimedOut
from trainops.backends.vocabulary import vocabulary_of

logger = logging.getLogger(__name__)

#: Log lines read at once while printing or following a job's logs (a longer backlog is read in several reads).
LOG_BATCH = 1000
#: How long a wait follows a job a guard stopped for the stop to show (SageMaker uploads the model first) before it
#: gives up saying so: a job that never shows its stop does not hold the wait for ever.
STOP_SETTLE_SECONDS = 3600.0


@dataclass(frozen=True)
class Look:
    """One look at a job: where it stands (``result``) and what the guards observe of it (``seen``; None while there
    is nothing to observe, e.g. before the job started)."""

    result: JobResult
    seen: Observation | None = None


class Watch:
    """One job's guards, checked once a look (`trainops.backends.guards.GuardWatch`): ``look()`` looks at the job
    (or takes a look already made), and when a guard trips says so and stops the job (`act`).

    A look that fails without proving anything (`is_failed_look`) checks nothing this time; a job that ended is not
    checked (there is nothing left to stop).
    """

    def __init__(self, guards: JobGuards, look: Callable[[], Look], stop: Callable[[str], Any],
                 log: Log | None = None):
        self.watchdog = Watchdog(guards)
        self._look, self._stop, self.log = look, stop, log
        self._tripped: Tripped | None = None

    @property
    def guards(self) -> JobGuards:
        return self.watchdog.guards

    @property
    def tripped(self) -> Tripped | None:
        """The guard that tripped at some look of this watch, if any (kept once it tripped)."""
        return self._tripped

    def look(self, found: Look | None = None) -> Tripped | None:
        """One check, on ``found`` (a look already made this poll) or a look made now; the guard that tripped at
        this look (None: none)."""
        if found is None:
            try:
                found = self._look()
            except Exception as error:  # noqa: BLE001 - a failed look checks nothing; anything else is raised
                if is_failed_look(error):
                    return None
                raise
        if found.result.status.terminal:
            return None
        tripped = act(self.watchdog, found.seen, self._stop, self.log)
        if tripped is not None:
            self._tripped = tripped
        return tripped

    def gave_up(self) -> bool:
        """Whether the wait bound passed with ``stop_at_bound`` off: the wait gives up and leaves the job running."""
        return self._tripped is not None and self._tripped.kind == WAIT_BOUND and not stops(self._tripped,
                                                                                             self.guards)


class PolledBackend(Backend[OptionsT]):
    """A `Backend` whose jobs are followed by looking at them: write `look`, `stop` (and `read_logs` where the jobs
    have logs); `describe`, `wait`, `watch`, `logs` and `log_lines` come from here.

    ``poll_seconds`` is the pause between two looks of a wait or a follow (an instance may set its own). `now` and
    `pause` are the clocks a wait runs on: a test walks a job through its states on a fake clock by setting both on
    an instance, and a backend's `look` reads its `Observation`'s ``now`` from `now`.
    """

    poll_seconds: float = 2.0
    #: The pause between two reads of ``logs --follow`` (None: ``poll_seconds``): a person watching a log wants it
    #: sooner than a wait needs its look.
    follow_seconds: float | None = None

    def now(self) -> float:
        """The wall clock (seconds since the epoch): what a look observes the job at, and the failed looks' clock."""
        return time.time()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next look."""
        time.sleep(seconds)

    @abc.abstractmethod
    def look(self, handle: JobHandle) -> Look:
        """One look at the job: its `JobResult` and what the guards observe (`Observation`: its start, since when
        its script runs, its billable seconds so far, its last log line or metric). Raise `SpecError` when there is
        no such job, `LookFailed` (or let a timeout / connection error through) when the look itself failed."""

    def read_logs(self, handle: JobHandle, cursor: Mapping[str, Any], limit: int) -> tuple[list[str], dict[str, Any]]:
        """At most ``limit`` complete log lines written after ``cursor`` (``{}``: from the start), each prefixed with
        its host, and the cursor after them (small JSON). Default: a job without logs."""
        return [], dict(cursor)

    # --- provided -----------------------------------------------------------------------------------------------
    def describe(self, handle: JobHandle) -> JobResult:
        return self.look(handle).result

    def log_lines(self, handle: JobHandle, cursor: Mapping[str, Any] | None = None, *, limit: int = LOG_BATCH
                  ) -> tuple[list[str], dict[str, Any]]:
        return self.read_logs(handle, dict(cursor or {}), limit)

    def watch(self, handle: JobHandle, guards: JobGuards, *, log: Log | None = None) -> Watch:
        return Watch(guards, lambda: self.look(handle), lambda reason: self.stop(handle, reason), log)

    def status_command(self, handle: JobHandle) -> str:
        """The command that shows where the job stands, for a message that says how to find it again (default:
        ``trainops status NAME --backend BACKEND``)."""
        return f"trainops status {handle.job_name} --backend {self.named_as or self.name}"

    def _looks(self, handle: JobHandle, poll_seconds: float | None = None) -> Looks:
        how = f"`{self.status_command(handle)}` shows where it stands."
        pause = self.poll_seconds if poll_seconds is None else poll_seconds
        return Looks(f"{self.label} job {handle.job_name}", poll_seconds=pause,
                     reattach=f"{REATTACH} {how}", clock=self.now, sleep=self.pause)

    def wait(self, handle: JobHandle, *, log: Log | None = None, guards: JobGuards | None = None,
             poll_seconds: float | None = None) -> JobResult:
        """Look at the job until it ends, printing its new log lines (``log``) and checking ``guards`` at each look
        (without guards: only the wait bound, which then gives up and leaves the job running); a guard that trips
        stops the job and the result carries it (``details["guard"]``, its failure reason). ``poll_seconds``: the
        pause between two looks (default: the backend's ``poll_seconds``)."""
        pause = self.poll_seconds if poll_seconds is None else poll_seconds
        chosen = guards if guards is not None else JobGuards(grace_seconds=self.WAIT_GRACE_SECONDS,
                                                              stop_at_bound=False)
        watch = self.watch(handle, chosen, log=log)
        looks = self._looks(handle, pause)
        cursor: dict[str, Any] = {}
        first, replay = True, log is not None
        said: tuple[str, str | None] | None = None
        stopped_at: float | None = None
        while True:
            try:
                found = self.look(handle)
                if not found.result.status.terminal:
                    watch.look(found)  # a stop that fails is a failed look too: asked again at the next look
                if first and not handle.created and found.result.status.terminal:
                    replay = False  # a re-attach to a job that had ended replays none of its log
                first = False
                if replay and log is not None:  # after the look: a job seen ended has written all it ever will
                    self._print_new(handle, cursor, log)  # a read that fails (throttled) is read again next time
            except Exception as error:  # noqa: BLE001 - what is not a failed look is raised again by `failed`
                self.pause(looks.failed(error))  # past both bounds: JobOutOfSight, the job left alone
                continue
            looks.succeeded()
            if (found.result.status.value, found.result.secondary_status) != said:
                said = (found.result.status.value, found.result.secondary_status)
                logger.info("[trainops] %s", self.progress(found.result))
            if found.result.status.terminal:
                result: JobResult = settle(found.result, watch.tripped)
                return result
            if watch.tripped is not None and not watch.gave_up():
                stopped_at = stopped_at if stopped_at is not None else self.now()
                if self.now() - stopped_at >= STOP_SETTLE_SECONDS:
                    raise WaitTimedOut(f"{self.label} job {handle.job_name} was stopped ({watch.tripped.message}) "
                                       f"{STOP_SETTLE_SECONDS:.0f} s ago and has not ended (last status "
                                       f"{found.result.status.value} / {found.result.secondary_status}): "
                                       f"`{self.status_command(handle)}` shows where it stands")
            if watch.gave_up():
                raise WaitTimedOut(f"{self.label} job {handle.job_name} did not end within its bound (max_run + "
                                   "wait_grace_seconds from its start; last status "
                                   f"{found.result.status.value} / {found.result.secondary_status}): it is left "
                                   "running; trainops stop NAME ends it")
            self.pause(self._before_next_look(watch, found, pause))

    def progress(self, result: JobResult) -> str:
        """A line for where a job stands, with what its engine says the state means (`Vocabulary.explain_state`):
        ``... job NAME: InProgress / Interrupted (spot capacity was reclaimed ...)`` while it runs, ``... job NAME
        ended Stopped (MaxRuntimeExceeded: ...): REASON`` once it ended."""
        status, secondary = result.status.value, result.secondary_status
        what = f"{self.label} job {result.job_name}"
        if not secondary or secondary == status:
            line = f"{what}: {status}" if not result.status.terminal else f"{what} ended {status}"
        else:
            meaning = vocabulary_of(self).explain_state(secondary)
            meaning = "" if meaning == secondary else meaning
            line = (f"{what}: {status} / {secondary}" + (f" ({meaning})" if meaning else "")
                    if not result.status.terminal else
                    f"{what} ended {status} ({secondary}" + (f": {meaning})" if meaning else ")"))
        return line + (f": {result.failure_reason}" if result.status.terminal and result.failure_reason else "")

    @staticmethod
    def _before_next_look(watch: Watch, found: Look, pause: float) -> float:
        """The pause, or less when the wait bound passes sooner: the bound is acted on when it passes, not up to a
        poll interval later."""
        left = watch.watchdog.remaining(found.seen) if found.seen is not None and watch.tripped is None else None
        return left if left is not None and 0 < left < pause else pause

    def _print_new(self, handle: JobHandle, cursor: dict[str, Any], log: Log) -> None:
        """Print the lines after ``cursor``, which is moved past each batch once it is printed (so a read that fails
        part way prints nothing twice when it is read again)."""
        while True:
            lines, after = self.read_logs(handle, cursor, LOG_BATCH)
            for line in lines:
                log(line)
            after = dict(after)  # the backend may hand back the mapping it was given
            cursor.clear()
            cursor.update(after)
            if len(lines) < LOG_BATCH:
                return

    def logs(self, handle: JobHandle, *, follow: bool = False) -> Iterator[str]:
        """The job's log lines; with ``follow``, new lines until it ends (a failed look is looked at again)."""
        looks = self._looks(handle)
        looks.look(lambda: self.look(handle))  # a clear error when there is no such job
        cursor: dict[str, Any] = {}
        while True:
            ended = not follow
            if follow:
                try:
                    ended = self.look(handle).result.status.terminal
                    looks.succeeded()
                except Exception as error:  # noqa: BLE001 - what is not a failed look is raised again by `failed`
                    looks.failed(error)  # past both bounds: JobOutOfSight (the lines so far were given)
                    ended = False
            try:
                while True:
                    lines, cursor = self.read_logs(handle, cursor, LOG_BATCH)
                    yield from lines
                    if len(lines) < LOG_BATCH:
                        break
            except Exception as error:  # noqa: BLE001 - a read that fails for now is read again from the cursor
                if not follow:
                    raise
                self.pause(looks.failed(error))
                continue
            if ended:
                return
            self.pause(self.poll_seconds if self.follow_seconds is None else self.follow_seconds)
