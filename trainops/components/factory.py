"""Build the trainops KFP components for given settings (image; containerized or lightweight).

Components are built on demand rather than decorated at import time, so one process can build them for a cluster
(the image built from the Dockerfile) and for a local run (kfp.local, nothing installed) side by side:

    from trainops.components import build_components, ComponentSettings
    ops = build_components(ComponentSettings(base_image="registry.example.com/trainops:0.1.0"))
    task = ops.train(spec_json=..., ...)

Whatever the kind, the component's Python is the container's first process: a containerized component's command is
Python itself; in a lightweight one, each ``sh`` of KFP's start script ``exec``s the next step (see `exec_python`).
A SIGTERM from Kubernetes (pod deleted, run cancelled) then reaches the component's handler, which stops the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kfp import dsl

from trainops.components import functions
from trainops.components.settings import EXECUTOR_COMMAND, ComponentSettings

#: KFP's lightweight start script runs the executor as a child of ``sh`` (and, with packages, that ``sh`` as a child
#: of another): replaced so that every step is ``exec``ed. The originals are asserted, so a kfp release that words
#: them differently fails loudly here instead of silently keeping a shell in front of Python.
_EXECUTOR_LINE = ("_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main",
                  "exec env _KFP_RUNTIME=true python3 -m kfp.dsl.executor_main")
_INSTALL_THEN_RUN = ('&& "$0" "$@"', '&& exec "$0" "$@"')


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
    settings = settings or ComponentSettings()
    options = settings.component_options()
    built = {}
    for name, function in functions.FUNCTIONS.items():
        component = dsl.component(function, **options)
        container = component.component_spec.implementation.container
        if settings.containerized:
            # KFP's containerized command looks the function up in a kfp_config.ini that `kfp component build`
            # writes; trainops' functions are in the installed package, which its own executor imports.
            container.command = list(EXECUTOR_COMMAND)
        else:
            container.command = exec_python(container.command)
        built[name] = component
    return Components(**built)


def exec_python(command: list[str]) -> list[str]:
    """KFP's lightweight command with every shell step ``exec``ed, so Python replaces the shells."""
    rewritten = []
    for part in command:
        for original, replacement in (_EXECUTOR_LINE, _INSTALL_THEN_RUN):
            if replacement not in part:  # idempotent: the executor line's original is part of its replacement
                part = part.replace(original, replacement)
        rewritten.append(part)
    text = "\n".join(rewritten)
    if _EXECUTOR_LINE[1] not in text or ("pip install" in text and _INSTALL_THEN_RUN[1] not in text):
        raise RuntimeError("kfp's lightweight component command changed: trainops can no longer make it exec Python "
                           f"(command: {command[:2]}...)")
    return rewritten
