"""Serving a large page: streamed from the file, at most ``max_clients`` answered at once (the
rest told 503), a client that stops reading dropped after ``timeout_s``. Eight clients that
read 100 bytes of a 300 MB page and stopped held 2.3 GB, a copy each, with no bound."""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from maestro.view import page_server

PAGE_SIZE = 32 * 2**20  # far more than a client's and the server's socket buffers hold


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("page") / "r1.transcripts.html"
    path.write_bytes(os.urandom(PAGE_SIZE))
    return path


@contextmanager
def serving(page: Path, timeout_s: float = 30.0, max_clients: int = 8) -> Iterator[str]:
    server = page_server(page, timeout_s=timeout_s, max_clients=max_clients)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def stalled(url: str, request: bool = True) -> socket.socket:
    """A client that asks for the page, reads 100 bytes of the answer and stops reading (or,
    without ``request``, connects and says nothing)."""
    port = int(url.rsplit(":", 1)[1].strip("/"))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    if request:
        s.sendall(b"GET / HTTP/1.1\r\nHost: here\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.0 200")
    return s


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_large_page_is_streamed_whole_and_byte_identical(page: Path) -> None:
    with serving(page) as url, urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.headers["Content-Length"] == str(PAGE_SIZE)
        assert resp.read() == page.read_bytes()


def test_past_the_bound_clients_are_told_503_while_stalled_ones_hold_every_slot(
    page: Path,
) -> None:
    with serving(page, max_clients=8) as url:
        before, threads = rss_mib(), threading.active_count()
        held = [stalled(url) for _ in range(8)]
        time.sleep(0.5)  # each answer fills the socket buffers, then waits
        try:
            # A copy of the page per client was 8 x 32 MiB; streamed, a chunk each.
            assert rss_mib() - before < 64
            started = time.monotonic()
            assert [status_of(url) for _ in range(4)] == [503] * 4
            assert time.monotonic() - started < 4
            assert threading.active_count() <= threads + 8
        finally:
            for s in held:
                s.close()
        deadline = time.monotonic() + 10
        while status_of(url) != 200:  # the slots come back as the stalled answers fail
            assert time.monotonic() < deadline, "no slot came back"
            time.sleep(0.1)


@pytest.mark.parametrize("request_sent", [True, False], ids=["not-reading", "silent"])
def test_a_client_that_stops_reading_or_never_asks_is_dropped_after_the_timeout(
    page: Path, request_sent: bool
) -> None:
    with serving(page, timeout_s=1.0, max_clients=1) as url:
        client = stalled(url, request=request_sent)
        started = time.monotonic()
        assert status_of(url) == 503  # the one slot is held
        while status_of(url) != 200:
            assert time.monotonic() - started < 10, "the stalled client was never dropped"
            time.sleep(0.2)
        assert time.monotonic() - started > 0.8
        read = 0
        while chunk := client.recv(2**20):  # what was in flight, then the end: dropped
            read += len(chunk)
        assert read < PAGE_SIZE
        client.close()
