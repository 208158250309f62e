"""The runtime's error base, stdlib only.

The runtime is uploaded to the training container on its own (``trainops/__init__.py`` and ``trainops/runtime/**``),
so it cannot import anything else of trainops. `trainops.errors` re-exports this class as its own base, so every
error the runtime raises is still a `trainops.errors.TrainopsError` for the CLI and the backends.
"""

from __future__ import annotations


class TrainopsError(Exception):
    """Base class of every error trainops raises on purpose (exit_code: 1 a failure while running, 2 bad input)."""

    exit_code = 1
