"""An aiohttp application served on a background thread with its own event loop: what the
scripted test server and a trained model's evaluation server both need."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Self

from aiohttp import web


class BackgroundApp:
    """Serves the application ``make_app`` builds (afresh at each start) on ``host:port``
    (0: a free port, known once :meth:`start` returns)."""

    def __init__(
        self,
        make_app: Callable[[], web.Application],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str,
        backlog: int = 128,
        **runner_options: Any,
    ) -> None:
        self.make_app = make_app
        self.host = host
        self.port = port
        self.name = name
        self._backlog = backlog
        self._runner_options = runner_options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> Self:
        """Start serving; raises if the server is not listening within 30 s."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(
                self.make_app(), access_log=None, shutdown_timeout=1.0, **self._runner_options
            )
            try:
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, self.host, self.port, backlog=self._backlog)
                loop.run_until_complete(site.start())
                server = site._server
                assert server is not None
                self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        if not ready.wait(30) or errors:
            raise RuntimeError(f"{self.name} did not start: {errors}")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
