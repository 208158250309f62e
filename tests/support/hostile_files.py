"""Hostile files for the tests of issue 39's class 2 (what a job or another user can write is read as hostile): a
FIFO, a sparse file of 512 MiB, bad JSON, JSON nested past the parser's depth, JSON of the wrong type; and a bounded
wait for a read that must not block."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

#: How long a read that must not block may take before a test calls it a hang.
HANG_SECONDS = 60

#: What each hostile file is refused as, in the words of `trainops.runtime.untrusted`'s errors.
REFUSED = {"fifo": "is a FIFO, not a regular file", "sparse": "is larger than", "bad-json": "not valid JSON",
           "nested": "not valid JSON (nested too deep)", "array": "expected a JSON object, found array"}


def plant(path: str | os.PathLike[str], kind: str) -> None:
    """Put the hostile file ``kind`` (a key of REFUSED) at ``path``, making its directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "wb") as handle:
            handle.truncate(512 * 1024 * 1024)
    else:
        text = {"bad-json": '{"host": "algo-2", ', "nested": "[" * 200_000, "array": "[1, 2]"}[kind]
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)


def finishes(call: Callable[[], Any], seconds: float = HANG_SECONDS) -> Any:
    """``call()``'s result (or its exception, raised here), from a daemon thread waited on for ``seconds``: a read
    that blocks (on a FIFO) fails the test instead of hanging it, and the thread it is stuck in does not keep the
    test process alive."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call did not finish in {seconds} s (blocked on a FIFO?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
