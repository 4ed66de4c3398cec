"""``maestro synthesize`` as a console script, and the synthesis flow, against the scripted
server: a crash and its resumption, rows in the lake, packages the nightly can ingest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from maestro.agents.codegen import SynthesisConfig
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.storage import Lake, LakeSettings
from tests.synthesis import scripted_team as team

MAESTRO = str(Path(sys.executable).with_name("maestro"))
BRIEF = team.BRIEF
#: Fewer tasks than the defaults, to keep these runs short; the options that ask for them.
CONFIG = SynthesisConfig(n_tasks=4, refusals=1, min_tasks=3, cover_operations=False)
SIZES = ("--tasks", "4", "--no-cover-operations", "--refusals", "1", "--min-tasks", "3")


def env_for(server: ScriptedServer, tmp: Path) -> dict[str, str]:
    env = {**os.environ, "MAESTRO_LAKE_ROOT": str(tmp / "lake"), "PREFECT_HOME": str(tmp / "pf")}
    env.pop("PREFECT_API_URL", None)
    # The ephemeral Prefect API starts slowly on a busy two-core machine.
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "180"
    for role in ("ASSISTANT", "USER", "JUDGE", "CODEGEN"):
        env[f"MAESTRO_{role}__BASE_URL"] = server.base_url
        env[f"MAESTRO_{role}__MAX_RETRIES"] = "0"
    return env


def synthesize(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAESTRO, "synthesize", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_cli_crash_then_resume_stores_everything(tmp_path: Path) -> None:
    with ScriptedServer(ServerConfig(mode="script")) as server:
        env = env_for(server, tmp_path)
        replies = team.team_replies()[:-1]  # review unscripted
        team.queue(server, "cli1", replies)
        team.queue_tasks(server, "cli1", CONFIG)
        out = str(tmp_path / "run")
        args = ("--out", out, *SIZES, "--json")
        first = synthesize(
            env, "--brief", BRIEF, "--industry", team.INDUSTRY, "--id", "cli1", *args
        )
        assert first.returncode == 1, first.stderr[-3000:]
        crashed = json.loads(first.stdout.strip().splitlines()[-1])
        assert crashed["status"] == "error" and "stage review crashed" in crashed["reason"]

        team.queue(server, "cli1", [team.OK])
        second = synthesize(env, "--resume", "cli1", *args)
        assert second.returncode == 0, second.stderr[-3000:]
        done = json.loads(second.stdout.strip().splitlines()[-1])
        assert server.model.leftovers() == {}

    assert done["status"] == "accepted" and done["resumed"] is True
    assert done["package"] == f"{out}/domains/{team.domain_id('cli1')}"
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    blueprints = lake.read("blueprints").collect()
    assert blueprints.select("blueprint_id", "status", "domain_id").rows() == [
        ("cli1", "accepted", team.domain_id("cli1"))
    ]
    assert json.loads(blueprints["blueprint_json"][0])["domain_id"] == "ferry_line"
    events = lake.read("synthesis_events").collect()
    assert events.filter(pl.col("outcome") == "error")["stage"].to_list() == ["review"]
    assert events.filter(pl.col("stage") == "review")["outcome"].sort().to_list() == [
        "error",
        "ok",
    ]
    assert events["tokens"].sum() > 0
    domains = lake.read("domains").collect()
    assert domains["domain_id"].to_list() == [team.domain_id("cli1")]
    assert domains["n_tasks"][0] == 7 and "def cancel_booking" in domains["tools_py"][0]
    assert lake.read("tasks").collect().height == 7


def test_cli_needs_a_brief_or_a_known_synthesis(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from maestro.cli.app import app

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, ["synthesize", "--out", str(tmp_path), *args])
        return result.exit_code, result.output

    neither = run()
    unknown = run("--resume", "nope")
    short = run("--brief", "shop")
    assert neither[0] == 2 and "exactly one of --brief and --resume" in neither[1]
    assert unknown[0] == 2 and "no synthesis 'nope' to resume" in unknown[1]
    assert short[0] == 2 and "at least 10 characters" in short[1]


FLOW = """
import json, sys
from maestro.agents.codegen import Brief, SynthesisConfig
from maestro.flows.synthesis import SynthesisParams, synthesis_flow
params = SynthesisParams(
    briefs=[Brief(text=sys.argv[1], industry="transport")], per_night=1,
    config=SynthesisConfig(n_tasks=4, refusals=1, min_tasks=3, cover_operations=False), runs_dir=sys.argv[2],
)
print(json.dumps(synthesis_flow(params, run_id="night1")))
"""


def test_the_flow_synthesizes_tonights_briefs_into_ingestable_packages(tmp_path: Path) -> None:
    from maestro.agents.codegen import Brief
    from maestro.flows.synthesis import synthesis_id

    sid = synthesis_id("night1", Brief(text=BRIEF, industry=team.INDUSTRY))
    with ScriptedServer(ServerConfig(mode="script")) as server:
        team.queue(server, sid, team.team_replies())
        team.queue_tasks(server, sid, CONFIG)
        proc = subprocess.run(
            [sys.executable, "-c", FLOW, BRIEF, str(tmp_path / "runs")],
            env=env_for(server, tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        server.assert_done()
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["funnel"] == {
        "briefs": 1,
        "accepted": 1,
        "rejected": 0,
        "error": 0,
        "skipped": 0,
    }
    package = tmp_path / "runs" / "night1" / "domains" / team.domain_id(sid)
    assert summary["packages"] == [str(package)]
    assert sorted(p.name for p in package.iterdir()) == [
        "db.json",
        "domain.json",
        "laws.json",
        "models.py",
        "policy.md",
        "tasks.jsonl",
        "tools.py",
    ]
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    domains = lake.read("domains").collect()
    assert domains["run_id"].to_list() == ["night1"]
    assert domains["n_laws"].to_list() == [len(team.BLUEPRINT["laws"])]
    assert domains["laws_json"].to_list() == [(package / "laws.json").read_text()]
    assert lake.read("blueprints").collect()["status"].to_list() == ["accepted"]


def _finished_data(checkpoints: Path, sid: str) -> bool:
    from langgraph.checkpoint.sqlite import SqliteSaver

    if not checkpoints.is_file():
        return False
    with SqliteSaver.from_conn_string(str(checkpoints)) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": sid}})
    return found is not None and "db.json" in found.checkpoint["channel_values"].get("files", {})


def test_a_killed_synthesis_resumes_without_redoing_finished_stages(tmp_path: Path) -> None:
    with ScriptedServer(ServerConfig(mode="script", latency_s=1.5)) as server:
        env = env_for(server, tmp_path)
        team.queue(server, "kill", team.team_replies())
        scripted = team.queue_tasks(server, "kill", CONFIG)
        out = tmp_path / "run"
        args = ("--out", str(out), *SIZES, "--no-lake", "--json")
        proc = subprocess.Popen(
            [MAESTRO, "synthesize", "--brief", BRIEF, "--id", "kill", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        checkpoints = out / "synthesis" / "kill" / "checkpoints.sqlite"
        deadline = time.monotonic() + 120
        while not _finished_data(checkpoints, "kill") and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # while the first tool's request waits on the server
        proc.wait(timeout=30)
        assert server.model.stats.calls["codegen"] == 2

        resumed = synthesize(env, "--resume", "kill", *args)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        server.assert_done()
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "accepted" and result["resumed"] is True
    assert [s["stage"] for s in result["stages"]][:2] == ["blueprint", "data"]
    calls = (
        1 + 1 + len(team.BLUEPRINT["operations"]) + 1 + 1
    )  # blueprint, data, tools, policy, review
    assert server.model.stats.calls["codegen"] == calls + scripted  # nothing asked twice
