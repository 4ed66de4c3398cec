"""A Prefect server in a child process, on a free local port: the API and UI of a nightly run
when no ``PREFECT_API_URL`` is configured, and a standing server for tests and benchmarks."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


class LocalPrefectServer:
    """``prefect server start`` with its own home folder; ``api_url`` once :meth:`start` returns."""

    def __init__(
        self,
        home: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout_s: float = 120.0,
        keep_fds: tuple[int, ...] = (),
    ) -> None:
        self.home = home
        self.host = host
        self.port = port or free_port(host)
        self.startup_timeout_s = startup_timeout_s
        #: Open files the server inherits (a lock that must last as long as the server).
        self.keep_fds = keep_fds
        self.proc: subprocess.Popen[bytes] | None = None
        self._launched = 0.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def start(self) -> LocalPrefectServer:
        """Start the server and wait until its API answers."""
        return self.launch().wait_ready()

    def launch(self) -> LocalPrefectServer:
        """Start the server process without waiting for it (see :meth:`wait_ready`), so the
        caller can do its own start-up work meanwhile."""
        self.home.mkdir(parents=True, exist_ok=True)
        env = {
            # Prefect answers 503 when a query waits past these on its SQLite store's lock,
            # which a loaded machine makes likely at the defaults (10 s and 5 s); the
            # operator's own values, if set, win.
            "PREFECT_API_DATABASE_TIMEOUT": "30",
            "PREFECT_API_DATABASE_CONNECTION_TIMEOUT": "15",
            **os.environ,
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_API_URL": self.api_url,  # the UI's own calls; it assumes port 4200 otherwise
        }
        log = (self.home / "server.log").open("wb")
        cmd = [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            pass_fds=self.keep_fds,
        )
        self._launched = time.monotonic()
        return self

    def wait_ready(self) -> LocalPrefectServer:
        """Wait until the API answers; stop the server and raise, with its log, if it doesn't
        within ``startup_timeout_s`` of its launch."""
        assert self.proc is not None, "launch() first"
        deadline = self._launched + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as resp:
                    if resp.read().strip() == b"true":
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        tail = (self.home / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(
            f"the Prefect server did not start within {self.startup_timeout_s:g} s:\n{tail}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def __enter__(self) -> LocalPrefectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the server's process, before exec: ask Linux to end it when the thread that started it
    dies, so a killed run (SIGKILL included) leaves no server behind. (Start it from the main
    thread.) Elsewhere the server outlives a
    killed parent, as Prefect's own ephemeral server does."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port(host: str) -> int:
    """A port free on ``host`` now (another process may take it before it is used)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
