"""Build the trainops KFP components for given settings (image, packages to install).

Components are built on demand rather than decorated at import time, so one process can build them for a cluster
(an image that installs trainops) and for a local run (nothing installed) side by side:

    from trainops.components import build_components, ComponentSettings
    ops = build_components(ComponentSettings(base_image="registry.example.com/trainops:0.1.0",
                                             packages_to_install=()))
    task = ops.train(spec_json=..., ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kfp import dsl

from trainops.components import functions
from trainops.components.settings import ComponentSettings


@dataclass(frozen=True)
class Components:
    """One KFP component per step (call them inside a ``@dsl.pipeline`` function)."""

    prepare: Any
    stage: Any
    train: Any
    evaluate: Any
    register: Any
    gate_failed: Any


def build_components(settings: ComponentSettings | None = None) -> Components:
    """The components, each a ``kfp.dsl.component`` of its function in `trainops.components.functions`."""
    options = (settings or ComponentSettings()).component_options()
    built = {name: dsl.component(function, **options) for name, function in functions.FUNCTIONS.items()}
    return Components(**built)
