"""A simulation's progress in the Prefect UI: the stage's progress artifact, watched on a real
Prefect server while ``maestro stage simulate`` runs, moves through intermediate values to 100."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.flows.prefect_server import LocalPrefectServer
from maestro.flows.progress import progress_key
from tests.prefect_api import prefect_api as call_api

MAESTRO = str(Path(sys.executable).with_name("maestro"))


@pytest.fixture
def prefect_api(tmp_path: Path) -> Iterator[str]:
    with LocalPrefectServer(tmp_path / "prefect") as server:
        yield server.api_url


def artifacts(api_url: str, key: str) -> list[dict[str, Any]]:
    return list(call_api(api_url, "/artifacts/filter", {"artifacts": {"key": {"any_": [key]}}}))


def test_progress_keys_are_what_prefect_accepts() -> None:
    assert progress_key("Nightly-2026.01/02", "simulate", "Hotel_X") == (
        "nightly-2026-01-02-simulate-hotel-x"
    )
    assert len(progress_key("x" * 300)) == 100


def test_the_simulate_stage_shows_its_progress_while_it_runs(
    prefect_api: str, tmp_path: Path
) -> None:
    key = progress_key("prog", "simulate", "hotel")
    seen: list[tuple[float, str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            for a in artifacts(prefect_api, key):
                if not seen or seen[-1] != (a["data"], a["description"]):
                    seen.append((a["data"], a["description"]))

    # ~0.3 s an episode (six calls at 50 ms), one at a time: the stage lasts a few seconds.
    with ScriptedServer(ServerConfig(mode="oracle", latency_s=0.05)) as llm:
        env = {
            **os.environ,
            "PREFECT_API_URL": prefect_api,
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "MAESTRO_LAKE_ROOT": str(tmp_path / "lake"),
            "MAESTRO_RAY_WORKERS": "0",
        }
        for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
            env[f"MAESTRO_{role}__BASE_URL"] = llm.base_url
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        args = ["--run-id", "prog", "--domain", "hotel", "--tasks-per-domain", "12"]
        proc = subprocess.run(
            [MAESTRO, "stage", "simulate", *args, "--concurrency", "1", "--no-judge"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        done.set()
        watcher.join(timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [artifact] = artifacts(prefect_api, key)
    assert artifact["type"] == "progress" and artifact["task_run_id"]  # the simulate task's
    assert artifact["data"] == 100.0
    values = [v for v, _ in seen]
    assert values == sorted(values) and values[-1] == 100.0
    assert any(0.0 < v < 100.0 for v in values), seen  # it moved while the stage ran
    assert "hotel: **12 / 12** episodes; pass rate so far **1.000**" in artifact["description"]
