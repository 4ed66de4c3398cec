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
database in its place: the last ``tombstones`` endings are remembered for that.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from maestro.domains.package import Domain
from maestro.domains.store import Session

TOKEN_PREFIX = "mst_"


class SessionError(Exception):
    """A request names a session it cannot use: unknown, ended, or over the cap."""


@dataclass
class EnvSession:
    """One client's environment: its copy-on-write session and the task it started from."""

    session: Session
    task_id: str | None
    last_used: float
    calls: int = 0
    # Tool calls of one client may arrive concurrently; the runtime's transaction is per call,
    # so calls on the same session run one at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Owner:
    """Whose session a key is, for the messages: a transport session, a token or stdio."""

    key: str
    implicit: bool  # created on first use (transport sessions, stdio); tokens never are
    shown: str


def transport_owner(session_id: str, name: str = "") -> Owner:
    label = f"session {name!r} of this connection" if name else "this connection's session"
    return Owner(f"mcp:{session_id}:{name}", True, label)


def stdio_owner(name: str = "") -> Owner:
    return Owner(f"stdio:{name}", True, f"session {name!r}" if name else "the session")


def token_owner(token: str) -> Owner:
    return Owner(f"token:{token}", False, f"session {token[:8]}...")


def is_token(name: str) -> bool:
    return name.startswith(TOKEN_PREFIX)


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
        self._ended: OrderedDict[str, str] = OrderedDict()  # key -> why it ended
        self._max_ended = tombstones
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
                    f"unknown {owner.shown}: this server never handed it out; call "
                    "maestro_open_session and send the token it returns"
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
            env = self._start(owner, task_id)
            self._ended.pop(owner.key, None)
            return env

    def close(self, owner: Owner) -> bool:
        """End the owner's session now; False when it had none."""
        with self._lock:
            env = self._live.pop(owner.key, None)
            if env is not None:
                self._bury(owner.key, "was closed")
            return env is not None

    def close_transport(self, session_id: str) -> int:
        """End every session of a transport session (it was deleted); how many there were."""
        prefix = f"mcp:{session_id}:"
        with self._lock:
            keys = [k for k in self._live if k.startswith(prefix)]
            for key in keys:
                del self._live[key]
                self._bury(key, "ended with its connection")
        return len(keys)

    # ----- inside the lock ----------------------------------------------------------------------

    def _start(self, owner: Owner, task_id: str | None) -> EnvSession:
        if owner.key not in self._live and len(self._live) >= self.max_sessions:
            raise SessionError(
                f"the server holds its maximum of {self.max_sessions} sessions; close one "
                f"(maestro_close_session) or wait for an idle one to end ({self.idle_timeout_s:g} s)"
            )
        task = self.domain.task(task_id) if task_id is not None else None
        env = EnvSession(self.domain.start_session(task), task_id, self._clock())
        self._live[owner.key] = env
        self._live.move_to_end(owner.key)
        return env

    def _expire(self) -> None:
        now = self._clock()
        while self._live:
            key, env = next(iter(self._live.items()))
            if now - env.last_used < self.idle_timeout_s:
                return
            if env.lock.locked():  # a call is running on it: it is not idle
                env.last_used = now
                self._live.move_to_end(key)
                continue
            del self._live[key]
            self._bury(key, f"ended after {self.idle_timeout_s:g} s without a call")

    def _bury(self, key: str, why: str) -> None:
        self._ended[key] = why
        self._ended.move_to_end(key)
        while len(self._ended) > self._max_ended:
            self._ended.popitem(last=False)

    def _raise_if_ended(self, owner: Owner) -> None:
        why = self._ended.get(owner.key)
        if why is not None:
            fix = (
                "call maestro_open_session for a new one"
                if not owner.implicit
                else "call maestro_reset_session to start a new one"
            )
            raise SessionError(f"{owner.shown} {why}; its state is gone: {fix}")
