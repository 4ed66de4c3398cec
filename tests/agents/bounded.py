"""Calls a test must not wait on for ever (the grammar converter's loop cannot be interrupted)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """What ``call`` returns or raises, failing the test when it takes over ``seconds`` (it
    goes on in a daemon thread: the converter's loop cannot be interrupted)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s"
    return outcome[0]
