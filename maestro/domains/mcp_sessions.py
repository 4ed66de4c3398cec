"""The MCP server's environment sessions: who owns each, how long it lives, how many there are.

A session belongs to exactly one owner, and a request reaches only sessions its owner holds:

- a **transport session** (the handshake protocol's ``Mcp-Session-Id``, an unguessable id the
  SDK hands out and checks): its default session, and any names it gives in
  ``_meta["maestro/session"]``, which are scoped to it: another client naming the same thing
  gets its own session, never this one's state;
- a **token** the server hands out (``maestro_open_session``), 192 random bits: the only way to
  hold state on the 2026-07-28 protocol, whose requests carry no session; whoever sends the
  token holds the session, a name the server never handed out is an error;
- stdio: the one client of the process.

Sessions are bounded: at most ``max_sessions`` live at once (a new one past the cap is an error,
a live one is never dropped to make room) and one idle for ``idle_timeout_s`` ends. A request for
a session that ended (idle, closed) is answered with an error saying so, never with a fresh
database in its place. A session created on first use (a connection's names, stdio's) is the
one that could silently come back fresh, so its ending is remembered as long as its connection
can still send requests: per connection, not in one list another client could flush (4,100
sessions opened and closed by a stranger once pushed a victim's ending out). A connection may
use at most ``max_names`` names in its life; past that a new name is an error. A token that
ended is remembered among the last ``tombstones`` endings; one forgotten is still an error
(the server never hands out a token twice), only a less specific one.

Bounded in bytes too: a session may hold at most ``max_session_bytes`` of changes (as JSON) and
all sessions together ``max_held_bytes``; a call that would pass either has its writes undone
and fails (60 writes of 0.9 MB once grew the server by 61 MB, with 256 sessions allowed).

And the answers not yet read by their clients hold at most ``max_unread_bytes`` in all,
counted from the call until the client has read the answer (:func:`reply_bytes`: the text and
its JSON as the SDK encodes it): 16 clients calling a tool that answers 4 M emoji and never
reading grew the server by 772 MB. A call whose answer does not fit has its writes undone and
fails. A session that ends (closed, idle, its connection deleted) keeps its changes counted, and
its state, until its last answer is read: ending it no longer frees room while its answers
still sit in the server.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from maestro.domains.package import Domain
from maestro.domains.store import Session, canonical_json

TOKEN_PREFIX = "mst_"


class SessionError(Exception):
    """A request names a session it cannot use: unknown, ended, or over the cap."""


@dataclass(frozen=True)
class Owner:
    """Whose session a key is, for the messages: a transport session, a token or stdio."""

    key: str
    implicit: bool  # created on first use (transport sessions, stdio); tokens never are
    shown: str
    scope: str | None = None  # the connection an implicit owner's names belong to
    name: str = ""


def transport_owner(session_id: str, name: str = "") -> Owner:
    label = f"session {name!r} of this connection" if name else "this connection's session"
    return Owner(f"mcp:{session_id}:{name}", True, label, f"mcp:{session_id}", name)


def stdio_owner(name: str = "") -> Owner:
    shown = f"session {name!r}" if name else "the session"
    return Owner(f"stdio:{name}", True, shown, "stdio", name)


def token_owner(token: str) -> Owner:
    return Owner(f"token:{token}", False, f"session {token[:8]}...")


@dataclass
class EnvSession:
    """One client's environment: its copy-on-write session and the task it started from."""

    session: Session
    task_id: str | None
    last_used: float
    owner: Owner
    calls: int = 0
    # Tool calls of one client may arrive concurrently; the runtime's transaction is per call,
    # so calls on the same session run one at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Bytes of the session's changes (their JSON), and each changed address's record and size.
    held_bytes: int = 0
    sizes: dict[tuple[str, str], tuple[Any, int]] = field(default_factory=dict)
    #: Bytes of its answers that their clients have not read yet (:func:`reply_bytes`).
    replies: int = 0


@dataclass
class _Scope:
    """A connection's names (by hash: at most ``max_names`` ints), which of them ended and
    why, and its requests in flight."""

    names: set[int] = field(default_factory=set)
    ended: dict[int, str] = field(default_factory=dict)
    last_seen: float = 0.0
    in_flight: int = 0


@dataclass(frozen=True)
class Writes:
    """What one call changed in its session, measured (``SessionRegistry.measure``)."""

    changed: list[tuple[str, str, Any, Any]]  # table, key, record before, record after
    delta: int
    sizes: dict[tuple[str, str], int]

    def undo(self, session: Session) -> None:
        """Put every address the call changed back as it was before the call."""
        for table, key, prior, _ in self.changed:
            if prior is _ABSENT:
                session.forget(table, key)
            else:
                session.override(table, key, prior)


def is_token(name: str) -> bool:
    return name.startswith(TOKEN_PREFIX)


#: What an answer's envelope (JSON-RPC, content list, meta) and its objects add, at most.
_REPLY_ENVELOPE = 4096


def reply_bytes(text: str) -> int:
    """What the server holds for an answer until its client has read it: the text as CPython
    holds it (4 bytes a character once one is an emoji), and its JSON twice, as the SDK builds
    the body (a str, then its bytes). The JSON is counted as the 2026 revision writes it,
    ASCII-escaped (12 bytes an emoji), never less than the handshake revision's UTF-8."""
    return sys.getsizeof(text) + 2 * _json_chars(text) + _REPLY_ENVELOPE


def _json_chars(text: str) -> int:
    if len(text) <= 4096:  # the bound: no character takes more than 12 escaped
        return 12 * len(text) + 2
    # Exact, a slice at a time: escaped whole, 4 M emoji would cost 48 MB more to count.
    step = 64 * 1024
    return 2 + sum(
        len(encode_basestring_ascii(text[i : i + step])) - 2 for i in range(0, len(text), step)
    )


class SessionRegistry:
    """The environment sessions of one server."""

    def __init__(
        self,
        domain: Domain,
        *,
        task_id: str | None,
        max_sessions: int,
        idle_timeout_s: float,
        tombstones: int = 4096,
        max_names: int = 1024,
        max_session_bytes: int = 4 * 1024 * 1024,
        max_held_bytes: int = 256 * 1024 * 1024,
        max_unread_bytes: int = 256 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if task_id is not None:
            domain.task(task_id)  # KeyError naming the task when unknown
        self.domain = domain
        self.task_id = task_id
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._live: OrderedDict[str, EnvSession] = OrderedDict()  # least recently used first
        self._ended: OrderedDict[str, str] = OrderedDict()  # token key -> why it ended
        self._max_ended = tombstones
        self._scopes: dict[str, _Scope] = {}
        self._max_names = max_names
        self.max_session_bytes = max_session_bytes
        self.max_held_bytes = max_held_bytes
        self.max_unread_bytes = max_unread_bytes
        self._held = 0  # changes of the live sessions, and of the ended ones still draining
        self._unread = 0  # answers charged and not yet read
        # Sessions that ended with answers still unread, by id: counted (and their state kept)
        # until the last is read.
        self._draining: dict[int, EnvSession] = {}
        self._pruned_at = 0.0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._live)

    def open_token(self, task_id: str | None) -> str:
        """A new token-held session at a task's start; the token is its only handle."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(24)
        with self._lock:
            self._expire()
            self._start(token_owner(token), task_id)
        return token

    def get(self, owner: Owner) -> EnvSession:
        """The owner's live session; created on first use for implicit owners."""
        with self._lock:
            self._expire()
            env = self._live.get(owner.key)
            if env is not None:
                env.last_used = self._clock()
                self._live.move_to_end(owner.key)
                return env
            self._raise_if_ended(owner)
            if not owner.implicit:
                raise SessionError(
                    f"unknown {owner.shown}: this server never handed it out, or it ended "
                    "long ago; call maestro_open_session and send the token it returns"
                )
            return self._start(owner, self.task_id)

    def reset(self, owner: Owner, task_id: str | None) -> EnvSession:
        """Put the owner's session at a task's start (KeyError for an unknown task). A token's
        session must be live: a reset does not bring an ended or unknown token back."""
        with self._lock:
            self._expire()
            if not owner.implicit and owner.key not in self._live:
                self._raise_if_ended(owner)
                raise SessionError(f"unknown {owner.shown}")
            self._forget_ending(owner)
            return self._start(owner, task_id)

    def close(self, owner: Owner) -> bool:
        """End the owner's session now; False when it had none."""
        with self._lock:
            env = self._live.get(owner.key)
            if env is not None:
                self._end(env, "was closed")
            return env is not None

    def close_transport(self, session_id: str) -> int:
        """End every session of a transport session (it was deleted); how many there were."""
        scope = f"mcp:{session_id}"
        with self._lock:
            ended = [env for env in self._live.values() if env.owner.scope == scope]
            for env in ended:
                self._end(env, "ended with its connection")
            # The SDK answers 404 to this id from now on: nothing can name its sessions again.
            self._scopes.pop(scope, None)
        return len(ended)

    def hold(self, session_id: str) -> None:
        """A request of a transport session started (its connection is in use)."""
        with self._lock:
            scope = self._scopes.get(f"mcp:{session_id}")
            if scope is not None:
                scope.in_flight += 1
                scope.last_seen = self._clock()

    def release(self, session_id: str) -> None:
        """A request of a transport session ended."""
        with self._lock:
            scope = self._scopes.get(f"mcp:{session_id}")
            if scope is not None:
                scope.in_flight = max(0, scope.in_flight - 1)
                scope.last_seen = self._clock()

    # ----- bytes held ---------------------------------------------------------------------------

    def measure(self, env: EnvSession, before: dict[tuple[str, str], Any]) -> Writes:
        """What the last call changed in ``env`` (``before``: its overlay's records before the
        call, by address), and how many bytes that adds. Call with ``env.lock`` held."""
        changed = []
        sizes: dict[tuple[str, str], int] = {}
        delta = 0
        for table, key, record in env.session.overlay_entries():
            address = (table, key)
            if address in before and before[address] is record:
                continue
            size = len(table) + len(key) + (0 if record is None else len(canonical_json(record)))
            sizes[address] = size
            delta += size - env.sizes.get(address, (None, 0))[1]
            changed.append((table, key, before.get(address, _ABSENT), record))
        return Writes(changed, delta, sizes)

    def charge(self, env: EnvSession, writes: Writes, reply: int = 0) -> str | None:
        """Account the call's writes, and its answer of ``reply`` bytes (:func:`reply_bytes`)
        until :meth:`reply_read`, to ``env``; or, past a cap, why not (the caller undoes the
        writes). Call with ``env.lock`` held."""
        with self._lock:
            if env.held_bytes + writes.delta > self.max_session_bytes:
                return (
                    f"this session would hold more than {_size(self.max_session_bytes)} of "
                    "changes; the call's writes were undone (maestro_reset_session starts afresh)"
                )
            if writes.delta > 0 and self._held + writes.delta > self.max_held_bytes:
                return (
                    f"the server's sessions would hold more than {_size(self.max_held_bytes)} of "
                    "changes; the call's writes were undone (try again later)"
                )
            if reply and self._unread + reply > self.max_unread_bytes:
                return (
                    f"the answer would hold {reply:,} bytes in the server until its client reads "
                    f"it, and the answers not yet read would hold more than "
                    f"{_size(self.max_unread_bytes)}; the call's writes were undone (try again "
                    "later, or ask for less)"
                )
            counted = self._counted(env)
            env.held_bytes += writes.delta
            env.replies += reply
            self._unread += reply
            if counted:
                self._held += writes.delta
            elif reply:  # it ended during the call: it lives on until its answer is read
                self._held += env.held_bytes
                self._draining[id(env)] = env
            for table, key, _, record in writes.changed:
                env.sizes[(table, key)] = (record, writes.sizes[(table, key)])
        return None

    def reply_read(self, env: EnvSession, reply: int) -> None:
        """An answer charged to ``env`` has been read by its client (or will never be): its
        bytes leave the budget, and so does an ended session with no answer left."""
        with self._lock:
            env.replies -= reply
            self._unread -= reply
            if env.replies <= 0 and self._draining.pop(id(env), None) is not None:
                self._held -= env.held_bytes

    @property
    def held(self) -> tuple[int, int]:
        """Bytes the sessions' changes hold now (the ended ones' still draining included), and
        the answers not yet read."""
        return self._held, self._unread

    # ----- inside the lock ----------------------------------------------------------------------

    def _start(self, owner: Owner, task_id: str | None) -> EnvSession:
        old = self._live.get(owner.key)
        if old is None and len(self._live) >= self.max_sessions:
            raise SessionError(
                f"the server holds its maximum of {self.max_sessions} sessions; close one "
                f"(maestro_close_session) or wait for an idle one to end ({self.idle_timeout_s:g} s)"
            )
        scope = self._scope(owner)
        if scope is not None and hash(owner.name) not in scope.names:
            if len(scope.names) >= self._max_names:
                raise SessionError(
                    f"this connection has used its {self._max_names} session names; reuse one "
                    "(maestro_reset_session) or open a new connection"
                )
            scope.names.add(hash(owner.name))
        task = self.domain.task(task_id) if task_id is not None else None
        env = EnvSession(self.domain.start_session(task), task_id, self._clock(), owner)
        if old is not None:
            self._retire(old)
        self._live[owner.key] = env
        self._live.move_to_end(owner.key)
        return env

    def _scope(self, owner: Owner) -> _Scope | None:
        if owner.scope is None:
            return None
        scope = self._scopes.get(owner.scope)
        if scope is None:
            scope = self._scopes[owner.scope] = _Scope()
        scope.last_seen = self._clock()
        return scope

    def _expire(self) -> None:
        now = self._clock()
        while self._live:
            key, env = next(iter(self._live.items()))
            if now - env.last_used < self.idle_timeout_s:
                break
            if env.lock.locked():  # a call is running on it: it is not idle
                env.last_used = now
                self._live.move_to_end(key)
                continue
            self._end(env, f"ended after {self.idle_timeout_s:g} s without a call")
        if now - self._pruned_at >= 1.0:
            self._pruned_at = now
            self._prune_scopes(now)

    def _prune_scopes(self, now: float) -> None:
        """Forget connections the SDK has ended too: no request for twice the idle timeout
        (the SDK ends a transport session idle for once), none in flight, no live session."""
        live = {env.owner.scope for env in self._live.values()}
        for key, scope in list(self._scopes.items()):
            if key == "stdio" or key in live or scope.in_flight:
                continue
            if now - scope.last_seen > 2 * self.idle_timeout_s:
                del self._scopes[key]

    def _counted(self, env: EnvSession) -> bool:
        return self._live.get(env.owner.key) is env or id(env) in self._draining

    def _retire(self, env: EnvSession) -> None:
        """``env`` is no longer its owner's session: its bytes leave the budget, or, with
        answers still unread, once the last is read."""
        if env.replies > 0:
            self._draining[id(env)] = env
        else:
            self._held -= env.held_bytes

    def _end(self, env: EnvSession, why: str) -> None:
        owner = env.owner
        if self._live.get(owner.key) is env:
            del self._live[owner.key]
            self._retire(env)
        scope = self._scopes.get(owner.scope) if owner.scope else None
        if scope is not None:
            scope.ended[hash(owner.name)] = why
            return
        self._ended[owner.key] = why
        self._ended.move_to_end(owner.key)
        while len(self._ended) > self._max_ended:
            self._ended.popitem(last=False)

    def _forget_ending(self, owner: Owner) -> None:
        scope = self._scopes.get(owner.scope) if owner.scope else None
        if scope is not None:
            scope.ended.pop(hash(owner.name), None)
        self._ended.pop(owner.key, None)

    def _raise_if_ended(self, owner: Owner) -> None:
        scope = self._scopes.get(owner.scope) if owner.scope else None
        why = scope.ended.get(hash(owner.name)) if scope is not None else None
        why = why or self._ended.get(owner.key)
        if why is not None:
            fix = (
                "call maestro_open_session for a new one"
                if not owner.implicit
                else "call maestro_reset_session to start a new one"
            )
            raise SessionError(f"{owner.shown} {why}; its state is gone: {fix}")


_ABSENT = object()  # an address the session had not written before the call


def _size(n: int) -> str:
    mib = 1024 * 1024
    return f"{n // mib} MiB" if n % mib == 0 else f"{n:,} bytes"
