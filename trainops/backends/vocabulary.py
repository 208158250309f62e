"""What each engine means by its own words: the record a backend declares, and the lookup the neutral code consults.

The neutral modules (`trainops.backends.states`, `trainops.backends.failures`, the cost and forecast of
`trainops.steps`, the spec's rules) name no engine. Each engine declares a `Vocabulary`:

- its status tables (resource kind -> its state -> success / failure / waiting) and how an ended state of its
  training job reads as trainops' `JobStatus` (``ended_as``; a state not listed there reads by its outcome);
- its failure rules (`trainops.backends.failures.Rule`, each in a stage of the table), matched against the typed
  `FailureEvidence` its backend records (the result keys `failures.RESULT_KEYS`): a lost node can be
  ``infrastructure`` (retried) on an engine that says so; an engine without rules gets the neutral ones, and what
  none matches is ``unknown``;
- its price (`price`: instance type, region -> USD per hour, or None where a type is not priced). ``price=None``:
  the engine has no price at all, so cost is reported as unknown and a ``max_cost_usd`` cannot be kept (refused:
  `trainops.steps.forecast.check_budget`), never another engine's price;
- the spec rule sets that bind where its jobs run (`trainops.spec.rule_registry`: ``sagemaker_request`` where the job
  runs as the SageMaker request, an engine's own set otherwise);
- the options the front ends pass it (`FRONT_END_OPTIONS`: declared here, asked for with `Vocabulary.takes`).

A backend registers its vocabulary by naming it in its class (``vocabulary = MY_VOCABULARY``, read by
`vocabulary_of`), and `register` adds its status tables to `states.TABLES`. A result dict names its backend, so the
classifier of an ended attempt (`classify_result`) takes that backend's rules wherever the result is read (the CLI,
the Airflow trigger's event, a KFP component).

Standard library only (and trainops' own light modules): the Airflow trigger and the KFP components import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainops.backends import backend_class, failures, resolve, states
from trainops.backends.failures import FailureEvidence, Rule, Verdict
from trainops.backends.states import FAILURE, SUCCESS, WAITING, JobStatus, Outcome
from trainops.errors import SpecError

__all__ = ["FRONT_END_OPTIONS", "PriceLookup", "Vocabulary", "classify_result", "neutral", "register",
           "registered_vocabularies", "vocabulary_of"]

#: An engine's price: (instance type, region) -> USD per hour, None where that type has no price.
PriceLookup = Callable[[str, str], "float | None"]

#: The options a front end passes a backend beside the user's own (a pipeline's train step, the Airflow operator, the
#: KFP train component): name -> what it holds. A backend takes those its vocabulary declares (`Vocabulary.takes`);
#: its options type has a field of each name.
FRONT_END_OPTIONS: dict[str, str] = {
    "processes_per_host": "processes started per host (int): a pipeline's train step, the operator's argument",
    "channel_overrides": "channel -> a path the engine reads it from instead of the spec's source (mapping)",
    "checkpoint_key": "a key for the job's checkpoint location that stays the same over its attempts (str): the "
                      "operator's task id, the KFP component's job name",
}


@dataclass(frozen=True)
class Vocabulary:
    """One engine's words: states, failure rules, price, spec rule sets and the front-end options it takes.

    ``tables``: resource kind -> engine state -> outcome (``success``, ``failure``, ``waiting``); ``training_kind``:
    the kind of its training jobs' states (``job``: trainops' own, for an engine whose records use `JobStatus`);
    ``ended_as``: an ended state -> the `JobStatus` value it means (a state not listed: Completed on success, Failed
    on failure); ``state_meanings``: a state -> a sentence for users. ``rules``: its failure rules;
    ``price`` / ``price_basis``: see the module docstring; ``spec_rules``: the spec rule sets bound where its jobs run
    (besides the neutral rules, which bind every engine); ``front_end_options``: the names of `FRONT_END_OPTIONS` its
    options take.
    """

    engine: str
    tables: Mapping[str, Mapping[str, Outcome]] = field(default_factory=dict)
    training_kind: str = "job"
    ended_as: Mapping[str, str] = field(default_factory=dict)
    state_meanings: Mapping[str, str] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    price: PriceLookup | None = None
    price_basis: str = ""
    spec_rules: frozenset[str] = frozenset()
    front_end_options: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.front_end_options) - set(FRONT_END_OPTIONS))
        if unknown:
            raise ValueError(f"{self.engine}'s vocabulary declares front-end options {', '.join(unknown)}; the front "
                             f"ends pass only {', '.join(FRONT_END_OPTIONS)}")
        if self.training_kind != "job" and self.training_kind not in self.tables:
            raise ValueError(f"{self.engine}'s vocabulary: training_kind {self.training_kind!r} has no table")
        for state, status in self.ended_as.items():
            JobStatus(status)  # a ValueError names a value that is not a JobStatus
            if self.training_kind != "job" and state not in self.tables[self.training_kind]:
                raise ValueError(f"{self.engine}'s vocabulary: ended_as names {state!r}, which is not a state of "
                                 f"its {self.training_kind} table")

    # --- states ------------------------------------------------------------------------------------------------
    def classify(self, kind: str, status: str | None) -> Outcome:
        """success, failure or waiting for a state of one of this engine's resource kinds (an unknown state waits,
        logged once: `states.classify`)."""
        if kind not in self.tables and kind != "job":
            raise KeyError(f"{kind!r} is not a resource kind of the {self.engine} engine (its kinds: "
                           f"{', '.join(self.tables) or 'none'})")
        register(self)
        return states.classify(kind, status)

    def job_status(self, state: str | None) -> JobStatus:
        """trainops' status of one of its training job's states: still waiting -> InProgress, an ended state -> its
        ``ended_as``, else Completed (success) or Failed (failure)."""
        outcome = self.classify(self.training_kind, state)
        if outcome == WAITING:
            return JobStatus.IN_PROGRESS
        if state in self.ended_as:
            return JobStatus(self.ended_as[str(state)])
        return JobStatus.COMPLETED if outcome == SUCCESS else JobStatus.FAILED

    def explain_state(self, state: str | None) -> str:
        """A one-line explanation of a state for users (the state itself when the engine gives none; empty: none)."""
        if not state:
            return ""
        return self.state_meanings.get(state, state)

    # --- failures ----------------------------------------------------------------------------------------------
    @property
    def failure_rules(self) -> tuple[Rule, ...]:
        """The whole table this engine's attempts are classified by: the neutral rules and its own, stage by stage."""
        return failures.rules_with(self.rules)

    def classify_failure(self, evidence: FailureEvidence) -> Verdict | None:
        """The verdict for an ended attempt of this engine (None: it completed)."""
        return failures.classify(evidence, self.failure_rules)

    # --- price -------------------------------------------------------------------------------------------------
    @property
    def priced(self) -> bool:
        """Whether this engine has a price at all (a type it does not list is still unpriced)."""
        return self.price is not None

    def hourly_price(self, instance_type: str | None, region: str) -> float | None:
        """USD per hour of one instance of ``instance_type``; None: unknown (no price, or not listed)."""
        if self.price is None or not instance_type:
            return None
        return self.price(instance_type, region)

    def unpriced_reason(self) -> str:
        """Why a cost of this engine is unknown when it has no price at all ("" when it has one)."""
        if self.priced:
            return ""
        return f"the {self.engine or 'unnamed'} backend has no price list: its cost is unknown"

    # --- front-end options -------------------------------------------------------------------------------------
    def takes(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Those of the front-end options ``values`` (names of `FRONT_END_OPTIONS`) this engine takes, None left
        out. A name that is not a front-end option is a programming error (``KeyError``)."""
        unknown = sorted(set(values) - set(FRONT_END_OPTIONS))
        if unknown:
            raise KeyError(f"{', '.join(unknown)}: not a front-end option ({', '.join(FRONT_END_OPTIONS)})")
        return {key: value for key, value in values.items()
                if key in self.front_end_options and value is not None}


_REGISTERED: dict[str, Vocabulary] = {}


def register(vocabulary: Vocabulary) -> Vocabulary:
    """Register an engine's vocabulary: its status tables join `states.TABLES` (a kind another engine holds is a
    ``ValueError``), and `vocabulary_of` finds it by the engine's name. Idempotent; returns the vocabulary."""
    if _REGISTERED.get(vocabulary.engine) is vocabulary:
        return vocabulary
    states.register_tables(vocabulary.tables, vocabulary.engine)
    if vocabulary.engine:
        _REGISTERED[vocabulary.engine] = vocabulary
    return vocabulary


def registered_vocabularies() -> dict[str, Vocabulary]:
    """The vocabularies registered so far, by engine (the built-in engines': import their packages first)."""
    return dict(_REGISTERED)


def neutral(engine: str = "") -> Vocabulary:
    """The vocabulary of an engine that declares none: no states of its own, the neutral failure rules, no price, the
    neutral spec rules only."""
    return Vocabulary(engine=engine)


def vocabulary_of(backend: object) -> Vocabulary:
    """The vocabulary of a backend: an opened backend or its class (its ``vocabulary`` attribute; typed ``object``:
    this module sits below the seam, which declares its vocabulary from here), or a backend's
    name (a named backend's: its backend's; None: the default backend), its class imported now. A backend that
    declares none, or a name no backend answers to (an old record's), gets `neutral`: nothing is borrowed from
    another engine."""
    if backend is None or isinstance(backend, str):
        if backend is not None and backend in _REGISTERED:  # registered by its engine (an import, a test)
            return _REGISTERED[backend]
        try:
            name, _ = resolve(backend)
        except SpecError:
            return neutral(str(backend))
        found = _REGISTERED.get(name)
        if found is not None:
            return found
        try:
            cls: Any = backend_class(name)
        except SpecError:
            return neutral(name)
    else:
        cls = backend if isinstance(backend, type) else type(backend)
    declared = getattr(cls, "vocabulary", None)
    options = frozenset(getattr(getattr(cls, "Options", None), "names", lambda: ())())
    if not isinstance(declared, Vocabulary):
        # Nothing declared: the neutral words, and the front-end options its options type has a field for.
        return Vocabulary(engine=getattr(cls, "name", "") or "", front_end_options=options & set(FRONT_END_OPTIONS))
    missing = sorted(declared.front_end_options - options)
    if missing:
        raise ValueError(f"{declared.engine}'s vocabulary declares front-end options {', '.join(missing)}, which its "
                         f"options type {cls.Options.__name__} has no field for")
    return register(declared)


def classify_result(result: Mapping[str, Any], *, stop_requested: bool = False,
                    backend: object = None) -> Verdict | None:
    """The verdict for a train step's result dict, by the rules of the backend that ran it (``backend``, else the
    result's own ``backend`` key; neither: the default backend's, as everywhere a backend is not named)."""
    chosen = backend if backend is not None else result.get("backend")
    vocabulary = vocabulary_of(chosen or None)
    return vocabulary.classify_failure(failures.evidence_from_result(result, stop_requested=stop_requested))


# `FAILURE` is part of what an engine's tables are written with; re-exported beside the others.
OUTCOMES: tuple[Outcome, ...] = (SUCCESS, FAILURE, WAITING)
