"""Deadlines for in-process tool calls.

One daemon thread per process watches the deadlines of running calls and, when one passes,
raises :class:`ToolDeadlineExceeded` inside the thread running the call (CPython's
``PyThreadState_SetAsyncExc``). That interrupts Python code (loops, long scans) but not a call
blocked inside C (a ``time.sleep``); such calls are caught when they return. Untrusted code
runs in the sandbox instead, whose wall-time limit kills the process.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import time
from dataclasses import dataclass

from maestro.domains.errors import ToolDeadlineExceeded


@dataclass
class _Armed:
    thread_id: int
    deadline: float
    fired: bool = False


class Watchdog:
    """Raises :class:`ToolDeadlineExceeded` in threads whose armed deadline has passed."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._armed: dict[int, _Armed] = {}
        self._heap: list[tuple[float, int]] = []
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake_at = float("inf")

    def arm(self, seconds: float) -> int:
        """Start watching the calling thread; returns a token for :meth:`disarm`."""
        deadline = time.monotonic() + seconds
        with self._lock:
            token = next(self._ids)
            self._armed[token] = _Armed(threading.get_ident(), deadline)
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="maestro-tool-watchdog", daemon=True
                )
                self._thread.start()
            elif deadline < self._wake_at:
                self._lock.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True when the deadline had fired. Idempotent.

        A deadline that fired but whose exception was not yet delivered is withdrawn here, so
        no exception escapes after this returns.
        """
        with self._lock:
            armed = self._armed.pop(token, None)
            if armed is None:
                return True
            if armed.fired:
                _set_async_exc(armed.thread_id, None)
            return armed.fired

    def _run(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                while self._heap and (
                    self._heap[0][0] <= now or self._heap[0][1] not in self._armed
                ):
                    _, token = heapq.heappop(self._heap)
                    armed = self._armed.get(token)
                    if armed is not None and not armed.fired:
                        armed.fired = True
                        _set_async_exc(armed.thread_id, ToolDeadlineExceeded)
                self._wake_at = self._heap[0][0] if self._heap else float("inf")
                timeout = None if not self._heap else max(0.0, self._wake_at - now)
                self._lock.wait(timeout)


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    # Imported here: this module is imported by the sandbox child, which never loads ctypes.
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )


@functools.cache
def default_watchdog() -> Watchdog:
    """The process's watchdog, started on first use."""
    return Watchdog()
