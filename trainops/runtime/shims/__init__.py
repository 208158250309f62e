"""Stand-ins for AWS's distributed-training libraries, served in local and Slurm runs so scripts written for them run
unchanged.

A training script written for SageMaker imports ``smdistributed.dataparallel.torch.torch_smddp`` and calls
``init_process_group(backend="smddp")`` (SMDDP), or ``import torch.sagemaker as tsm; tsm.init();
model = tsm.transform(model)`` and reads ``tsm.state`` (SMP v2). Neither library exists outside AWS's images. In a
local run (``TRAINOPS_LOCAL=1``, set by the local backend and never on SageMaker) or a Slurm one (``TRAINOPS_SHIMS=1``,
set by the slurm backend) the rank wrapper calls :func:`install`, which appends an import finder to ``sys.meta_path``.
Being last, it is only asked after every other finder failed: an installed library always wins, and the stand-in
serves only what is missing.

- :mod:`trainops.runtime.shims.smddp` registers a ``smddp`` process-group backend that is gloo on CPU and NCCL on GPUs;
- :mod:`trainops.runtime.shims.tsm` is ``torch.sagemaker``: ``init()`` is :func:`trainops.runtime.init`,
  ``transform()`` is :func:`trainops.runtime.transform` (SMP v2 parameters on FSDP2 / DTensor), ``state`` says
  ``rank``, ``world_size``, ``local_rank``, ``dp_rank``, ``dp_size``, ``tp_rank``, ``tp_size``.

Opt out with ``TRAINOPS_SHIMS=0``. Importing a stand-in prints one line (rank 0) saying so. Standard library only here;
the stand-ins import torch when a script imports them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Mapping

#: ``__spec__.origin`` of every stand-in module: how :func:`is_real` tells them from the libraries.
ORIGIN = "trainops-shim"

#: Module name -> the trainops module that implements it (None: an empty package on the way down).
MODULES: dict[str, str | None] = {
    "smdistributed": None,
    "smdistributed.dataparallel": None,
    "smdistributed.dataparallel.torch": None,
    "smdistributed.dataparallel.torch.torch_smddp": "trainops.runtime.shims.smddp",
    "torch.sagemaker": "trainops.runtime.shims.tsm",
}

_OFF_VALUES = ("0", "false", "no", "off")
_ON_VALUES = ("1", "true", "yes", "on")


class _ShimLoader(importlib.abc.Loader):
    def __init__(self, implementation: str | None):
        self.implementation = implementation

    def create_module(self, spec):  # noqa: D401 - the default module object is what we want
        return None

    def exec_module(self, module) -> None:
        if self.implementation is None:
            module.__path__ = []  # a package, so that its stand-in children can be imported
            return
        implementation = importlib.import_module(self.implementation)
        # The public names of the implementation, as the library's module would carry them; mutable state (tsm.state)
        # is one shared object, so the copy never goes stale.
        names = getattr(implementation, "__all__", None) or [name for name in vars(implementation)
                                                              if not name.startswith("_")]
        for name in names:
            setattr(module, name, getattr(implementation, name))
        module.__doc__ = implementation.__doc__
        announce = getattr(implementation, "_announce", None)
        if announce is not None:
            announce()


class ShimFinder(importlib.abc.MetaPathFinder):
    """Serves the modules of :data:`MODULES` when no other finder could."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MODULES:
            return None
        implementation = MODULES[fullname]
        return importlib.machinery.ModuleSpec(fullname, _ShimLoader(implementation), origin=ORIGIN,
                                              is_package=implementation is None)


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether stand-ins may be served: a local run (``TRAINOPS_LOCAL=1``) that did not opt out (``TRAINOPS_SHIMS=0``),
    or a run that asks for them (``TRAINOPS_SHIMS=1``: the slurm backend's, unless the spec's environment opts out).
    Never on SageMaker, where neither is set."""
    environ = os.environ if environ is None else environ
    setting = environ.get("TRAINOPS_SHIMS", "").strip().lower()
    if setting in _OFF_VALUES:
        return False
    return environ.get("TRAINOPS_LOCAL") == "1" or setting in _ON_VALUES


def installed() -> bool:
    """Whether the finder is on ``sys.meta_path``."""
    return any(isinstance(finder, ShimFinder) for finder in sys.meta_path)


def install(environ: Mapping[str, str] | None = None) -> bool:
    """Put the finder last on ``sys.meta_path`` when :func:`enabled`; returns whether it is there (idempotent)."""
    if not enabled(environ):
        return False
    if not installed():
        sys.meta_path.append(ShimFinder())
    return True


def uninstall() -> None:
    """Take the finder off ``sys.meta_path`` (stand-ins already imported stay in ``sys.modules``)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, ShimFinder)]


def is_shim(name: str) -> bool:
    """Whether importing ``name`` gives (or gave) a trainops stand-in."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(getattr(module, "__spec__", None), "origin", None) == ORIGIN
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin == ORIGIN


def is_real(name: str) -> bool:
    """Whether the real library module ``name`` is importable here (a stand-in does not count)."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(getattr(module, "__spec__", None), "origin", None) != ORIGIN
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin != ORIGIN


def log_once(key: str, message: str) -> None:
    """Print ``message`` once per process, from rank 0 only (``RANK`` unset counts as rank 0)."""
    seen = _LOGGED
    if key in seen:
        return
    seen.add(key)
    if os.environ.get("RANK", "0") == "0":
        print(f"trainops: {message}", file=sys.stderr, flush=True)


_LOGGED: set[str] = set()
