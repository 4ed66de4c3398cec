"""The MCP server against clients of the third red team (findings 9, 10 and 11): a header of
control characters logged raw to the operator's terminal, clients that call a tool answering
4 M emoji and never read (16 of them grew the server by 772 MB), and a session whose ending gave
its budget back while its answer still sat in the server."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp_types import RequestParamsMeta

from maestro.domains import Domain
from maestro.domains.mcp_server import (
    OPEN_TOOL,
    SESSION_META_KEY,
    MCPOptions,
    free_port,
    running_http_server,
)
from maestro.domains.mcp_sessions import SessionRegistry, token_owner
from maestro.domains.sandbox import SandboxLimits
from tests.domains.sandbox_support import (
    LIMITS,
    TOY_TOOLS,
    make_package,
    tool_source,
    unchecked,
)
from tests.domains.test_mcp import opened, run, text

MAESTRO = str(Path(sys.executable).with_name("maestro"))
TOY = str(Path(__file__).parent.parent / "fixtures" / "toy")
EMOJI = 4_000_000
#: 4 M emoji: 16 MB of text as CPython holds it, 16 MB of UTF-8, 48 MB of ASCII-escaped JSON.
WIDE = TOY_TOOLS + tool_source("wide", f'return "\\U0001f600" * {EMOJI}')
CALL_WIDE = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wide"}}
TIMEOUT_S = 30.0


# ----- a raw HTTP client: sends, and reads only when told -----------------------------------


class RawClient:
    """One handshake-protocol connection of its own, on a socket this test reads or not."""

    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.split("//")[1].split("/")[0].split(":")
        self.host = f"{host}:{port}"
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.sid = ""
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        self.send("POST", init)
        self.sid = self.read()[1]["mcp-session-id"]
        self.send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.read()

    def send(self, method: str, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} /mcp HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(data)}\r\n"
        )
        if self.sid:
            head += f"Mcp-Session-Id: {self.sid}\r\nMcp-Protocol-Version: 2025-06-18\r\n"
        self.sock.sendall(head.encode() + b"\r\n" + data)

    def read(self) -> tuple[str, dict[str, str], bytes]:
        """Status line, headers and body (what arrived of it before the connection closed)."""
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(bytes(buf[:200]))
            buf += chunk
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:])}
        body, length = bytearray(rest), int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            body += chunk
        return lines[0], headers, bytes(body)

    def answer(self) -> str:
        """The text of a tools/call reply read in full; "" when the connection was cut."""
        _, headers, body = self.read()
        if len(body) < int(headers.get("content-length", "0")):
            return ""
        return "".join(c["text"] for c in json.loads(body)["result"]["content"])

    def delete(self) -> None:
        """End this transport session from another connection (DELETE with its id)."""
        other = RawClient.__new__(RawClient)
        other.host, other.sid = self.host, self.sid
        host, port = self.host.split(":")
        other.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        other.send("DELETE")
        assert other.read()[0].startswith("HTTP/1.1 200"), "the session was not deleted"
        other.sock.close()


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Domain]:
    root = make_package(tmp_path_factory.mktemp("wide"), "toy", WIDE)
    limits = LIMITS.model_copy(update={"call_timeout_s": 20.0})
    with unchecked(root, limits) as domain:
        yield domain


def _stuck(endpoint: str, n: int) -> list[RawClient]:
    """``n`` clients that call the wide tool and read nothing, once every call is answered
    (its response has begun to arrive: peeked at, not read)."""
    clients = []
    for _ in range(n):
        c = RawClient(endpoint)
        c.send("POST", CALL_WIDE)
        clients.append(c)
    deadline = time.monotonic() + 120
    for c in clients:
        while not _arrived(c.sock):
            assert time.monotonic() < deadline, "a call was not answered"
            time.sleep(0.05)
    time.sleep(0.5)  # written as far as the sockets take it
    return clients


def _arrived(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


# ----- finding 9: the operator's terminal -----------------------------------------------------


def test_a_control_character_in_host_or_origin_reaches_the_log_escaped(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "stderr"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [MAESTRO, "serve-mcp", TOY, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "COLUMNS": "200"},
        )
        try:
            _wait_listening(port, server)
            origin = b"Origin: http://x\x1b]52;c;b3duZWQ=\x07\x9b2J\r\n"
            for headers in (
                b"Host: evil\x9b31m\x1b]0;title\x07\r\n",
                f"Host: 127.0.0.1:{port}\r\n".encode() + origin,
            ):
                with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
                    s.sendall(
                        b"POST /mcp HTTP/1.1\r\n" + headers + b"Accept: application/json, "
                        b"text/event-stream\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 2\r\n\r\n{}"
                    )
                    assert s.recv(4096).startswith(b"HTTP/1.1 4")  # refused, and logged
            time.sleep(0.5)
        finally:
            server.terminate()
            server.wait(TIMEOUT_S)
    logged = log.read_bytes()
    for raw in (b"\x9b", b"\xc2\x9b", b"\x1b", b"\x07"):
        assert raw not in logged, logged
    assert b"Invalid Host header: evil\\x9b31m\\x1b]0;title\\x07" in logged, logged
    assert b"Invalid Origin header: http://x\\x1b]52;c;b3duZWQ=\\x07\\x9b2J" in logged, logged


def _wait_listening(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the server did not start")


# ----- findings 10 and 11: answers nobody reads ----------------------------------------------


def test_clients_that_never_read_hold_no_more_than_the_unread_budget(wide: Domain) -> None:
    """Clients that never read each held their answer's JSON in the socket's buffer, uncounted
    and for ever; now one answer fits the budget and the others get an error saying why.
    Measured as the live Python memory (what RSS keeps of freed blocks is the allocator's)."""
    options = MCPOptions(max_unread_bytes=120 * 1024 * 1024)
    with running_http_server(wide, options) as endpoint:
        tracemalloc.start()
        try:
            clients = _stuck(endpoint, 12)
            grown = tracemalloc.get_traced_memory()[0] / 2**20
        finally:
            tracemalloc.stop()
        answers = [c.answer() for c in clients]
        assert [len(a) for a in answers].count(EMOJI) == 1, [a[:200] for a in answers]
        refused = [a for a in answers if len(a) != EMOJI]
        assert all("the answers not yet read would hold more than" in a for a in refused)
        assert all("the answer would hold 112,00" in a for a in refused)
        later = RawClient(endpoint)  # every answer read: the budget is back
        later.send("POST", CALL_WIDE)
        assert len(later.answer()) == EMOJI
    # One answer: its 16 MB of text and 16 MB of JSON (12 answers held 493 MB before).
    assert grown < 100, f"the server holds {grown:.0f} MB more"


def test_the_2026_protocol_counts_its_answers_too(wide: Domain) -> None:
    """Its replies are written by another entry of the SDK (ASCII-escaped JSON: 48 MB here)."""

    async def go(endpoint: str) -> tuple[Any, Any]:
        async with Client(endpoint, mode="auto", read_timeout_seconds=TIMEOUT_S) as c:
            meta = cast(
                RequestParamsMeta,
                {SESSION_META_KEY: opened(await c.call_tool(OPEN_TOOL, {}, TIMEOUT_S))},
            )
            big = await c.call_tool("wide", {}, TIMEOUT_S, meta=meta)
            small = await c.call_tool("get_order", {"order_id": "O1"}, TIMEOUT_S, meta=meta)
            return big, small

    with running_http_server(wide, MCPOptions(max_unread_bytes=1024 * 1024)) as endpoint:
        big, small = run(go(endpoint))
    assert big.is_error and "the answers not yet read would hold more than" in text(big)
    assert not small.is_error  # charged, written, released


def test_an_ended_session_keeps_its_budget_until_its_answer_is_read(
    tmp_path: Path,
) -> None:
    """Deleting the connection of an unread answer ended its session, whose Session object (and
    so the sandbox's count of what it holds) went away with it: another session's call then fit
    the domain's budget while the first answer still sat in the server."""
    root = make_package(tmp_path, "toy", WIDE)
    limits = LIMITS.model_copy(update={"call_timeout_s": 20.0, "max_held_bytes": 20 * 1024 * 1024})
    options = MCPOptions(max_unread_bytes=1 << 30)
    with unchecked(root, limits) as domain, running_http_server(domain, options) as endpoint:
        first = _stuck(endpoint, 1)[0]
        first.delete()
        second = RawClient(endpoint)
        second.send("POST", CALL_WIDE)
        refused = second.answer()
        assert "this domain's live sessions would hold" in refused, refused[:300]
        assert len(first.answer()) == EMOJI  # read at last: its session's budget goes back
        time.sleep(0.5)
        third = RawClient(endpoint)
        third.send("POST", CALL_WIDE)
        assert len(third.answer()) == EMOJI


def test_a_client_that_reads_nothing_loses_its_connection_and_its_answer(wide: Domain) -> None:
    options = MCPOptions(max_unread_bytes=120 * 1024 * 1024, write_stall_s=1.0)
    with running_http_server(wide, options) as endpoint:
        stalled = _stuck(endpoint, 1)[0]
        time.sleep(2.5)  # without reading: past the stall deadline
        assert stalled.answer() == ""  # cut short, not held for a client that never reads
        other = RawClient(endpoint)
        other.send("POST", CALL_WIDE)
        assert len(other.answer()) == EMOJI  # the budget came back with the connection


def test_a_session_that_ends_keeps_its_changes_counted_until_its_answers_are_read(
    toy: Domain,
) -> None:
    reg = SessionRegistry(toy, task_id=None, max_sessions=4, idle_timeout_s=60)
    owner = token_owner(reg.open_token(None))
    env = reg.get(owner)
    before = {(t, k): r for t, k, r in env.session.overlay_entries()}
    toy.toolkit.call(env.session, "cancel_order", {"order_id": "O1"})
    writes = reg.measure(env, before)
    assert reg.charge(env, writes, reply=1000) is None
    changes = writes.delta
    assert changes > 0 and reg.held == (changes, 1000)
    reg.close(owner)
    assert reg.held == (changes, 1000)  # ended, but its answer is unread: all still counted
    reg.reply_read(env, 1000)
    assert reg.held == (0, 0)
    small = SessionRegistry(
        toy, task_id=None, max_sessions=4, idle_timeout_s=60, max_unread_bytes=5000
    )
    mine = small.get(token_owner(small.open_token(None)))
    assert small.charge(mine, small.measure(mine, {}), reply=4000) is None
    refused = small.charge(mine, small.measure(mine, {}), reply=4000)
    assert refused is not None and "the answers not yet read would hold more than" in refused


def test_an_answer_is_counted_as_the_server_holds_it() -> None:
    from maestro.domains.mcp_sessions import reply_bytes

    wide_text, ascii_text = "\U0001f600" * 100_000, "x" * 100_000
    assert 2 * 12 * 100_000 + 400_000 < reply_bytes(wide_text) < 2 * 12 * 100_000 + 410_000
    assert 300_000 < reply_bytes(ascii_text) < 310_000
    assert reply_bytes("") > 0
    assert SandboxLimits().max_reply_bytes < reply_bytes("\U0001f600" * EMOJI)
