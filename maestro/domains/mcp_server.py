"""A domain's tools as a stateful Model Context Protocol server (streamable HTTP or stdio).

Each MCP client gets its own copy-on-write :class:`Session`, so concurrent clients never see
each other's writes, and no client can reach another's session (``domains/mcp_sessions.py``
says who owns which, and how sessions end). Which session a request belongs to:

1. ``_meta["maestro/session"]`` holding a token from ``maestro_open_session``: that session. This
   is how a client of the 2026-07-28 revision holds state, since its requests are
   self-contained (no handshake, no ``Mcp-Session-Id``).
2. A handshake-era HTTP session (``Mcp-Session-Id``, unguessable, checked by the SDK): its own
   session, or, with ``_meta["maestro/session"]: "<name>"``, a session of that name that belongs
   to this connection alone.
3. stdio: the one client of this process.

A request with none of these is refused with an error naming the fix, rather than served from a
throwaway session whose writes would silently vanish; so is a name the server never handed out,
and a session that ended (idle, closed): never a fresh database in its place.

The tools listed are the domain's tools with exactly the runtime's JSON schemas
(:meth:`Toolkit.schemas`), plus control tools: ``maestro_open_session`` (a token for a new
session), ``maestro_reset_session`` (back to a task's initial state) and
``maestro_close_session``. They are tools and not custom requests because tools/list and
tools/call are all that ordinary MCP clients (agent SDKs, desktop apps) can send; an evaluation
harness hides them from the agent under test. A tool whose outcome is not ``ok``
(business-rule violation, bad arguments, crash, deadline) comes back with ``isError`` set and
the runtime's message as its text, exactly what an in-process caller would read.

Bounded: at most ``max_sessions`` environment sessions and ``max_transport_sessions`` handshake
sessions, each ending after ``idle_timeout_s`` without a request; request bodies up to 1 MiB.
Over HTTP, ``token`` requires ``Authorization: Bearer <token>`` on every request, and serving on
an address other than loopback without one is refused.

An answer is held until its client reads it, and a client may never read: uvicorn writes a
whole body into the socket's buffer at once and never times a write out, so 16 clients that
called a 4 M-emoji tool and read nothing held 772 MB. So every answer counts against
``max_unread_bytes`` until its response is written (``mcp_sessions.reply_bytes``), a
body is written in 64 KiB chunks, each waiting for the one before to leave the socket's buffer
(what the server holds of an answer is then its own objects, counted, not a copy in the
buffer), and a client that reads none of a chunk for ``write_stall_s`` loses its connection.

Log lines can carry a client's text (the SDK logs a refused ``Host`` or ``Origin`` header as it
came, a C1 CSI included): :func:`serve_http` and :func:`serve_stdio` send every log record of
the process to the handler they are given (the CLI's, which escapes control characters).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, SecretStr
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from maestro import listen
from maestro.domains.mcp_sessions import (
    EnvSession,
    Owner,
    SessionError,
    SessionRegistry,
    is_token,
    reply_bytes,
    stdio_owner,
    token_owner,
    transport_owner,
)
from maestro.domains.package import Domain
from maestro.domains.runtime import ToolOutcome
from maestro.listen import is_loopback

SESSION_META_KEY = "maestro/session"
OPEN_TOOL = "maestro_open_session"
RESET_TOOL = "maestro_reset_session"
CLOSE_TOOL = "maestro_close_session"
CONTROL_TOOLS = (OPEN_TOOL, RESET_TOOL, CLOSE_TOOL)
MAX_REQUEST_BYTES = 1024 * 1024
_MAX_NAME_CHARS = 200
#: A response body is written in chunks of this size (see the module docstring).
_CHUNK_BYTES = 64 * 1024
#: Where the _Guard puts a request's unread answers in the ASGI scope, for the tool handler.
_ANSWERS_KEY = "maestro.answers"

logger = logging.getLogger(__name__)


class MCPServerError(Exception):
    """The MCP server cannot be built or started (unknown task, port in use, no start in time,
    a public address without a token)."""


class MCPOptions(BaseModel):
    """How a domain is served over MCP."""

    #: Task whose initial state new sessions start at; None: the domain's database.
    task_id: str | None = None
    #: Environment sessions held at once; past this, a new one is refused (a live one is never
    #: dropped to make room).
    max_sessions: int = Field(default=256, ge=1, le=100_000)
    #: Handshake-era transport sessions held at once (the SDK answers 503 past this): each
    #: costs about 25 KB of server memory until it ends.
    max_transport_sessions: int = Field(default=256, ge=1, le=100_000)
    #: A session (either kind) without a request for this long ends.
    idle_timeout_s: float = Field(default=600.0, gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    #: List the control tools (open, reset, close); maestro_open_session is accepted either way.
    reset_tool: bool = True
    #: Per-call deadline handed to the tool runtime.
    deadline_s: float = Field(default=5.0, gt=0, le=3600, allow_inf_nan=False)
    #: HTTP: the bearer token every request must carry; None: no authentication (loopback only).
    token: SecretStr | None = None
    #: Changes (as JSON) one session may hold, and all sessions together; a call past either
    #: has its writes undone and fails.
    max_session_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=1 << 40)
    max_held_bytes: int = Field(default=256 * 1024 * 1024, ge=1024, le=1 << 40)
    #: HTTP: what the answers not yet read by their clients may hold in all, counted as the
    #: server holds them (``mcp_sessions.reply_bytes``); a call past it has its writes undone
    #: and fails.
    max_unread_bytes: int = Field(default=256 * 1024 * 1024, ge=64 * 1024, le=1 << 40)
    #: HTTP: a client that reads none of a 64 KiB chunk of a response for this long loses its
    #: connection (what the server held of the answer is freed).
    write_stall_s: float = Field(default=30.0, gt=0, le=3600, allow_inf_nan=False)


def transport_security(host: str) -> TransportSecuritySettings:
    """The SDK's Host and Origin checks for the address actually served.

    The SDK switches them on by itself only for the strings ``127.0.0.1``, ``localhost`` and
    ``::1``: served on ``127.0.0.2`` (loopback too, so no token is needed), a page a browser
    loaded from ``evil.example`` re-resolved to 127.0.0.2 (DNS rebinding) could call the tools.
    On loopback the Host must name this address or a loopback name and an Origin, if sent,
    must be one of them. Elsewhere a bearer token is required (``http_app``), which such a page
    cannot send, and the names clients use for a public address are not known here.
    """
    if not is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    bare = host.strip("[]")
    shown = f"[{bare}]" if ":" in bare else bare
    names = sorted({shown, "127.0.0.1", "localhost", "[::1]"})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"http://{n}:*" for n in names],
    )


def request_owner(ctx: ServerRequestContext[Any, Any]) -> Owner | str:
    """Whose session a request is for (see the module docstring), or why it names none usable."""
    meta = ctx.meta or {}
    named = meta.get(SESSION_META_KEY) if isinstance(meta, dict) else None
    if named is not None and (
        not isinstance(named, str) or not named or len(named) > _MAX_NAME_CHARS
    ):
        return f"_meta {SESSION_META_KEY} must be a string of 1 to {_MAX_NAME_CHARS} characters"
    name = named or ""
    if is_token(name):
        return token_owner(name)
    request = ctx.request
    if request is None:
        return stdio_owner(name)
    # Mcp-Session-Id means something only on the handshake protocol, where the SDK checked that
    # it names a live transport session; on the 2026 revision it is just a header anyone sets.
    headers = getattr(request, "headers", None)
    handshake = ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
    sid = headers.get("mcp-session-id") if headers is not None and handshake else None
    if sid:
        return transport_owner(sid, name)
    if name:
        return (
            f"unknown session {name!r}: a name holds a session only within a handshake "
            f"connection; call {OPEN_TOOL} and send the token it returns in _meta "
            f'{{"{SESSION_META_KEY}": "<token>"}}'
        )
    return (
        "this server keeps state per session, and this request names none. Call "
        f'{OPEN_TOOL} and send its token in _meta {{"{SESSION_META_KEY}": "<token>"}} with '
        "each request, or connect with the handshake protocol (Mcp-Session-Id)."
    )


def mcp_tools(domain: Domain, options: MCPOptions) -> list[types.Tool]:
    """The domain's tools as MCP tools: the runtime's schemas, READ tools marked read-only."""
    tools = []
    for spec in domain.toolkit.specs.values():
        fn = spec.openai_schema()["function"]
        read = spec.kind == "read"
        tools.append(
            types.Tool(
                name=fn["name"],
                description=fn["description"],
                input_schema=fn["parameters"],
                annotations=types.ToolAnnotations(
                    read_only_hint=read,
                    destructive_hint=not read,
                    idempotent_hint=read,
                    open_world_hint=False,
                ),
            )
        )
    if options.reset_tool:
        tools.extend(_control_tools(domain))
    return tools


_TASK_ARG = {
    "type": "object",
    "properties": {"task_id": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": [],
    "additionalProperties": False,
}


def _control_tools(domain: Domain) -> list[types.Tool]:
    tasks = ", ".join(t.id for t in domain.tasks) or "none"
    control = "Control tool (not part of the domain): "
    return [
        types.Tool(
            name=OPEN_TOOL,
            description=(
                f"{control}start a new session at a task's initial state (the domain's "
                "database when task_id is null) and return its token; send the token as "
                f'_meta {{"{SESSION_META_KEY}": "<token>"}} with each later request. '
                f"Tasks: {tasks}."
            ),
            input_schema=_TASK_ARG,
            annotations=types.ToolAnnotations(open_world_hint=False),
        ),
        types.Tool(
            name=RESET_TOOL,
            description=(
                f"{control}discard this session's changes and start again from a task's "
                "initial state, or from the domain's database when task_id is null. "
                f"Tasks: {tasks}."
            ),
            input_schema=_TASK_ARG,
            annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name=CLOSE_TOOL,
            description=f"{control}end this session now; its state is discarded.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
        ),
    ]


def _result(text: str, *, error: bool, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=error, _meta=meta
    )


def _run_call(
    registry: SessionRegistry,
    env: EnvSession,
    domain: Domain,
    name: str,
    args: dict[str, Any],
    deadline: float,
    count_reply: bool,
) -> tuple[ToolOutcome, int]:
    """The call's outcome, and the bytes its answer was charged until read (``count_reply``:
    over HTTP, where a _Guard releases them; 0 otherwise)."""
    with env.lock:
        env.calls += 1
        session = env.session
        before = {(t, k): record for t, k, record in session.overlay_entries()}
        out = domain.toolkit.call(session, name, args, deadline_s=deadline)
        writes = registry.measure(env, before)
        reply = reply_bytes(out.content) if count_reply else 0
        refused = registry.charge(env, writes, reply) if writes.changed or reply else None
        if refused is None:
            return out, reply
        writes.undo(session)
        return replace(out, content=f"Error: {refused}", status="tool_error"), 0


class _Answers:
    """The answers of one HTTP request that its client has not read, each charged to its
    session (``SessionRegistry.charge``): released when the response has been written, or the
    request ended without it."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self.held: list[tuple[EnvSession, int]] = []
        self.done = False

    def add(self, env: EnvSession, reply: int) -> None:
        if self.done:  # the request ended before its answer came: nothing will write it
            self.registry.reply_read(env, reply)
        else:
            self.held.append((env, reply))

    def release(self) -> None:
        self.done = True
        for env, reply in self.held:
            self.registry.reply_read(env, reply)
        self.held.clear()


def _answers(ctx: ServerRequestContext[Any, Any]) -> _Answers | None:
    """The unread answers of the HTTP request a call came in (None over stdio, whose one client
    is the process that started this one)."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    found = scope.get(_ANSWERS_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, _Answers) else None


def build_server(domain: Domain, options: MCPOptions | None = None) -> Server[Any]:
    """A low-level MCP server exposing the domain's tools with per-client sessions."""
    return _build(domain, options or MCPOptions())[0]


def _build(domain: Domain, options: MCPOptions) -> tuple[Server[Any], SessionRegistry]:
    try:
        registry = SessionRegistry(
            domain,
            task_id=options.task_id,
            max_sessions=options.max_sessions,
            idle_timeout_s=options.idle_timeout_s,
            max_session_bytes=options.max_session_bytes,
            max_held_bytes=options.max_held_bytes,
            max_unread_bytes=options.max_unread_bytes,
        )
    except KeyError as exc:
        raise MCPServerError(str(exc.args[0])) from None
    tools = mcp_tools(domain, options)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = dict(params.arguments or {})
        if params.name == OPEN_TOOL:
            return _control(registry, None, params.name, args, options)
        owner = request_owner(ctx)
        if isinstance(owner, str):
            return _result(f"Error: {owner}", error=True)
        if options.reset_tool and params.name in CONTROL_TOOLS:
            return _control(registry, owner, params.name, args, options)
        try:
            env = registry.get(owner)
        except SessionError as exc:
            return _result(f"Error: {exc}", error=True, meta={"maestro/status": "session_error"})
        answers = _answers(ctx)
        counted = answers is not None
        out, reply = await anyio.to_thread.run_sync(
            _run_call, registry, env, domain, params.name, args, options.deadline_s, counted
        )
        if answers is not None and reply:
            answers.add(env, reply)  # no await since the charge: it cannot be lost
        return _result(
            out.content,
            error=not out.ok,
            meta={"maestro/status": out.status, "maestro/kind": out.kind},
        )

    server = Server(
        domain.id,
        version=domain.manifest.version,
        title=domain.manifest.name,
        description=domain.manifest.description,
        instructions=domain.policy,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    return server, registry


def _control(
    registry: SessionRegistry,
    owner: Owner | None,
    name: str,
    args: dict[str, Any],
    options: MCPOptions,
) -> types.CallToolResult:
    """One control tool call: open (owner None), reset or close the caller's session."""
    allowed = set() if name == CLOSE_TOOL else {"task_id"}
    task_id = args.get("task_id")
    if set(args) - allowed or not (task_id is None or isinstance(task_id, str)):
        wanted = (
            "no argument" if not allowed else "one optional argument task_id (a string or null)"
        )
        return _result(
            f"Error: {name} takes {wanted}; got {json.dumps(args, default=str)[:500]}", error=True
        )
    try:
        if owner is None:
            token = registry.open_token(task_id)
            env = registry.get(token_owner(token))
            body: dict[str, Any] = {"session": token, "meta_key": SESSION_META_KEY}
        elif name == CLOSE_TOOL:
            return _result(json.dumps({"closed": registry.close(owner)}), error=False)
        else:
            env = registry.reset(owner, task_id)
            body = {}
    except KeyError as exc:
        return _result(f"Error: {exc.args[0]}", error=True)
    except SessionError as exc:
        return _result(f"Error: {exc}", error=True, meta={"maestro/status": "session_error"})
    body.update(
        task_id=env.task_id,
        state_hash=env.session.state_hash(),
        idle_timeout_s=options.idle_timeout_s,
    )
    return _result(json.dumps(body), error=False)


class _Writer:
    """A response's ``send``: a body in chunks of 64 KiB, each written when the one before has
    left the socket's buffer (uvicorn's send waits while the buffer is full), and a client that
    takes none of a chunk for ``stall_s`` is written nothing more (uvicorn then closes the
    connection, the response being incomplete)."""

    def __init__(self, send: Send, stall_s: float) -> None:
        self._send = send
        self.stall_s = stall_s
        self.stalled = False

    async def __call__(self, message: Message) -> None:
        body = message.get("body", b"") if message["type"] == "http.response.body" else b""
        if len(body) <= _CHUNK_BYTES:
            await self._within(message)
            return
        more = bool(message.get("more_body", False))
        for start in range(0, len(body), _CHUNK_BYTES):
            end = start + _CHUNK_BYTES
            chunk = {"type": "http.response.body", "body": body[start:end]}
            await self._within({**chunk, "more_body": more or end < len(body)})

    async def _within(self, message: Message) -> None:
        if self.stalled:
            return
        with anyio.move_on_after(self.stall_s) as waited:
            await self._send(message)
        if waited.cancelled_caught:
            self.stalled = True
            logger.warning(
                "a client read none of its response for %g s: its connection is closed",
                self.stall_s,
            )


class _Guard:
    """ASGI middleware in front of the SDK's app: the bearer token, responses written as the
    client reads them (:class:`_Writer`) with their answers counted until then, and a deleted
    transport session's environment sessions ended with it (not left to idle out)."""

    def __init__(
        self,
        app: ASGIApp,
        token: SecretStr | None,
        registry: SessionRegistry,
        write_stall_s: float,
    ) -> None:
        self.app = app
        self.expected = f"Bearer {token.get_secret_value()}".encode() if token else None
        self.registry = registry
        self.write_stall_s = write_stall_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and not hmac.compare_digest(
            headers.get(b"authorization", b""), self.expected
        ):
            await _unauthorized(send)
            return
        answers = scope[_ANSWERS_KEY] = _Answers(self.registry)
        try:
            await self._route(scope, receive, _Writer(send, self.write_stall_s), headers)
        finally:
            answers.release()

    async def _route(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        sid = headers.get(b"mcp-session-id")
        if not sid:
            await self.app(scope, receive, send)
            return
        # While a connection has a request in flight (an open stream too), the SDK keeps it;
        # so must the registry remember its sessions' endings.
        session_id = sid.decode("latin-1")
        self.registry.hold(session_id)
        try:
            await self._serve(scope, receive, send, session_id)
        finally:
            self.registry.release(session_id)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, session_id: str) -> None:
        if scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, watch)
        if status and status[0] < 300:
            self.registry.close_transport(session_id)


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"error": "unauthorized", "error_description": "this server needs a bearer token"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="maestro"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(
    domain: Domain, options: MCPOptions | None = None, *, host: str = "127.0.0.1"
) -> Starlette:
    """The streamable-HTTP ASGI app, served at ``/mcp``; refuses a non-loopback ``host``
    without a token."""
    options = options or MCPOptions()
    if options.token is None and not is_loopback(host):
        raise MCPServerError(
            f"serving on {host} (not loopback) lets anyone who reaches it call the tools: "
            "give a bearer token (--token, or MAESTRO_MCP_TOKEN)"
        )
    server, registry = _build(domain, options)
    # One JSON reply per call instead of an SSE stream: these tools send no progress
    # notifications, and the SSE framing cost 1.8x in calls per second (bench/mcp.py).
    app = server.streamable_http_app(
        host=host,
        transport_security=transport_security(host),
        json_response=True,
        max_sessions=options.max_transport_sessions,
        session_idle_timeout=options.idle_timeout_s,
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    app.add_middleware(
        _Guard, token=options.token, registry=registry, write_stall_s=options.write_stall_s
    )
    return app


async def serve_stdio(
    domain: Domain, options: MCPOptions | None = None, log_handler: logging.Handler | None = None
) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects; every log
    record to ``log_handler`` meanwhile, when given."""
    from mcp.server.stdio import stdio_server

    server = build_server(domain, options)
    with _logging_to(log_handler):
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


@contextmanager
def _logging_to(handler: logging.Handler | None) -> Iterator[None]:
    """Every log record of the process (the SDK's, uvicorn's, anyone's) to ``handler`` for the
    block: installed on the root logger, which they all reach."""
    if handler is None:
        yield
        return
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def check_listen(host: str, port: int) -> None:
    """:class:`MCPServerError` unless ``host:port`` can be listened on now."""
    if not 1 <= port <= 65535:
        raise MCPServerError(f"port {port} is not between 1 and 65535")
    try:
        listen.check_listen(host, port)
    except listen.ListenError as exc:
        raise MCPServerError(str(exc)) from None


def serve_http(
    domain: Domain,
    options: MCPOptions | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    log_handler: logging.Handler | None = None,
) -> None:
    """Serve over streamable HTTP until interrupted (``http://HOST:PORT/mcp``). With a
    ``log_handler``, every log record goes to it, uvicorn's too (its own logging config,
    which would print them as they came, is not installed)."""
    app = http_app(domain, options, host=host)
    check_listen(host, port)
    logs: Any = None if log_handler is not None else uvicorn.config.LOGGING_CONFIG
    with _logging_to(log_handler):
        uvicorn.run(app, host=host, port=port, log_level="warning", http="h11", log_config=logs)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def running_http_server(
    domain: Domain,
    options: MCPOptions | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    start_timeout_s: float = 10.0,
) -> Iterator[str]:
    """Serve in a background thread for the duration of the block; yields the endpoint URL."""
    port = port or free_port(host)
    config = uvicorn.Config(
        http_app(domain, options, host=host), host=host, port=port, log_level="warning", http="h11"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"mcp-{domain.id}", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise MCPServerError(f"MCP server for {domain.id} did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=start_timeout_s)
