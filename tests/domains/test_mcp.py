"""The MCP server, through the SDK's real client: HTTP on a free port, and stdio once."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import RequestParamsMeta

from maestro.domains import Domain
from maestro.domains.mcp_server import (
    CLOSE_TOOL,
    CONTROL_TOOLS,
    OPEN_TOOL,
    RESET_TOOL,
    SESSION_META_KEY,
    MCPOptions,
    MCPServerError,
    build_server,
    http_app,
    running_http_server,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
TIMEOUT_S = 10.0  # every client call is bounded; a hang fails the test instead of the suite

#: A handshake-protocol initialize request, as a raw HTTP client sends it.
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture(scope="module")
def url(toy: Domain) -> Iterator[str]:
    with running_http_server(toy) as endpoint:
        yield endpoint


def named(session: str) -> RequestParamsMeta:
    """Request _meta naming the environment session (the stateless protocol's only key)."""
    return cast(RequestParamsMeta, {SESSION_META_KEY: session})


def text(result: Any) -> str:
    return "".join(c.text for c in result.content)


def client(url: str, mode: str = "legacy") -> Client:
    return Client(url, mode=mode, read_timeout_seconds=TIMEOUT_S)


def test_tool_schemas_are_the_runtime_schemas(toy: Domain, url: str) -> None:
    async def go() -> list[Any]:
        async with client(url) as c:
            return (await c.list_tools()).tools

    tools = run(go())
    served = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
        if t.name not in CONTROL_TOOLS
    ]
    assert served == toy.toolkit.schemas()
    hints = {t.name: t.annotations.read_only_hint for t in tools if t.name not in CONTROL_TOOLS}
    assert hints == {n: toy.toolkit.kind(n) == "read" for n in toy.toolkit.names}
    assert [t.name for t in tools][-3:] == list(CONTROL_TOOLS)


def test_two_concurrent_sessions_do_not_see_each_others_writes(url: str) -> None:
    async def cancel_then_read(c: Client) -> tuple[str, str]:
        wrote = await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S)
        assert not wrote.is_error, text(wrote)
        read = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)
        return text(wrote), text(read)

    async def read_only(c: Client, started: asyncio.Event, done: asyncio.Event) -> str:
        await started.wait()
        await done.wait()
        return text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S))

    async def go() -> tuple[tuple[str, str], str]:
        async with client(url) as a, client(url) as b:
            started, done = asyncio.Event(), asyncio.Event()
            reader = asyncio.create_task(read_only(b, started, done))
            started.set()
            writer = await cancel_then_read(a)
            done.set()
            return writer, await reader

    (_, a_read), b_read = run(go())
    assert json.loads(a_read)["status"] == "cancelled"
    assert json.loads(b_read)["status"] == "pending"


def test_tool_errors_are_mcp_tool_errors(url: str) -> None:
    async def go() -> list[Any]:
        async with client(url) as c:
            return [
                await c.call_tool("cancel_order", {"order_id": "O2"}, TIMEOUT_S),  # business rule
                await c.call_tool("get_order", {"order_id": 7}, TIMEOUT_S),  # wrong type
                await c.call_tool("get_order", {"order_id": "O404"}, TIMEOUT_S),  # missing record
            ]

    rule, typed, missing = run(go())
    assert rule.is_error and "only pending orders can be cancelled" in text(rule)
    assert typed.is_error and "invalid arguments for get_order" in text(typed)
    assert missing.is_error and "O404" in text(missing)
    assert rule.meta["maestro/status"] == "tool_error"


def test_reset_puts_the_session_back_at_a_task_start(url: str) -> None:
    async def go() -> tuple[str, str, Any]:
        async with client(url) as c:
            await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S)
            await c.call_tool(RESET_TOOL, {"task_id": "toy_cancel"}, TIMEOUT_S)
            after = text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S))
            bad = await c.call_tool(RESET_TOOL, {"task_id": "nope"}, TIMEOUT_S)
            again = text(await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S))
            return after, again, bad

    after, again, bad = run(go())
    assert json.loads(after)["status"] == "pending"
    assert json.loads(again)["status"] == "cancelled"
    assert bad.is_error and "nope" in text(bad)


def opened(result: Any) -> str:
    """The token a maestro_open_session call returned."""
    assert not result.is_error, text(result)
    token = json.loads(text(result))["session"]
    assert isinstance(token, str) and token.startswith("mst_")
    return token


def test_stateless_protocol_holds_state_on_a_token_the_server_hands_out(url: str) -> None:
    """The 2026-07-28 revision has no MCP sessions: the server hands out a token per session."""

    async def go() -> tuple[Any, Any, str, str, str]:
        async with client(url, mode="auto") as c:
            anonymous = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)
            made_up = await c.call_tool(
                "get_order", {"order_id": "O1"}, TIMEOUT_S, meta=named("alice")
            )
            mine = named(opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)))
            other = named(opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)))
            await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            seen = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            theirs = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=other)
            forged = named("mst_" + "A" * 32)
            guessed = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=forged)
            return anonymous, made_up, text(seen), text(theirs), text(guessed)

    anonymous, made_up, seen, theirs, guessed = run(go())
    assert anonymous.is_error and OPEN_TOOL in text(anonymous)
    assert made_up.is_error and "unknown session 'alice'" in text(made_up)
    assert json.loads(seen)["status"] == "cancelled"
    assert json.loads(theirs)["status"] == "pending"
    assert guessed.startswith("Error: unknown session mst_AAAA...: this server never handed it out")


def test_a_name_belongs_to_the_connection_that_used_it(url: str) -> None:
    """Two clients naming the same session each get their own; neither sees the other's."""

    async def go() -> tuple[str, str, str]:
        async with client(url) as a, client(url) as b:
            await a.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S, meta=named("shared"))
            a_sees = await a.call_tool(
                "get_order", {"order_id": "O1"}, TIMEOUT_S, meta=named("shared")
            )
            b_sees = await b.call_tool(
                "get_order", {"order_id": "O1"}, TIMEOUT_S, meta=named("shared")
            )
            a_default = await a.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)
            return text(a_sees), text(b_sees), text(a_default)

    a_sees, b_sees, a_default = run(go())
    assert json.loads(a_sees)["status"] == "cancelled"
    assert json.loads(b_sees)["status"] == "pending"
    assert json.loads(a_default)["status"] == "pending"  # names are separate sessions


def test_a_forged_session_id_header_on_the_stateless_protocol_reaches_nothing(url: str) -> None:
    """Mcp-Session-Id is checked by the SDK only on the handshake protocol; on the 2026
    revision it is a header anyone can set, so it must not select a session."""

    async def go() -> tuple[str, Any]:
        async with httpx2.AsyncClient(timeout=TIMEOUT_S) as raw:
            init = await raw.post(
                url, json=INIT, headers={"Accept": "application/json, text/event-stream"}
            )
            sid = init.headers["mcp-session-id"]
        async with client(url) as victim:  # its own handshake session, written to
            await victim.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S)
        headers = {"Mcp-Session-Id": sid}
        async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as forged_http:
            transport = streamable_http_client(url, http_client=forged_http)
            async with Client(transport, mode="auto", read_timeout_seconds=TIMEOUT_S) as c:
                return sid, await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)

    sid, result = run(go())
    assert len(sid) == 32
    assert result.is_error and "names none" in text(result)


def test_an_idle_session_ends_with_an_error_never_a_fresh_database(toy: Domain) -> None:
    async def go(endpoint: str) -> tuple[str, Any, Any, Any]:
        async with client(endpoint, mode="auto") as c:
            mine = named(opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)))
            await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            before = text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine))
            await asyncio.sleep(1.5)
            after = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            again = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            reset = await c.call_tool(RESET_TOOL, {}, TIMEOUT_S, meta=mine)
            return before, after, again, reset

    with running_http_server(toy, MCPOptions(idle_timeout_s=1.0)) as endpoint:
        before, after, again, reset = run(go(endpoint))
    assert json.loads(before)["status"] == "cancelled"
    for late in (after, again, reset):  # every later use says so; none gets a fresh database
        assert late.is_error, text(late)
        assert "ended after 1 s without a call; its state is gone" in text(late)
        assert late.meta["maestro/status"] == "session_error"


def test_past_the_session_cap_a_new_session_is_refused_and_live_ones_keep_their_state(
    toy: Domain,
) -> None:
    """The old registry dropped the least recently used session past its cap: the 257th
    client silently reset a live one."""

    async def go(endpoint: str) -> tuple[list[str], Any, list[str], Any]:
        async with client(endpoint, mode="auto") as c:
            tokens = [opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)) for _ in range(3)]
            for token in tokens:
                await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S, meta=named(token))
            refused = await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)
            kept = [
                text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=named(t)))
                for t in tokens
            ]
            closed = await c.call_tool(CLOSE_TOOL, {}, TIMEOUT_S, meta=named(tokens[0]))
            after_close = await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)
            return tokens, refused, kept, (closed, after_close)

    with running_http_server(toy, MCPOptions(max_sessions=3)) as endpoint:
        _, refused, kept, (closed, after_close) = run(go(endpoint))
    assert refused.is_error and "maximum of 3 sessions" in text(refused)
    assert [json.loads(k)["status"] for k in kept] == ["cancelled"] * 3
    assert json.loads(text(closed)) == {"closed": True}
    opened(after_close)


def test_handshakes_past_the_transport_cap_are_refused_and_a_closed_one_frees_room(
    toy: Domain,
) -> None:
    async def go(endpoint: str) -> tuple[list[str], str]:
        outcomes: list[str] = []
        async with client(endpoint) as a, client(endpoint) as b:
            for c in (a, b):
                outcomes.append(text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)))
            try:
                async with client(endpoint) as third:
                    await third.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)
                outcomes.append("third connected")
            except Exception as exc:  # the SDK raises a group holding the 503
                outcomes.append(repr(exc))
        async with client(endpoint) as after:  # a and b sent DELETE on the way out
            late = text(await after.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S))
        return outcomes, late

    options = MCPOptions(max_transport_sessions=2)
    with running_http_server(toy, options) as endpoint:
        outcomes, late = run(go(endpoint))
    assert "Too many open sessions" in outcomes[2]
    assert json.loads(late)["status"] == "pending"


def test_a_bearer_token_is_required_when_one_is_set(toy: Domain) -> None:
    token = "t0ken-" + "x" * 20

    async def go(endpoint: str) -> tuple[str, str, str]:
        outcomes = []
        for headers in ({}, {"Authorization": "Bearer wrong-" + "x" * 20}):
            async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http:
                try:
                    transport = streamable_http_client(endpoint, http_client=http)
                    async with Client(
                        transport, mode="legacy", read_timeout_seconds=TIMEOUT_S
                    ) as c:
                        await c.list_tools()
                    outcomes.append("served")
                except Exception as exc:
                    outcomes.append(repr(exc))
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT_S
        ) as http:
            transport = streamable_http_client(endpoint, http_client=http)
            async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT_S) as c:
                outcomes.append(text(await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)))
        return outcomes[0], outcomes[1], outcomes[2]

    with running_http_server(toy, MCPOptions(token=token)) as endpoint:
        missing, wrong, right = run(go(endpoint))
        bare = httpx2.post(endpoint, json={}, timeout=TIMEOUT_S)
    assert "served" not in missing and "served" not in wrong
    assert json.loads(right)["status"] == "pending"
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")


def test_a_public_address_without_a_token_is_refused(toy: Domain) -> None:
    with pytest.raises(MCPServerError, match="not loopback"):
        http_app(toy, host="0.0.0.0")
    http_app(toy, MCPOptions(token="x" * 20), host="0.0.0.0")  # with a token it builds
    http_app(toy, host="::1")


def test_unknown_start_task_is_refused(toy: Domain) -> None:
    with pytest.raises(MCPServerError, match="no task 'nope'"):
        build_server(toy, MCPOptions(task_id="nope"))


def test_stdio_through_the_cli() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maestro.cli.app", "serve-mcp", str(FIXTURES / "toy"), "--transport", "stdio"],
    )

    async def go() -> tuple[list[str], str, Any]:
        # The first answer waits for the interpreter's start and the toy's sandbox child (a
        # package outside the library): longer than one call on a loaded machine.
        async with Client(params, mode="legacy", read_timeout_seconds=6 * TIMEOUT_S) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            wrote = text(await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S))
            again = await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S)
            return names, wrote, again

    names, wrote, again = run(go())
    assert names[:4] == ["get_order", "list_orders", "cancel_order", "place_order"]
    assert json.loads(wrote)["status"] == "cancelled"
    assert again.is_error and "is cancelled" in text(again)  # the session kept the first write


def test_a_session_name_that_is_not_a_short_string_is_refused(url: str) -> None:
    async def go() -> list[Any]:
        async with client(url) as c:
            metas = [5, ["x"], "", "x" * 201]
            return [
                await c.call_tool(
                    "get_order",
                    {"order_id": "O1"},
                    TIMEOUT_S,
                    meta=cast(RequestParamsMeta, {SESSION_META_KEY: m}),
                )
                for m in metas
            ]

    for result in run(go()):
        assert result.is_error
        assert f"_meta {SESSION_META_KEY} must be a string of 1 to 200 characters" in text(result)
