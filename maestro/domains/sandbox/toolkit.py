"""A Toolkit whose tools run in a sandbox child process, and whose every answer is checked.

The host keeps its own record of each call: the tool, its kind and its arguments are the
host's (validated here against the host's argument model before the child sees the call), and
the child only contributes a status from a fixed set, the answer text and the writes. Writes
are accepted only from a WRITE tool's successful call, only to declared tables, with string
keys, records valid against the host's record models, and at most ``max_writes`` records in
``max_write_bytes``. Anything else kills the child and the call ends ``sandbox``.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from maestro.domains.errors import StoreError, ToolError
from maestro.domains.files import json_nodes
from maestro.domains.runtime import OutcomeStatus, PreparedCall, Toolkit, ToolOutcome, ToolSpec
from maestro.domains.sandbox.limits import SandboxLimits
from maestro.domains.sandbox.process import (
    BEGIN_CAPS,
    ChildFailure,
    Launch,
    SandboxProcess,
    SandboxStartError,
)
from maestro.domains.sandbox.protocol import Caps, ChannelError
from maestro.domains.store import (
    JSONRecord,
    Session,
    State,
    TableSpec,
    canonical_json,
    held_bytes,
)

_MISSING = object()


def describe_caps(limits: SandboxLimits) -> Caps:
    """A describe reply: schemas in the meta, the normalized database in the data."""
    return Caps(meta=4 * 1024 * 1024, text=0, data=limits.max_package_bytes)


def call_caps(limits: SandboxLimits) -> Caps:
    return Caps(meta=64 * 1024, text=limits.max_reply_bytes, data=limits.max_write_bytes)


class _CallReply(BaseModel):
    """The meta of a call's reply: what the child may say about a call, and nothing else."""

    model_config = ConfigDict(extra="forbid", strict=True)

    seq: int
    nonce: str
    status: Literal["ok", "tool_error", "invalid_call", "exception", "timeout"] | None = None
    refused: Annotated[str, StringConstraints(max_length=1000)] | None = None
    failure: Annotated[str, StringConstraints(max_length=1000)] | None = None
    limit: Literal["memory"] | None = None
    need_full: Literal[True] | None = None


class _Refused(Exception):
    """A reply the host does not accept; the child is discarded and the call ends ``sandbox``."""


@dataclass
class _MirrorState:
    """What the current child knows of one host session: its id and the values it has seen."""

    sid: int
    generation: int = -1
    seen: dict[tuple[str, str], Any] = field(default_factory=dict)
    # What the session has accepted from the child so far, against the per-session caps.
    written_bytes: int = 0
    written_nodes: int = 0
    # What the host holds of the session's answers and writes, as Python holds them.
    held_bytes: int = 0


@dataclass
class _Spare:
    """A child starting in a background thread; ``error`` when its start failed."""

    process: SandboxProcess
    thread: threading.Thread
    error: SandboxStartError | None = None


@dataclass(frozen=True)
class Package:
    """What every child of one package must agree on: how it starts, how it describes the
    package (compared exactly on every restart), and the host's tables and initial state."""

    launch: Launch
    description: str  # canonical JSON of the first child's tables and tools
    tables: dict[str, TableSpec]
    state: State


class SandboxToolkit(Toolkit):
    """Same surface as :class:`~maestro.domains.runtime.Toolkit`; calls run in the sandbox.

    ``names``, ``kind``, ``schemas`` and ``validate_arguments`` are answered in the host from
    the host's models; ``call`` ships the call to the child and applies the writes it made to
    the host's session once checked. A crash, limit hit, refused operation or protocol breach in
    the child comes back as a ToolOutcome (status ``"sandbox"``, ``"crash"`` or ``"timeout"``),
    never as an exception, and the child is restarted for the next call. ``close`` stops it.
    """

    def __init__(
        self, specs: Iterable[ToolSpec], package: Package, first: SandboxProcess | None = None
    ) -> None:
        limits = package.launch.limits
        super().__init__(specs, deadline_s=limits.call_timeout_s)
        self.limits = limits
        self.package = package
        self._lock = threading.Lock()
        self._process: SandboxProcess | None = first
        self._generation = 1 if first else 0
        self._mirrors: weakref.WeakKeyDictionary[Session, _MirrorState] = (
            weakref.WeakKeyDictionary()
        )
        self._sids = itertools.count(1)
        self._forgotten: list[int] = []
        self.restarts = 0
        self.recycles = 0
        # The lineage (a session and its forks) the current worker has served, if any.
        self._serving: object | None = None
        self.closed = False
        self._spare: _Spare | None = None
        # Every child this toolkit runs, so that dropping the toolkit stops them too.
        self._children: list[SandboxProcess] = [first] if first else []
        weakref.finalize(self, _stop, self._children)

    # ----- process -----------------------------------------------------------------------------

    def start(self) -> dict[str, str]:
        """Start the child now (the first call would otherwise); returns its layers' status."""
        with self._lock:
            return dict(self._ensure_process(self.limits.startup_timeout_s + 5.0).layers)

    @property
    def layers(self) -> dict[str, str]:
        """Each isolation layer of the running child: "active" or "unavailable: why"."""
        return dict(self._process.layers) if self._process else {}

    def _ensure_process(self, wait_s: float) -> SandboxProcess:
        """The running child; a dead one's successor, waited for at most ``wait_s`` (the
        call's own deadline: a start never holds a call, or the lock, past it)."""
        if self.closed:
            raise ChildFailure("closed", "the sandbox toolkit is closed")
        if self._process is not None and self._process.alive:
            return self._process
        if self._process is not None:
            self._retire(self._process)
            self.restarts += 1
        self._process = None
        self._serving = None
        try:
            self._process = self._started_spare(wait_s)
        except SandboxStartError as exc:
            found = "; ".join(f"{f}:{where}: {msg}" for f, where, msg in exc.problems)
            reason = f"{exc.reason}: {found}" if found else exc.reason
            raise ChildFailure("start", reason) from None
        self._generation += 1
        return self._process

    def _prestart(self) -> None:
        """Start the next child in the background, while the caller does something else.

        A killed child's successor then costs the next call nothing when the call comes later
        than the start takes (in an episode, the LLM's next turn).
        """
        if self.closed or self._spare is not None:
            return
        process = SandboxProcess(self.package.launch)
        self._children.append(process)
        spare = _Spare(process, threading.Thread())
        spare.thread = threading.Thread(
            target=_start_spare, args=(spare, self.package), name="maestro-sandbox", daemon=True
        )
        self._spare = spare
        spare.thread.start()

    def _started_spare(self, wait_s: float) -> SandboxProcess:
        """The child starting in the background (started now if none is), once it is ready;
        ChildFailure "starting" when it is not ready within ``wait_s`` (it keeps starting)."""
        self._prestart()
        spare = self._spare
        assert spare is not None
        spare.thread.join(max(wait_s, 0.0))
        if spare.thread.is_alive():
            raise ChildFailure(
                "starting",
                "the sandbox child is restarting and was not ready within the call's deadline "
                "(the call did not run)",
            )
        self._spare = None
        if spare.error is not None or not spare.process.alive:
            self._retire(spare.process)
            raise spare.error or SandboxStartError("the sandbox child died while starting")
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
        """The running worker's process id (where its layers apply), None when none runs."""
        process = self._process
        return process.worker_pid if process is not None and process.alive else None

    # ----- calls -------------------------------------------------------------------------------

    def call(
        self,
        session: Session,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        deadline_s: float | None = None,
    ) -> ToolOutcome:
        """Run one tool call in the sandbox on a session; never raises, whatever the child does."""
        started = time.perf_counter()
        try:
            prepared = self.prepare(name, arguments, started)
            if isinstance(prepared, ToolOutcome):
                return prepared
            limit = self.call_limit(deadline_s, started)
            # Waiting for another call (or a restart) counts against this call's deadline.
            if not self._lock.acquire(timeout=max(limit, 0.0)):
                content = f"Error: {name}: the sandbox was busy past the call's deadline ({limit:g} s); nothing was changed."
                return ToolOutcome(
                    name, prepared.arguments, content, "timeout", prepared.spec.kind,
                    time.perf_counter() - started,
                )  # fmt: skip
            try:
                content, status = self._run(session, prepared, arguments, limit, started)
            finally:
                self._lock.release()
        except Exception as exc:  # the last net: no input and no child makes the host raise
            with self._lock:
                self._discard_process()
            content = f"Error: {name}: the sandbox could not complete the call ({exc!r})"
            spec = self.specs.get(name)
            kind = spec.kind if spec else None
            recorded = arguments if isinstance(arguments, dict) else {"_raw": arguments}
            return ToolOutcome(
                name, recorded, content[:2000], "sandbox", kind, time.perf_counter() - started
            )
        spec = prepared.spec
        return ToolOutcome(
            name, prepared.arguments, content, status, spec.kind, time.perf_counter() - started
        )

    def _run(
        self,
        session: Session,
        prepared: PreparedCall,
        arguments: dict[str, Any] | str,
        limit: float,
        started: float,
    ) -> tuple[str, OutcomeStatus]:
        """The call's answer and status as the host records them; it ends ``limit`` seconds
        after ``started`` (``time.perf_counter``), waits for the lock and a restart included."""
        name = prepared.spec.name
        try:
            frame, seen = self._exchange(session, name, arguments, started + limit)
        except ChildFailure as exc:
            return self._failure_text(name, limit, exc)
        try:
            return self._accept(session, prepared.spec, frame, seen, limit)
        except (_Refused, ChannelError) as exc:
            self._discard_process()
            reason = exc.reason if isinstance(exc, ChannelError) else str(exc)
            return f"Error: {name}: {reason}; nothing was changed.", "sandbox"

    def _exchange(
        self, session: Session, name: str, arguments: dict[str, Any] | str, deadline: float
    ) -> tuple[Any, dict[tuple[str, str], Any]]:
        """Send the call with the session writes the child has not seen; returns its reply."""
        for _ in range(2):
            process = self._ensure_process(deadline - time.perf_counter())
            self._serve_lineage(process, session.lineage, deadline)
            # What is left of the call's deadline once a restart was waited for.
            limit = max(deadline - time.perf_counter(), 0.05)
            mirror = self._mirror(session)
            full = mirror.generation != self._generation
            sync, now_seen = _delta(session, {} if full else mirror.seen)
            forgotten = list(self._forgotten)
            self._forgotten.clear()
            meta = {
                "op": "call",
                "sid": mirror.sid,
                "full": full,
                "forget": forgotten,
                "closed": session.closed,
                "name": name,
                "arguments": arguments,
                "deadline_s": limit,
            }
            try:
                frame = process.exchange(
                    meta,
                    sync,
                    timeout_s=limit + self.limits.kill_grace_s,
                    caps=call_caps(self.limits),
                )
            except ChildFailure:
                self._discard_process()
                raise
            if frame.meta.get("need_full") is True:
                mirror.generation = -1
                continue
            mirror.generation, mirror.seen = self._generation, now_seen
            return frame, mirror.seen
        raise ChildFailure("protocol", "the sandbox child lost the session twice")

    def _serve_lineage(self, process: SandboxProcess, lineage: object, deadline: float) -> None:
        """A worker serves one lineage of sessions (an episode and its forks): a call of
        another one first gets a fresh worker, so module state one episode left (a list a
        tool appended to) never reaches the next. Bounded by the call's deadline."""
        if self._serving is not None and self._serving is not lineage:
            wait_s = max(deadline - time.perf_counter(), 0.0) + self.limits.kill_grace_s
            try:
                boot(process, self.package, recycle=True, timeout_s=wait_s)
            except SandboxStartError as exc:
                self._discard_process()
                raise ChildFailure("start", exc.reason) from None
            self.recycles += 1
            self._generation += 1
        self._serving = lineage

    def _accept(
        self,
        session: Session,
        spec: ToolSpec,
        frame: Any,
        seen: dict[tuple[str, str], Any],
        limit: float,
    ) -> tuple[str, OutcomeStatus]:
        try:
            reply = _CallReply.model_validate(frame.meta)
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise _Refused(f"the sandbox child sent an invalid reply ({problem['msg']})") from None
        name = spec.name
        if reply.refused is not None:
            raise _Refused(reply.refused)
        if reply.failure is not None:
            raise _Refused(f"the call ended the sandbox's tool runner ({reply.failure})")
        if reply.limit == "memory":
            mib = self.limits.memory_mb
            return (
                f"Error: {name} ran out of memory (the sandbox allows {mib} MiB); nothing was changed.",
                "sandbox",
            )
        if reply.status is None:
            raise _Refused("the sandbox child sent a reply without a status")
        writes = frame.decoded_data(self.limits.max_write_nodes)
        if reply.status != "ok" and writes:
            raise _Refused(f"a call that ended {reply.status!r} cannot write")
        if reply.status == "timeout":
            return (
                f"Error: {name} did not finish within {limit:g} s; nothing was changed.",
                "timeout",
            )
        if writes and spec.kind != "write":
            raise _Refused("a READ tool's call wrote records; the sandbox refused them")
        self._hold(session, frame.text, writes)
        if writes:
            self._count_writes(session, frame.data)
            self._apply_writes(session, writes, seen)
        return frame.text, reply.status

    def _hold(self, session: Session, text: str, writes: Any) -> None:
        """Charge what the host will hold of a call (its answer, its writes, as Python holds
        them) to the call, its session and every live session of this domain; a cap reached
        refuses the call. The wire's caps bound bytes sent, not what the decoded text holds
        (an emoji makes CPython store every character of the text in 4 bytes)."""
        limits = self.limits
        text_bytes = held_bytes(text)
        if text_bytes > limits.max_reply_bytes:
            raise _Refused(
                f"its answer of {len(text):,} characters holds {text_bytes:,} bytes in the host;"
                f" the sandbox allows {limits.max_reply_bytes:,} a call"
            )
        call = text_bytes + (held_bytes(writes) if writes else 0)
        mirror = self._mirror(session)
        if mirror.held_bytes + call > limits.max_session_held_bytes:
            raise _Refused(
                f"the session's answers and writes would hold {mirror.held_bytes + call:,} bytes"
                f" in the host; the sandbox allows {limits.max_session_held_bytes:,} a session"
            )
        total = sum(m.held_bytes for m in self._mirrors.values()) + call
        if total > limits.max_held_bytes:
            raise _Refused(
                f"this domain's live sessions would hold {total:,} bytes in the host; the sandbox"
                f" allows {limits.max_held_bytes:,} in all (end some sessions)"
            )
        mirror.held_bytes += call

    def _count_writes(self, session: Session, data: bytes) -> None:
        """Charge a call's writes to its session: what the host holds for a session grows only
        by what the caps allow (a call's own caps bound one call, not a session of them)."""
        mirror = self._mirror(session)
        size, nodes = mirror.written_bytes + len(data), mirror.written_nodes + json_nodes(data)
        limits = self.limits
        if size > limits.max_session_write_bytes or nodes > limits.max_session_write_nodes:
            raise _Refused(
                f"the session's writes would reach {size} bytes and {nodes} JSON values; the "
                f"sandbox allows {limits.max_session_write_bytes} and "
                f"{limits.max_session_write_nodes} per session"
            )
        mirror.written_bytes, mirror.written_nodes = size, nodes

    def _apply_writes(
        self, session: Session, writes: Any, seen: dict[tuple[str, str], Any]
    ) -> None:
        """Check every write, then apply them all through the session's validating API (or
        none); the child's mirror has seen a value only when the host stored exactly it."""
        checked = _checked_writes(writes, self.package.tables, self.limits)
        try:
            with session.transaction():
                for table, key, record in checked:
                    if record is None and session.exists(table, key):
                        session.delete(table, key)
                    elif record is None:
                        # Added and deleted within the call: the address stays touched, as in
                        # process (same touched set, same hash).
                        session.override(table, key, None)
                    else:
                        written = session.put(table, record)
                        key_field = self.package.tables[table].key_field
                        if written.get(key_field) != key:
                            raise StoreError(f"the record written to {table}/{key} has another key")
        except (StoreError, ToolError) as exc:
            raise _Refused(f"the sandbox refused the call's writes: {str(exc)[:500]}") from None
        wrote = {(t, k): record for t, k, record in checked}
        for table, key, stored in session.overlay_entries():
            if (table, key) in wrote and stored == wrote[(table, key)]:
                seen[(table, key)] = stored

    def _mirror(self, session: Session) -> _MirrorState:
        state = self._mirrors.get(session)
        if state is None:
            state = _MirrorState(next(self._sids))
            self._mirrors[session] = state
            weakref.finalize(session, self._forgotten.append, state.sid)
        return state

    def _discard_process(self) -> None:
        """Kill the child after a failure or a refusal, and start its successor now."""
        if self._process is not None:
            self._process.kill()
        self._prestart()

    def _failure_text(
        self, name: str, limit: float, exc: ChildFailure
    ) -> tuple[str, OutcomeStatus]:
        if exc.kind == "timeout":
            text = f"Error: {name} did not finish within {limit:g} s; nothing was changed."
            return text, "timeout"
        status: OutcomeStatus = "crash" if exc.kind == "crash" else "sandbox"
        return f"Error: {name}: {exc.reason}; nothing was changed.", status


# ----- starting a child --------------------------------------------------------------------------


def boot(
    process: SandboxProcess,
    package: Package,
    *,
    recycle: bool = False,
    timeout_s: float | None = None,
) -> None:
    """Start a child of a known package (``recycle``: a fresh worker in a running child):
    it must describe the package exactly as the first child did, and see the host's database
    (same state hash). ``timeout_s`` bounds each step (the start's own limit by default)."""
    limits = package.launch.limits
    step_s = limits.startup_timeout_s if timeout_s is None else timeout_s
    try:
        if recycle:
            process.recycle(step_s)
        else:
            process.start()
        described = process.exchange(
            {"op": "describe"}, None, timeout_s=step_s, caps=describe_caps(limits)
        )
        if description_key(described.meta) != package.description:
            raise SandboxStartError("the sandbox child describes the package differently now")
        ready = process.exchange(
            {"op": "begin"},
            package.state.tables_view(),
            timeout_s=step_s,
            caps=BEGIN_CAPS,
        )
    except ChildFailure as exc:
        process.kill()
        raise SandboxStartError(f"the sandbox child did not start: {exc.reason}") from None
    except SandboxStartError:
        process.kill()
        raise
    if ready.meta.get("state_hash") != package.state.state_hash():
        process.kill()
        raise SandboxStartError("the sandbox child sees another database than the host")


def description_key(meta: dict[str, Any]) -> str:
    """What a describe reply says of the package, in one canonical spelling."""
    return canonical_json({"tables": meta.get("tables"), "tools": meta.get("tools")})


def _start_spare(spare: _Spare, package: Package) -> None:
    try:
        boot(spare.process, package)
    except SandboxStartError as exc:
        spare.error = exc
    except Exception as exc:  # the thread must not die silently: the next call reports it
        spare.error = SandboxStartError(f"the sandbox child did not start: {exc!r}")


# ----- writes ------------------------------------------------------------------------------------


def _checked_writes(
    writes: Any, tables: dict[str, TableSpec], limits: SandboxLimits
) -> list[tuple[str, str, JSONRecord | None]]:
    """The writes as (table, key, record or None), each of the right shape, or _Refused."""
    if not isinstance(writes, list):
        raise _Refused("the call's writes are not a list")
    if len(writes) > limits.max_writes:
        raise _Refused(
            f"the call wrote {len(writes)} records; the sandbox allows {limits.max_writes} per call"
        )
    out = []
    for write in writes:
        if not (isinstance(write, list) and len(write) == 3):
            raise _Refused("a write is not [table, key, record]")
        table, key, record = write
        if not isinstance(table, str) or table not in tables:
            raise _Refused(f"a write to {str(table)[:100]!r}, which models.py does not declare")
        if not isinstance(key, str) or not key or len(key) > 1000:
            raise _Refused(f"a write to {table} with a key that is not a non-empty string")
        if record is not None and not isinstance(record, dict):
            raise _Refused(f"a write to {table}/{key} that is not a record")
        out.append((table, key, record))
    return out


def _delta(
    session: Session, seen: dict[tuple[str, str], Any]
) -> tuple[list[list[Any]], dict[tuple[str, str], Any]]:
    """The writes of ``session`` that ``seen`` lacks, and what is seen once they are sent."""
    sync: list[list[Any]] = []
    now: dict[tuple[str, str], Any] = {}
    for table, key, value in session.overlay_entries():
        now[(table, key)] = value
        if seen.get((table, key), _MISSING) is not value:
            sync.append([table, key, "delete" if value is None else "put", value])
    for table, key in seen.keys() - now.keys():
        sync.append([table, key, "revert", None])
    return sync, now


def _stop(children: list[SandboxProcess]) -> None:
    for child in list(children):
        child.kill()
    children.clear()
