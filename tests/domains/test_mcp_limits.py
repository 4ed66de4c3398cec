"""The MCP server against what the red team tried past its first hardening: DNS rebinding on a
loopback alias, a stranger flushing a victim's session ending, and sessions grown without bound
(red-team findings 6, 7, 8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from maestro.domains import Domain, load_domain
from maestro.domains.library import library_path
from maestro.domains.mcp_server import MCPOptions, running_http_server
from maestro.domains.mcp_sessions import (
    SessionError,
    SessionRegistry,
    token_owner,
    transport_owner,
)
from tests.domains.test_mcp import (
    INIT,
    OPEN_TOOL,
    TIMEOUT_S,
    client,
    named,
    opened,
    run,
    text,
)

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize("host", ["127.0.0.2", "127.0.0.1"])
def test_a_rebound_host_or_foreign_origin_is_refused_on_any_loopback_address(
    toy: Domain, host: str
) -> None:
    """Served on 127.0.0.2 the SDK checked neither header: a page from evil.example whose name
    was re-pointed at 127.0.0.2 could call the tools with no token."""
    with running_http_server(toy, host=host) as endpoint:
        port = endpoint.split(":")[2].split("/")[0]
        evil = httpx2.post(
            endpoint,
            json=INIT,
            headers={
                **HEADERS,
                "host": "rebind.evil.example",
                "origin": "http://rebind.evil.example",
            },
            timeout=TIMEOUT_S,
        )
        foreign_origin = httpx2.post(
            endpoint,
            json=INIT,
            headers={**HEADERS, "origin": "http://rebind.evil.example"},
            timeout=TIMEOUT_S,
        )
        own = httpx2.post(
            endpoint,
            json=INIT,
            headers={**HEADERS, "host": f"{host}:{port}", "origin": f"http://{host}:{port}"},
            timeout=TIMEOUT_S,
        )
    assert evil.status_code == 421
    assert foreign_origin.status_code == 403
    assert own.status_code == 200


@pytest.fixture
def registry(toy: Domain) -> Iterator[tuple[SessionRegistry, list[float]]]:
    now = [1000.0]
    yield (
        SessionRegistry(
            toy, task_id=None, max_sessions=8, idle_timeout_s=10.0, clock=lambda: now[0]
        ),
        now,
    )


def test_a_strangers_flood_of_sessions_never_brings_back_a_victims_ended_session(
    registry: tuple[SessionRegistry, list[float]],
) -> None:
    """The registry remembered the last 4,096 endings in one list: 4,100 tokens opened and
    closed by another client pushed the victim's out, and its next call got a fresh database."""
    reg, now = registry
    victim = transport_owner("victim-connection", "a")
    reg.get(victim).session.update("orders", "O1", status="cancelled")
    now[0] += 11  # idle past the timeout: the session ends
    with pytest.raises(SessionError, match="ended after 10 s without a call"):
        reg.get(victim)
    for _ in range(5000):
        reg.close(token_owner(reg.open_token(None)))
    with pytest.raises(SessionError, match="ended after 10 s without a call; its state is gone"):
        reg.get(victim)
    assert reg.reset(victim, None).session.get("orders", "O1")["status"] == "pending"


def test_a_connection_that_keeps_a_request_open_keeps_its_endings(
    registry: tuple[SessionRegistry, list[float]],
) -> None:
    """A connection's endings are forgotten only once the SDK has ended the connection too:
    twice the idle timeout without a request, and none in flight (an open stream)."""
    reg, now = registry
    owner = transport_owner("streaming", "a")
    reg.get(owner)
    reg.hold("streaming")  # an open GET stream keeps the connection alive in the SDK
    reg.close(owner)
    now[0] += 100
    with pytest.raises(SessionError, match="was closed"):
        reg.get(owner)
    reg.release("streaming")
    now[0] += 19
    reg.get(transport_owner("someone-else"))  # any request lets the registry tidy up
    with pytest.raises(SessionError, match="was closed"):
        reg.get(owner)
    now[0] += 21
    reg.get(transport_owner("someone-else"))
    # Forgotten, so the registry's memory stays bounded: by now the SDK has ended the idle
    # connection too and answers 404 to its id, so no request reaches this.
    assert reg.get(owner).calls == 0


def test_a_connection_may_use_a_bounded_number_of_names(toy: Domain) -> None:
    reg = SessionRegistry(toy, task_id=None, max_sessions=8, idle_timeout_s=10.0, max_names=3)
    for name in ("a", "b", "c"):
        reg.get(transport_owner("conn", name))
        reg.close(transport_owner("conn", name))
    with pytest.raises(SessionError, match="has used its 3 session names"):
        reg.get(transport_owner("conn", "d"))
    reg.reset(transport_owner("conn", "a"), None)  # a name it used may start again
    reg.get(transport_owner("other-conn", "d"))  # the count is per connection


@pytest.fixture(scope="module")
def hotel() -> Domain:
    return load_domain(library_path("hotel"), check_gold=False)


def test_a_session_cannot_grow_past_its_bytes_and_an_over_cap_call_is_undone(
    hotel: Domain,
) -> None:
    """60 writes of 0.9 MB to one session once grew the server by 61 MB."""
    big = "x" * 100_000

    async def go(endpoint: str) -> tuple[list[Any], str, Any, Any]:
        async with client(endpoint, mode="auto") as c:
            first = named(opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)))
            second = named(opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S)))
            writes = [
                await c.call_tool(
                    "update_guest_profile",
                    {"guest_id": f"G{1001 + i}", "preferences": big + str(i)},
                    TIMEOUT_S,
                    meta=first,
                )
                for i in range(4)
            ]
            after = await c.call_tool(
                "get_guest_profile", {"guest_id": "G1004"}, TIMEOUT_S, meta=first
            )
            # The server-wide cap: the second session fits alone, not beside the first.
            other = await c.call_tool(
                "update_guest_profile",
                {"guest_id": "G1001", "preferences": big * 2},
                TIMEOUT_S,
                meta=second,
            )
            small = await c.call_tool(
                "update_guest_profile",
                {"guest_id": "G1001", "preferences": "quiet room"},
                TIMEOUT_S,
                meta=second,
            )
            return writes, text(after), other, small

    options = MCPOptions(max_session_bytes=320_000, max_held_bytes=500_000)
    with running_http_server(hotel, options) as endpoint:
        writes, after, other, small = run(go(endpoint))
    assert [w.is_error for w in writes] == [False, False, False, True]
    assert "would hold more than 320,000 bytes of changes; the call's writes were undone" in (
        text(writes[3])
    )
    assert "xxxx" not in json.loads(after).get("preferences", "")  # the 4th write was undone
    assert other.is_error and "the server's sessions would hold more than" in text(other)
    assert not small.is_error
