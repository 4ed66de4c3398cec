"""Serve one page over HTTP on this machine, for ``maestro view``."""

from __future__ import annotations

from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def page_server(page: Path, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server answering ``/`` with ``page`` (read again on each request, so a rewritten page
    shows on reload) and 404 to anything else; call ``serve_forever`` on it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", f"/{page.name}"):
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            body = page.read_bytes()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per request is noise in a terminal the user watches

    return ThreadingHTTPServer((host, port), Handler)
