"""Failure classes and retry budgets: how many fresh attempts each class of failure may start.

Data, not behaviour: a pipeline file's ``retries:`` and the CLI's ``--retries`` are parsed here, with the spec, so the
spec layer needs nothing above it. Which class an ended attempt belongs to is decided by the failure classifier
(`trainops.backends.failures`), from what the backend knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

USER = "user"
INFRASTRUCTURE = "infrastructure"
TIMEOUT = "timeout"
STOPPED = "stopped"
UNKNOWN = "unknown"
BUDGET = "budget"  # the run's max_cost_usd was reached: trainops stopped the job (never retried)
#: The job failed before its training script started: a package it needs is missing, a channel cannot be read, a
#: limit of the machine. Not the script's fault, and a retry meets it again: no budget (fix what it names).
SETUP = "setup"
CLASSES = (USER, INFRASTRUCTURE, TIMEOUT, STOPPED, BUDGET, SETUP, UNKNOWN)
#: Classes no budget can retry: a stop was asked for; a spent budget cannot pay for another attempt.
NEVER_RETRIED = (STOPPED, BUDGET)


class Classified(Protocol):
    """What a budget reads of a verdict: its failure class."""

    @property
    def failure_class(self) -> str: ...


@dataclass
class RetryBudgets:
    """How many fresh attempts each failure class may start. Only infrastructure failures are worth another try by
    default; `user` defaults to 0 (a script's error is reproduced by a retry), timeouts and stops to 0."""

    infrastructure: int = 3
    user: int = 0
    timeout: int = 0
    unknown: int = 0
    backoff_seconds: float = 30.0
    backoff_factor: float = 2.0
    max_backoff_seconds: float = 600.0
    used: dict[str, int] = field(default_factory=dict)

    FIELDS = ("infrastructure", "user", "timeout", "unknown")

    @classmethod
    def parse(cls, value: Any, field_name: str = "retries") -> RetryBudgets:
        """From None, a RetryBudgets, a mapping (`{infrastructure: 3, user: 0, backoff_seconds: 30}`) or the CLI text
        `infrastructure=3,user=0`. Raises ValueError naming the field and the valid keys."""
        if value is None:
            return cls()
        if isinstance(value, RetryBudgets):
            return cls(**{k: v for k, v in asdict(value).items() if k != "used"})
        if isinstance(value, str):
            pairs = [part.split("=", 1) for part in value.split(",") if part.strip()]
            if any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"{field_name}: expected NAME=COUNT pairs separated by commas, got {value!r}")
            value = {name.strip(): count.strip() for name, count in pairs}
        if not isinstance(value, Mapping):
            raise ValueError(f"{field_name}: expected a mapping of failure class to count, got {type(value).__name__}")
        allowed = set(cls.FIELDS) | {"backoff_seconds", "backoff_factor", "max_backoff_seconds"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ValueError(f"{field_name}: unknown key(s) {', '.join(map(str, unknown))}; valid: "
                             f"{', '.join(sorted(allowed))}")
        parsed: dict[str, Any] = {}
        for name, raw in value.items():
            try:
                number = float(raw) if name.endswith(("seconds", "factor")) else int(raw)
            except (TypeError, ValueError):
                raise ValueError(f"{field_name}.{name}: expected a number, got {raw!r}") from None
            if number < 0 or (name in cls.FIELDS and number > 20):
                raise ValueError(f"{field_name}.{name}: must be between 0 and 20 (attempts) or >= 0 (seconds), "
                                 f"got {raw!r}")
            parsed[name] = number
        return cls(**parsed)

    def allows(self, verdict: Classified) -> bool:
        """Whether the class of `verdict` has an attempt left (stops and spent budgets are never retried)."""
        if verdict.failure_class in NEVER_RETRIED:
            return False
        return self.used.get(verdict.failure_class, 0) < int(getattr(self, verdict.failure_class, 0))

    def spend(self, verdict: Classified) -> float:
        """Record one retry of this class and return the seconds to wait before it (exponential backoff)."""
        count = self.used.get(verdict.failure_class, 0)
        self.used[verdict.failure_class] = count + 1
        return min(self.max_backoff_seconds, self.backoff_seconds * (self.backoff_factor ** count))

    def to_dict(self) -> dict[str, Any]:
        """The budgets and what was used of them."""
        return asdict(self)
