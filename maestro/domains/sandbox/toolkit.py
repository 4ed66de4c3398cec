"""A Toolkit whose tools run in a sandbox child process instead of the host."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from maestro.domains.errors import StoreError, ToolError
from maestro.domains.runtime import OutcomeStatus, Toolkit, ToolOutcome, ToolSpec
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.process import ChildFailure, SandboxProcess, SandboxStartError
from maestro.domains.store import _DELETED, Session


@dataclass
class _MirrorState:
    """What the current child knows of one host session: its id and the values it has seen."""

    sid: int
    generation: int = -1
    seen: dict[tuple[str, str], Any] = field(default_factory=dict)


@dataclass
class _Spare:
    """A child starting in a background thread; ``error`` when its start failed."""

    process: SandboxProcess
    thread: threading.Thread
    error: SandboxStartError | None = None

    def run(self) -> None:
        try:
            self.process.start()
        except SandboxStartError as exc:
            self.error = exc
        except Exception as exc:  # the thread must not die silently: the next call reports it
            self.error = SandboxStartError(f"the sandbox child did not start: {exc!r}")


class _ChildOutcome(BaseModel):
    """The outcome fields a child may send; anything else is a protocol violation."""

    model_config = ConfigDict(extra="ignore")

    arguments: dict[str, Any]
    content: str
    status: OutcomeStatus


class SandboxToolkit(Toolkit):
    """Same surface as :class:`~maestro.domains.runtime.Toolkit`; calls run in the sandbox.

    ``names``, ``kind``, ``schemas`` and ``validate_arguments`` are answered in the host from
    specs built without importing tools.py; ``call`` ships the call to the child and applies the
    writes it made to the host's session. A crash, limit hit or refused operation in the child
    comes back as a ToolOutcome (status ``"sandbox"``, ``"crash"`` or ``"timeout"``), never as an
    exception, and the child is restarted for the next call. ``close`` stops the child.
    """

    def __init__(
        self, specs: Iterable[ToolSpec], init: dict[str, Any], limits: SandboxLimits
    ) -> None:
        super().__init__(specs, deadline_s=limits.call_timeout_s)
        self.limits = limits
        self._init = init
        self._lock = threading.Lock()
        self._process: SandboxProcess | None = None
        self._generation = 0
        self._mirrors: weakref.WeakKeyDictionary[Session, _MirrorState] = (
            weakref.WeakKeyDictionary()
        )
        self._sids = itertools.count(1)
        self._forgotten: list[int] = []
        self.restarts = 0
        self.closed = False
        self._spare: _Spare | None = None
        # Every child this toolkit runs, so that dropping the toolkit stops them too.
        self._children: list[SandboxProcess] = []
        weakref.finalize(self, _stop, self._children)

    # ----- process -----------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Start the child now (the first call would otherwise); returns its ready message."""
        with self._lock:
            return self._ensure_process().ready

    def _ensure_process(self) -> SandboxProcess:
        if self.closed:
            raise ChildFailure("closed", "the sandbox toolkit is closed")
        if self._process is not None and self._process.alive:
            return self._process
        if self._process is not None:
            self._retire(self._process)
            self.restarts += 1
        self._process = None
        self._generation += 1
        try:
            self._process = self._started_spare() or self._start_now()
        except SandboxStartError as exc:
            found = "; ".join(f"{f}:{where}: {msg}" for f, where, msg in exc.problems)
            reason = f"{exc.reason}: {found}" if found else exc.reason
            raise ChildFailure("start", reason) from None
        return self._process

    def _start_now(self) -> SandboxProcess:
        process = SandboxProcess(self.limits, self._init)
        self._children.append(process)
        try:
            process.start()
        except SandboxStartError:
            self._retire(process)
            raise
        return process

    def _prestart(self) -> None:
        """Start the next child in the background, while the caller does something else.

        A killed child's successor then costs the next call nothing when the call comes later
        than the start takes (in an episode, the LLM's next turn).
        """
        if self.closed or self._spare is not None:
            return
        process = SandboxProcess(self.limits, self._init)
        self._children.append(process)
        spare = _Spare(process, threading.Thread())
        spare.thread = threading.Thread(target=spare.run, name="maestro-sandbox-start", daemon=True)
        self._spare = spare
        spare.thread.start()

    def _started_spare(self) -> SandboxProcess | None:
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        spare.thread.join(self.limits.startup_timeout_s + 5.0)
        if spare.error is not None or not spare.process.alive:
            self._retire(spare.process)
            if spare.error is not None:
                raise spare.error
            return None
        return spare.process

    def _retire(self, process: SandboxProcess) -> None:
        process.kill()
        if process in self._children:
            self._children.remove(process)

    def close(self) -> None:
        """Stop the child; later calls answer with a sandbox error. Idempotent."""
        with self._lock:
            self.closed = True
            self._process = None
            spare, self._spare = self._spare, None
            if spare is not None:  # let its start fail on its own before the pipes close
                spare.process.interrupt()
                spare.thread.join(5.0)
            _stop(self._children)

    @property
    def child_pid(self) -> int | None:
        """The running child's process id, None when none runs."""
        return self._process.pid if self._process and self._process.alive else None

    # ----- calls -------------------------------------------------------------------------------

    def call(
        self,
        session: Session,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        deadline_s: float | None = None,
    ) -> ToolOutcome:
        """Run one tool call in the sandbox on a session; never raises for the child's doing."""
        started = time.perf_counter()
        limit = self.deadline_s if deadline_s is None else deadline_s
        spec = self.specs.get(name)

        def outcome(content: str, status: OutcomeStatus, args: Any) -> ToolOutcome:
            args = _as_arguments(args)
            kind = spec.kind if spec else None
            return ToolOutcome(name, args, content, status, kind, time.perf_counter() - started)

        with self._lock:
            try:
                reply = self._exchange(session, name, arguments, limit)
            except ChildFailure as exc:
                return outcome(*self._failure_text(name, limit, exc), arguments)
            if "violation" in reply or "failure" in reply:
                self._discard_process()
                reason = reply.get("violation") or reply.get("failure")
                return outcome(
                    f"Error: {name}: {reason}; nothing was changed.", "sandbox", arguments
                )
            try:
                got = _ChildOutcome.model_validate(reply.get("outcome"))
                self._apply_writes(session, reply.get("writes"))
            except (ValidationError, StoreError, ToolError, TypeError, ValueError, KeyError) as exc:
                self._discard_process()
                text = f"Error: {name}: the sandbox child sent an invalid reply ({exc}); nothing was changed."
                return outcome(text[:2000], "sandbox", arguments)
        return outcome(got.content, got.status, got.arguments)

    def _exchange(
        self, session: Session, name: str, arguments: dict[str, Any] | str, limit: float
    ) -> dict[str, Any]:
        """Send the call with the session writes the child has not seen; returns its reply."""
        for _ in range(2):
            process = self._ensure_process()
            mirror = self._mirror(session)
            full = mirror.generation != self._generation
            seen = {} if full else mirror.seen
            sync, now_seen = _delta(session, seen)
            forgotten = list(self._forgotten)
            self._forgotten.clear()
            request = {
                "op": "call",
                "sid": mirror.sid,
                "full": full,
                "sync": sync,
                "forget": forgotten,
                "closed": session.closed,
                "name": name,
                "arguments": arguments,
                "deadline_s": limit,
            }
            try:
                reply = process.request(request, limit + self.limits.kill_grace_s)
            except ChildFailure:
                self._discard_process()
                raise
            if reply.get("need_full"):
                mirror.generation = -1
                continue
            mirror.generation, mirror.seen = self._generation, now_seen
            return reply
        raise ChildFailure("protocol", "the sandbox child lost the session twice")

    def _mirror(self, session: Session) -> _MirrorState:
        state = self._mirrors.get(session)
        if state is None:
            state = _MirrorState(next(self._sids))
            self._mirrors[session] = state
            weakref.finalize(session, self._forgotten.append, state.sid)
        return state

    def _apply_writes(self, session: Session, writes: Any) -> None:
        """Apply the child's writes through the session's validating API, all or nothing."""
        if not isinstance(writes, list):
            raise TypeError("writes must be a list")
        mirror = self._mirrors[session]
        with session.transaction():
            for table, key, record in writes:
                if record is None and session.exists(table, key):
                    session.delete(table, key)
                elif record is None:
                    # Added and deleted within the call: the overlay keeps a deletion marker,
                    # as it does in process (same touched set, same hash).
                    session._spec(table)
                    session._write(table, key, _DELETED)
                else:
                    written = session.put(table, record)
                    if written.get(session.base.specs[table].key_field) != key:
                        raise StoreError(f"write to {table}/{key} carries another key")
        overlay = _overlay(session)
        for table, key, _ in writes:
            mirror.seen[(table, key)] = overlay[table][key]

    def _discard_process(self) -> None:
        """Kill the child after a failure or a refusal, and start its successor now."""
        if self._process is not None:
            self._process.kill()
        self._prestart()

    def _failure_text(
        self, name: str, limit: float, exc: ChildFailure
    ) -> tuple[str, OutcomeStatus]:
        if exc.kind == "timeout":
            return (
                f"Error: {name} did not finish within {limit:g} s; nothing was changed.",
                "timeout",
            )
        if exc.kind == "crash":
            return f"Error: {name}: {exc.reason}; nothing was changed.", "crash"
        return f"Error: {name}: {exc.reason}; nothing was changed.", "sandbox"


def _as_arguments(arguments: Any) -> dict[str, Any]:
    """The call's arguments as the in-process runtime records them when it cannot validate."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments) if arguments else {}
    return arguments if isinstance(arguments, dict) else {"_raw": arguments}


def _overlay(session: Session) -> dict[str, dict[str, Any]]:
    # Syncing a mirror needs the session's overlay itself: reading it through the public API
    # would copy every record on every call.
    return session._overlay


def _delta(
    session: Session, seen: dict[tuple[str, str], Any]
) -> tuple[list[list[Any]], dict[tuple[str, str], Any]]:
    """The writes of ``session`` that ``seen`` lacks, and what is seen once they are sent."""
    sync: list[list[Any]] = []
    now: dict[tuple[str, str], Any] = {}
    for table, layer in _overlay(session).items():
        for key, value in layer.items():
            now[(table, key)] = value
            if seen.get((table, key)) is not value:
                if value is _DELETED:
                    sync.append([table, key, "delete", None])
                else:
                    sync.append([table, key, "put", value])
    for table, key in seen.keys() - now.keys():
        sync.append([table, key, "revert", None])
    return sync, now


def _stop(children: list[SandboxProcess]) -> None:
    for child in list(children):
        child.kill()
    children.clear()
