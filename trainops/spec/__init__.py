"""The typed job spec: pure data and rules (pydantic), no I/O beyond reading a spec file, no AWS calls.

The names below load on first use (PEP 562): a module that needs only a light part (`trainops.spec.names`, which
the seam imports) does not pay for pydantic and the models, e.g. ``trainops stage`` of a small tree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainops.spec.distribution import Distribution, parse_distribution
    from trainops.spec.job import JobSpec
    from trainops.spec.loader import load_job_spec, parse_job_spec, read_document

_HOMES = {"Distribution": "distribution", "parse_distribution": "distribution", "JobSpec": "job",
          "load_job_spec": "loader", "parse_job_spec": "loader", "read_document": "loader"}
__all__ = ["Distribution", "JobSpec", "load_job_spec", "parse_distribution", "parse_job_spec", "read_document"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'trainops.spec' has no attribute {name!r}")
    return getattr(importlib.import_module(f"trainops.spec.{_HOMES[name]}"), name)
