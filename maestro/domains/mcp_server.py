"""A domain's tools as a stateful Model Context Protocol server (streamable HTTP or stdio).

Each MCP client gets its own copy-on-write :class:`Session`, so concurrent clients never see
each other's writes. Which environment session a request belongs to is decided, in order, by:

1. ``_meta["maestro/session"]`` on the request: a name the client picks. It works on every
   protocol revision and transport, and is the only way on the 2026-07-28 revision, whose
   requests are self-contained (no handshake, no ``Mcp-Session-Id``).
2. The ``Mcp-Session-Id`` header of a handshake-era HTTP session.
3. stdio: the one client of this process.

A request with none of these is refused with an error naming the fix, rather than served from a
throwaway session whose writes would silently vanish.

The tools listed are the domain's tools with exactly the runtime's JSON schemas
(:meth:`Toolkit.schemas`), plus one control tool, ``maestro_reset_session``, that puts the
caller's session back at a task's initial state. It is a tool and not a custom request because
tools/list and tools/call are all that ordinary MCP clients (agent SDKs, desktop apps) can send;
an evaluation harness hides it from the agent under test. A tool whose outcome is not ``ok``
(business-rule violation, bad arguments, crash, deadline) comes back with ``isError`` set and
the runtime's message as its text, exactly what an in-process caller would read.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from maestro.domains.package import Domain
from maestro.domains.runtime import ToolOutcome
from maestro.domains.store import Session

SESSION_META_KEY = "maestro/session"
RESET_TOOL = "maestro_reset_session"
_STDIO_KEY = "stdio"


class MCPServerError(Exception):
    """The MCP server cannot be built or started (unknown task, port in use, no start in time)."""


class MCPOptions(BaseModel):
    """How a domain is served over MCP."""

    #: Task whose initial state new sessions start at; None: the domain's database.
    task_id: str | None = None
    #: Sessions kept at once; the least recently used one is dropped beyond this.
    max_sessions: int = Field(default=256, ge=1)
    #: List and accept the ``maestro_reset_session`` control tool.
    reset_tool: bool = True
    #: Per-call deadline handed to the tool runtime.
    deadline_s: float = Field(default=5.0, gt=0)


@dataclass
class EnvSession:
    """One client's environment: its copy-on-write session and the task it started from."""

    session: Session
    task_id: str | None
    calls: int = 0
    # Tool calls of one client may arrive concurrently; the runtime's transaction is per call,
    # so calls on the same session run one at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionRegistry:
    """The environment sessions of one server, keyed by the client's session name."""

    def __init__(self, domain: Domain, options: MCPOptions) -> None:
        if options.task_id is not None:
            domain.task(options.task_id)  # KeyError naming the task when unknown
        self.domain = domain
        self.options = options
        self._sessions: OrderedDict[str, EnvSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: str) -> EnvSession:
        """The client's session, started at the default task's initial state on first use."""
        env = self._sessions.get(key)
        if env is None:
            return self.reset(key, self.options.task_id)
        self._sessions.move_to_end(key)
        return env

    def reset(self, key: str, task_id: str | None) -> EnvSession:
        """Put the client's session at a task's initial state (KeyError for an unknown task)."""
        task = self.domain.task(task_id) if task_id is not None else None
        env = EnvSession(self.domain.start_session(task), task_id)
        self._sessions[key] = env
        self._sessions.move_to_end(key)
        while len(self._sessions) > self.options.max_sessions:
            self._sessions.popitem(last=False)
        return env


def session_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Which environment session a request belongs to (see the module docstring)."""
    meta = ctx.meta or {}
    named = meta.get(SESSION_META_KEY) if isinstance(meta, dict) else None
    if isinstance(named, str) and named:
        return f"named:{named}"
    request = ctx.request
    if request is None:
        return _STDIO_KEY
    headers = getattr(request, "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    return f"mcp:{sid}" if sid else None


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
        tools.append(_reset_tool(domain))
    return tools


def _reset_tool(domain: Domain) -> types.Tool:
    return types.Tool(
        name=RESET_TOOL,
        description=(
            "Control tool (not part of the domain): discard this session's changes and start "
            "again from a task's initial state, or from the domain's database when task_id is "
            f"null. Tasks: {', '.join(t.id for t in domain.tasks) or 'none'}."
        ),
        input_schema={
            "type": "object",
            "properties": {"task_id": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "required": [],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )


def _result(text: str, *, error: bool, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=error, _meta=meta
    )


def _run_call(
    env: EnvSession, domain: Domain, name: str, args: dict[str, Any], deadline: float
) -> ToolOutcome:
    with env.lock:
        env.calls += 1
        return domain.toolkit.call(env.session, name, args, deadline_s=deadline)


def build_server(domain: Domain, options: MCPOptions | None = None) -> Server[Any]:
    """A low-level MCP server exposing the domain's tools with per-client sessions."""
    options = options or MCPOptions()
    try:
        registry = SessionRegistry(domain, options)
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
        key = session_key(ctx)
        if key is None:
            return _result(
                "Error: this server keeps state per session, and this request names none. "
                f'Send _meta {{"{SESSION_META_KEY}": "<any name>"}} with each request, or '
                "connect with the handshake protocol (Mcp-Session-Id).",
                error=True,
            )
        args = dict(params.arguments or {})
        if options.reset_tool and params.name == RESET_TOOL:
            return _reset(registry, key, args)
        env = registry.get(key)
        out = await anyio.to_thread.run_sync(
            _run_call, env, domain, params.name, args, options.deadline_s
        )
        return _result(
            out.content,
            error=not out.ok,
            meta={"maestro/status": out.status, "maestro/kind": out.kind},
        )

    return Server(
        domain.id,
        version=domain.manifest.version,
        title=domain.manifest.name,
        description=domain.manifest.description,
        instructions=domain.policy,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _reset(registry: SessionRegistry, key: str, args: dict[str, Any]) -> types.CallToolResult:
    task_id = args.get("task_id")
    extra = set(args) - {"task_id"}
    if extra or not (task_id is None or isinstance(task_id, str)):
        return _result(
            f"Error: {RESET_TOOL} takes one optional argument task_id (a string or null); "
            f"got {json.dumps(args, default=str)}",
            error=True,
        )
    try:
        env = registry.reset(key, task_id)
    except KeyError as exc:
        return _result(f"Error: {exc.args[0]}", error=True)
    body = {"task_id": env.task_id, "state_hash": env.session.state_hash()}
    return _result(json.dumps(body), error=False)


def http_app(
    domain: Domain, options: MCPOptions | None = None, *, host: str = "127.0.0.1"
) -> Starlette:
    """The streamable-HTTP ASGI app, served at ``/mcp``."""
    # One JSON reply per call instead of an SSE stream: these tools send no progress
    # notifications, and the SSE framing cost 1.8x in calls per second (bench/mcp.py).
    return build_server(domain, options).streamable_http_app(host=host, json_response=True)


async def serve_stdio(domain: Domain, options: MCPOptions | None = None) -> None:
    """Serve one client over this process's stdin and stdout until it disconnects."""
    from mcp.server.stdio import stdio_server

    server = build_server(domain, options)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(
    domain: Domain, options: MCPOptions | None = None, *, host: str = "127.0.0.1", port: int = 8765
) -> None:
    """Serve over streamable HTTP until interrupted (``http://HOST:PORT/mcp``)."""
    uvicorn.run(http_app(domain, options, host=host), host=host, port=port, log_level="warning")


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
        http_app(domain, options, host=host), host=host, port=port, log_level="warning"
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
