"""The MCP server, through the SDK's real client: HTTP on a free port, and stdio once."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import RequestParamsMeta

from maestro.domains import Domain
from maestro.domains.mcp_server import (
    RESET_TOOL,
    SESSION_META_KEY,
    MCPOptions,
    MCPServerError,
    build_server,
    running_http_server,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
TIMEOUT_S = 10.0  # every client call is bounded; a hang fails the test instead of the suite


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
        if t.name != RESET_TOOL
    ]
    assert served == toy.toolkit.schemas()
    hints = {t.name: t.annotations.read_only_hint for t in tools if t.name != RESET_TOOL}
    assert hints == {n: toy.toolkit.kind(n) == "read" for n in toy.toolkit.names}
    assert RESET_TOOL in {t.name for t in tools}


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


def test_stateless_protocol_keys_state_on_the_named_session(url: str) -> None:
    """The 2026-07-28 revision has no MCP sessions: the client names its own in _meta."""

    async def go() -> tuple[Any, str, str]:
        async with client(url, mode="auto") as c:
            anonymous = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S)
            mine = named("alice")
            await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            seen = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=mine)
            other = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=named("bob"))
            return anonymous, text(seen), text(other)

    anonymous, seen, other = run(go())
    assert anonymous.is_error and SESSION_META_KEY in text(anonymous)
    assert json.loads(seen)["status"] == "cancelled"
    assert json.loads(other)["status"] == "pending"


def test_unknown_start_task_is_refused(toy: Domain) -> None:
    with pytest.raises(MCPServerError, match="no task 'nope'"):
        build_server(toy, MCPOptions(task_id="nope"))


def test_stdio_through_the_cli() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maestro.cli.app", "serve-mcp", str(FIXTURES / "toy"), "--transport", "stdio"],
    )

    async def go() -> tuple[list[str], str, Any]:
        async with Client(params, mode="legacy", read_timeout_seconds=TIMEOUT_S) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            wrote = text(await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S))
            again = await c.call_tool("cancel_order", {"order_id": "O1"}, TIMEOUT_S)
            return names, wrote, again

    names, wrote, again = run(go())
    assert names[:4] == ["get_order", "list_orders", "cancel_order", "place_order"]
    assert json.loads(wrote)["status"] == "cancelled"
    assert again.is_error and "is cancelled" in text(again)  # the session kept the first write
