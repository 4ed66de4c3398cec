"""One Prefect API for every command of a project: PREFECT_API_URL, else the project's server
(``maestro ui``, or the first command's), else one started for the command; two commands and
``maestro ui`` at once, on one server, with no database errors; and no server left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.flows.prefect_home import (
    ADDRESS_FILE,
    SERVER_LOCK,
    running_server,
    use_prefect_api,
)
from maestro.flows.prefect_server import free_port
from tests.prefect_api import prefect_api

MAESTRO = str(Path(sys.executable).with_name("maestro"))
#: What two servers on one SQLite database, or a server stopped under a command, look like.
DATABASE_TROUBLE = re.compile(
    r"sqlalchemy|database is locked|OperationalError|IntegrityError|Traceback|"
    r"Error logging to API|Failed to|ConnectError",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def oracle() -> Iterator[ScriptedServer]:
    with ScriptedServer(ServerConfig(mode="oracle")) as server:
        yield server


def env_for(tmp: Path, oracle: ScriptedServer) -> dict[str, str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp / "prefect"),
        "MAESTRO_LAKE_ROOT": str(tmp / "lake"),
        "MAESTRO_RAY_WORKERS": "0",
        "MAESTRO_PREFECT_LINGER_S": "2",  # the tests see the server stop soon after
    }
    env.pop("PREFECT_API_URL", None)
    for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
        env[f"MAESTRO_{role}__BASE_URL"] = oracle.base_url
    return env


def flow_runs(api_url: str) -> dict[str, str]:
    """Flow name -> state of each flow run the server holds."""
    names = {f["id"]: f["name"] for f in prefect_api(api_url, "/flows/filter", {})}
    return {
        str(names[r["flow_id"]]): str(r["state_type"])
        for r in prefect_api(api_url, "/flow_runs/filter", {})
    }


def wait_gone(home: Path, pid: int, timeout_s: float = 60.0) -> None:
    """The home's server stops and its process ends (it lingers 2 s after its last command)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the Prefect server process {pid} of {home} is still running")
    assert running_server(home) is None and not (home / ADDRESS_FILE).exists()


def test_a_configured_api_wins_and_a_dead_servers_address_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://prefect.example:4200/api")
    with use_prefect_api(tmp_path / "home") as found:
        assert (found.source, found.api_url) == ("configured", "http://prefect.example:4200/api")
    assert not (tmp_path / "home").exists()  # nothing started, nothing written
    # An address left by a server that died: its process no longer holds the server lock.
    home = tmp_path / "stale"
    home.mkdir()
    (home / ADDRESS_FILE).write_text(
        json.dumps({"api_url": "http://127.0.0.1:9/api", "ui_url": "http://127.0.0.1:9", "pid": 1})
    )
    (home / SERVER_LOCK).touch()
    assert running_server(home) is None


def test_two_commands_and_maestro_ui_at_once_share_one_server_without_database_errors(
    tmp_path: Path, oracle: ScriptedServer
) -> None:
    env = env_for(tmp_path, oracle)
    home = tmp_path / "prefect"
    port = free_port("127.0.0.1")
    ui = subprocess.Popen(
        [MAESTRO, "ui", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert ui.stdout is not None
        line = ui.stdout.readline()  # printed once the server answers
        assert f"Prefect UI: http://127.0.0.1:{port}" in line, line + (ui.stderr or "")
        server = running_server(home)
        assert server is not None and server.api_url == f"http://127.0.0.1:{port}/api"
        commands = {
            "nightly": ["nightly", "--run-id", "both", "--domain", "hotel", "--synthesize", "0"],
            "simulate": ["simulate", "--domain", "hotel", "--tasks", "hotel_001", "--trials", "2"],
        }
        procs = {
            name: subprocess.Popen(
                [MAESTRO, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for name, args in commands.items()
        }
        outputs = {name: p.communicate(timeout=600) for name, p in procs.items()}
        for name, p in procs.items():
            out, err = outputs[name]
            assert p.returncode == 0, (name, err[-3000:])
            assert f"Prefect UI for this run: http://127.0.0.1:{port} (the project's server)" in err
            assert not DATABASE_TROUBLE.search(out + err), (name, err[-3000:])
        runs = flow_runs(server.api_url)
        assert runs == {"maestro-nightly": "COMPLETED", "maestro-simulate-domain": "COMPLETED"}
        assert not DATABASE_TROUBLE.search((home / "server.log").read_text())
        assert running_server(home) == server  # maestro ui still holds it
    finally:
        ui.send_signal(signal.SIGINT)
        ui.wait(timeout=30)
    assert ui.returncode == 0
    wait_gone(home, server.pid)


def test_without_ui_the_first_command_starts_the_server_and_the_second_joins_it(
    tmp_path: Path, oracle: ScriptedServer
) -> None:
    env = env_for(tmp_path, oracle)
    home = tmp_path / "prefect"
    args = ["stage", "ingest", "--domain", "hotel"]
    procs = [
        subprocess.Popen(
            [MAESTRO, *args, "--run-id", run_id],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in ("first", "second")
    ]
    deadline = time.monotonic() + 60
    while (server := running_server(home)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server is not None
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert server.ui_url in err and not DATABASE_TROUBLE.search(err), err[-3000:]
        errs.append(err)
    # One started it ("while it lasts"), the other found it.
    assert sorted("(the project's server)" in e for e in errs) == [False, True]
    wait_gone(home, server.pid)
    log = (home / "server.log").read_text()
    assert not DATABASE_TROUBLE.search(log)


def test_a_killed_command_leaves_no_server_behind(tmp_path: Path) -> None:
    home = tmp_path / "prefect"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from maestro.flows.prefect_home import use_prefect_api\n"
            f"with use_prefect_api(Path({str(home)!r})) as api:\n"
            "    api.wait_ready()\n"
            "    print(api.api_url, flush=True)\n"
            "    time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"},
            "MAESTRO_PREFECT_LINGER_S": "2",
        },
    )
    try:
        assert holder.stdout is not None
        url = holder.stdout.readline().strip()
        server = running_server(home)
        assert server is not None and server.api_url == url
    finally:
        holder.kill()  # SIGKILL: no clean-up code of its own runs
        holder.wait(timeout=30)
    wait_gone(home, server.pid)
