"""The nightly flow run and its artifact, seen in the Prefect UI by headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.flows.prefect_server import LocalPrefectServer

MAESTRO = str(Path(sys.executable).with_name("maestro"))
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1400,1000",
    "--virtual-time-budget=20000",
]


def _api(url: str, path: str, body: dict[str, object] | None = None) -> object:
    req = urllib.request.Request(
        f"{url}/api{path}",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[str]:
    with LocalPrefectServer(tmp_path / "prefect") as server:
        yield server.url


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed (bash scripts/test.sh installs it)"
    return subprocess.run(
        [binary, *CHROME_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_nightly_run_and_its_report_show_in_the_prefect_ui(
    prefect_server: str, tmp_path: Path
) -> None:
    with ScriptedServer(ServerConfig(mode="oracle")) as llm:
        env = {
            **os.environ,
            "MAESTRO_LAKE_ROOT": str(tmp_path / "lake"),
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "PREFECT_API_URL": f"{prefect_server}/api",
        }
        for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
            env[f"MAESTRO_{role}__BASE_URL"] = llm.base_url
        proc = subprocess.run(
            [MAESTRO, "nightly", "--run-id", "browser", "--synthesize", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    [run] = _api(prefect_server, "/flow_runs/filter", {})  # type: ignore[misc]
    artifacts = {a["key"]: a for a in _api(prefect_server, "/artifacts/filter", {})}  # type: ignore[union-attr]
    artifact = artifacts["maestro-nightly-browser"]
    assert artifact["flow_run_id"] == run["id"]

    run_page = chromium(
        "--dump-dom", f"{prefect_server}/runs/flow-run/{run['id']}", profile=tmp_path / "chrome"
    )
    assert run["name"] in run_page.stdout, run_page.stdout[-2000:]
    assert "maestro-nightly" in run_page.stdout
    assert "Completed" in run_page.stdout
    artifact_page = chromium(
        "--dump-dom",
        f"{prefect_server}/artifacts/artifact/{artifact['id']}",
        profile=tmp_path / "chrome",
    )
    assert "maestro nightly" in artifact_page.stdout
    assert (
        "Funnel" in artifact_page.stdout and "pass^k per domain and model" in artifact_page.stdout
    )
    shot = tmp_path / "artifact.png"
    chromium(
        f"--screenshot={shot}",
        f"{prefect_server}/artifacts/artifact/{artifact['id']}",
        profile=tmp_path / "chrome",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
