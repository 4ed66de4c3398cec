"""Serve one page over HTTP on this machine, for ``maestro view``.

The page may be large (hundreds of MB before its budget, and any file an older maestro wrote),
and a client may stop reading: each answer is streamed from the file in :data:`CHUNK` pieces,
at most ``max_clients`` are answered at once (the next is told 503 at once), and a client
that takes no data for ``timeout_s`` is dropped. Eight clients that read 100 bytes of a 300 MB
page and stopped held 2.3 GB, a copy each, for as long as they liked.
"""

from __future__ import annotations

import os
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: Bytes read from the page and sent at a time.
CHUNK = 64 * 1024
#: How long a refused client may take to send its request before it is told 503.
_REFUSE_WAIT_S = 0.5
_BUSY_TEXT = b"busy: too many clients; try again soon"
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nRetry-After: 5\r\nConnection: close\r\n\r\n%s"
) % (len(_BUSY_TEXT), _BUSY_TEXT)


class _PageServer(ThreadingHTTPServer):
    """A thread per client, at most ``max_clients`` at once; the others are answered 503 on
    the accepting thread (a few bytes, so it never waits on them for long)."""

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_clients: int
    ) -> None:
        self._slots = threading.BoundedSemaphore(max_clients)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started, so none will give the slot back
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        try:
            request.settimeout(_REFUSE_WAIT_S)
            # Read the request first: closing on unread bytes resets the connection, and the
            # client may then never see the answer.
            request.recv(CHUNK)
            request.sendall(_BUSY)
        except OSError:
            pass
        finally:
            self.shutdown_request(request)


def page_server(
    page: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    timeout_s: float = 30.0,
    max_clients: int = 8,
) -> ThreadingHTTPServer:
    """A server answering ``/`` with ``page`` (opened again on each request, so a rewritten page
    shows on reload) and 404 to anything else; call ``serve_forever`` on it. At most
    ``max_clients`` are answered at once, the others 503; a client silent or not reading for
    ``timeout_s`` is dropped."""

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s  # on every read and write of the connection

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", f"/{page.name}"):
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            try:
                body = page.open("rb")  # this file to the end, even if a new page replaces it
            except OSError:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            with body:
                try:
                    self.send_response(HTTPStatus.OK)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(os.fstat(body.fileno()).st_size))
                    self.end_headers()
                    while chunk := body.read(CHUNK):
                        self.wfile.write(chunk)
                except OSError:  # the client left or stalled past the timeout
                    self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per request is noise in a terminal the user watches

    return _PageServer((host, port), Handler, max_clients)
