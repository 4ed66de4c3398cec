"""One Prefect API for every maestro command of a project.

A command runs its flows against, in this order:

1. ``PREFECT_API_URL``, when it is set;
2. else the project's server, when one is running: its address is in ``<home>/server.json``
   (home: ``PREFECT_HOME``, by default ``runs/prefect``), and it is alive while the process
   that runs it holds ``<home>/server.lock``;
3. else a server started now on the project's home, which later commands find there while it
   runs.

One server per home at a time: two servers on one SQLite database is what filled a training
run's log with SQLAlchemy errors from Prefect's own services. A server lives while some command
uses it: each command holds a shared lock on ``<home>/users.lock`` (the kernel drops it when the
command ends, SIGKILL included), and the process that runs the server (``python -m
maestro.flows.prefect_home HOME``, detached from the command that started it) stops it once no
command has held that lock for ``linger_s`` (30 s by default, so back-to-back commands share
one server). ``maestro ui`` is one more user that holds on until interrupted.
``<home>/start.lock`` serialises finding, starting and stopping a server, so a command never
joins a server that is stopping, and two commands never start two.

This module imports no Prefect: the environment must be set before Prefect is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from maestro.flows.prefect_server import LocalPrefectServer, free_port
from maestro.settings import RunSettings

ADDRESS_FILE = "server.json"
SERVER_LOCK = "server.lock"
USERS_LOCK = "users.lock"
START_LOCK = "start.lock"
SUPERVISOR_LOG = "supervisor.log"

Source = Literal["configured", "project", "started"]


class PrefectHomeError(RuntimeError):
    """The project's Prefect server could not be found or started; the message says why."""


@dataclass(frozen=True)
class ServerAddress:
    """What ``server.json`` holds: where the server answers, and who runs it."""

    api_url: str
    ui_url: str
    pid: int


@dataclass
class PrefectAPI:
    """The API a command's flows go to, and where it came from."""

    api_url: str
    #: The UI's address; None for a configured ``PREFECT_API_URL``.
    ui_url: str | None
    source: Source
    home: Path
    startup_timeout_s: float = 120.0

    def wait_ready(self) -> None:
        """Wait until the project's server answers (a configured API is not checked: Prefect
        reports its own errors); raise with the server's log if it stops or never answers."""
        if self.source == "configured":
            return
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if _healthy(self.api_url):
                return
            if running_server(self.home) is None:
                break
            time.sleep(0.25)
        raise PrefectHomeError(
            f"the Prefect server of {self.home} did not answer at {self.api_url}:\n"
            + _tail(self.home / "server.log")
            + _tail(self.home / SUPERVISOR_LOG)
        )


def project_home() -> Path:
    """The project's Prefect home: ``PREFECT_HOME``, else ``prefect`` in the run folder
    (``MAESTRO_RUN_DIR``), as an absolute path."""
    home = os.environ.get("PREFECT_HOME")
    return (Path(home) if home else RunSettings().prefect_home).expanduser().resolve()


def running_server(home: Path) -> ServerAddress | None:
    """The address of the server running on ``home``, or None when none is (a ``server.json``
    left by a server that died is ignored: its process no longer holds the server lock)."""
    address = _read_address(home)
    if address is None or not _locked_by_someone(home / SERVER_LOCK):
        return None
    return address


class PrefectHomeSettings(BaseSettings):
    """How a server started for the project behaves (``MAESTRO_PREFECT_*``)."""

    model_config = SettingsConfigDict(env_prefix="MAESTRO_PREFECT_", extra="ignore")

    #: How long a server stays up after its last command ends, for the next one to find.
    linger_s: float = Field(30.0, ge=0)
    #: How long a server may take to answer (a busy 2-core machine needs over 20 s at times).
    startup_timeout_s: float = Field(120.0, gt=0)


@contextlib.contextmanager
def use_prefect_api(
    home: Path | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    settings: PrefectHomeSettings | None = None,
) -> Iterator[PrefectAPI]:
    """Point this process's Prefect at the project's API (see the module's docstring) for the
    length of the block, setting ``PREFECT_API_URL`` and ``PREFECT_UI_URL``.

    Returns at once; call :meth:`PrefectAPI.wait_ready` before the first flow, so a server's
    start overlaps the caller's own start-up work. ``host``, ``port`` and ``settings`` apply
    only to a server started here. Enter before Prefect is imported.
    """
    settings = settings or PrefectHomeSettings()
    linger_s, startup_timeout_s = settings.linger_s, settings.startup_timeout_s
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        yield PrefectAPI(configured, None, "configured", project_home())
        return
    home = (home or project_home()).resolve()
    home.mkdir(parents=True, exist_ok=True)
    users = os.open(home / USERS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with _flock(home / START_LOCK, startup_timeout_s):
            address = running_server(home)
            # Taken while holding the start lock, so the server cannot stop in between.
            fcntl.flock(users, fcntl.LOCK_SH)
            source: Source = "project"
            if address is None:
                address = _spawn(home, host, port, linger_s, startup_timeout_s)
                source = "started"
        saved = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_UI_URL")}
        os.environ["PREFECT_API_URL"] = address.api_url
        os.environ["PREFECT_UI_URL"] = address.ui_url  # links in logs and artifacts
        try:
            yield PrefectAPI(address.api_url, address.ui_url, source, home, startup_timeout_s)
        finally:
            send_pending_logs()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    finally:
        os.close(users)  # releases this command's hold on the server


def send_pending_logs(timeout_s: float = 15.0) -> None:
    """Send this process's queued Prefect logs and events while the server still answers;
    Prefect sends them at exit otherwise, perhaps after the server stopped, and retries for
    about 70 s."""
    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        service.drain_all(timeout=timeout_s, at_exit=False)


# ----- the server's process -----------------------------------------------------------------


def supervise(
    home: Path, host: str, port: int, linger_s: float, startup_timeout_s: float = 120.0
) -> int:
    """Run the Prefect server of ``home`` until no command has used it for ``linger_s`` (or
    SIGTERM); the exit status says how it ended."""
    lock = os.open(home / SERVER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another process runs the Prefect server of {home}", file=sys.stderr)
        return 3
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    # The server inherits the lock, so the home counts as taken until the server has exited.
    server = LocalPrefectServer(home, host, port, startup_timeout_s, keep_fds=(lock,)).launch()
    me = ServerAddress(server.api_url, server.url, os.getpid())
    _write_address(home, me)
    try:
        try:
            server.wait_ready()
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        idle_since: float | None = None
        while not stop.wait(0.5):
            if server.proc is not None and server.proc.poll() is not None:
                print(f"the Prefect server exited ({server.proc.returncode})", file=sys.stderr)
                return 1
            if _locked_by_someone(home / USERS_LOCK):
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since < linger_s:
                continue
            # Decided under the start lock: a command that came in meanwhile holds on by now.
            with _flock(home / START_LOCK, 60.0):
                if not _locked_by_someone(home / USERS_LOCK):
                    _let_go(home, me, server)
                    return 0
            idle_since = None
        return 0
    finally:
        # Under the start lock: a command either found this server before it began to stop,
        # or finds no server and starts one once this one has let go of the home.
        with _flock(home / START_LOCK, 60.0):
            _let_go(home, me, server)
        os.close(lock)


def _let_go(home: Path, me: ServerAddress, server: LocalPrefectServer) -> None:
    if _read_address(home) == me:
        (home / ADDRESS_FILE).unlink(missing_ok=True)
    server.stop()


def _spawn(
    home: Path, host: str, port: int, linger_s: float, startup_timeout_s: float
) -> ServerAddress:
    """Start the server's process, detached from this one; return its address once it holds
    the home (the server itself is still starting)."""
    port = port or free_port(host)
    cmd = [
        sys.executable,
        "-m",
        "maestro.flows.prefect_home",
        str(home),
        f"--host={host}",
        f"--port={port}",
        f"--linger-s={linger_s}",
        f"--startup-timeout-s={startup_timeout_s}",
    ]
    with (home / SUPERVISOR_LOG).open("ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal ends the command, not the server
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        address = _read_address(home)
        if address is not None and address.pid == proc.pid:
            return address
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
    raise PrefectHomeError(
        f"could not start a Prefect server on {home} (port {port}):\n"
        + _tail(home / SUPERVISOR_LOG)
    )


# ----- files and locks ------------------------------------------------------------------------


def _read_address(home: Path) -> ServerAddress | None:
    try:
        data = json.loads((home / ADDRESS_FILE).read_text())
        return ServerAddress(str(data["api_url"]), str(data["ui_url"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_address(home: Path, address: ServerAddress) -> None:
    tmp = home / f".{ADDRESS_FILE}.{os.getpid()}"
    tmp.write_text(
        json.dumps({"api_url": address.api_url, "ui_url": address.ui_url, "pid": address.pid})
    )
    os.replace(tmp, home / ADDRESS_FILE)


def _locked_by_someone(path: Path) -> bool:
    """Whether another open file holds a lock on ``path`` (probed without waiting)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock, if it got one
    return False


@contextlib.contextmanager
def _flock(path: Path, timeout_s: float) -> Iterator[None]:
    """An exclusive lock on ``path``, waited for at most ``timeout_s``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise PrefectHomeError(
                        f"{path} stayed locked for {timeout_s:g} s (a maestro command or "
                        "Prefect server of this project is stuck starting or stopping)"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as resp:
            return bool(resp.read().strip() == b"true")
    except OSError:
        return False


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a maestro project's Prefect server.")
    parser.add_argument("home", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--linger-s", type=float, default=PrefectHomeSettings().linger_s)
    parser.add_argument("--startup-timeout-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    return supervise(args.home, args.host, args.port, args.linger_s, args.startup_timeout_s)


if __name__ == "__main__":
    raise SystemExit(main())
