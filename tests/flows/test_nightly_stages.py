"""The nightly's optional stages: training on the curated task set (and, with the synthesis
team scripted, new domains synthesized and simulated in the same run)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.storage import Lake, LakeSettings
from tests.flows.test_nightly import env_for, nightly


def test_training_stage_is_off_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from maestro.flows.nightly import train
    from maestro.flows.stages import NightlyParams

    monkeypatch.delenv("MAESTRO_TRAINING__ENABLED", raising=False)
    task_set = {"task_set_id": "nightly/x", "tasks": 3}
    assert train(task_set, [], NightlyParams()) is None


def test_training_stage_runs_on_the_curated_task_set_when_asked(tmp_path: Path) -> None:
    with ScriptedServer(ServerConfig(mode="oracle", latency_s=0.01)) as oracle:
        env = env_for(oracle, tmp_path)
        env["MAESTRO_TRAINING__MAX_STEPS"] = "2"
        common = ["--domain", "hotel", "--tasks-per-domain", "2", "--no-judge", "--json"]
        on = nightly(env, "--run-id", "trained", "--train", "sft", *common, cwd=tmp_path)
        assert on.returncode == 0, on.stderr[-4000:]
    summary = json.loads(on.stdout.strip().splitlines()[-1])
    assert summary["training"] is not None
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    runs = lake.read("training_runs").collect()
    assert runs.height == 1 and runs["method"][0] == "sft" and runs["status"][0] == "succeeded"
    [dataset] = lake.read("datasets").collect().to_dicts()
    # The dataset was built from this run's curated task set, and names its table versions.
    assert dataset["task_set_id"] == "nightly/trained" and dataset["built_from"]
    models = lake.read("models").filter(pl.col("training_run_id") == runs["training_run_id"][0])
    assert models.collect().height == 1
    proc = nightly(env, "--run-id", "x", "--train", "ppo", *common)
    assert proc.returncode == 2 and "train" in proc.stderr


def test_synthesis_stage_adds_new_domains_to_the_run(tmp_path: Path) -> None:
    from maestro.agents.codegen import Brief, SynthesisConfig
    from maestro.flows.synthesis import synthesis_id
    from tests.synthesis import scripted_team as team

    sid = synthesis_id("synth", Brief(text=team.BRIEF))
    with (
        ScriptedServer(ServerConfig(mode="oracle", latency_s=0.01)) as oracle,
        ScriptedServer(ServerConfig(mode="script")) as codegen,
    ):
        team.queue(codegen, sid, team.team_replies())
        team.queue_tasks(codegen, sid, SynthesisConfig())  # the nightly's defaults
        env = env_for(oracle, tmp_path)
        env["MAESTRO_CODEGEN__BASE_URL"] = codegen.base_url
        env["MAESTRO_CODEGEN__MAX_RETRIES"] = "0"
        proc = nightly(
            env,
            "--run-id", "synth", "--domain", "hotel", "--tasks-per-domain", "2",
            "--synthesize", "1", "--brief", team.BRIEF, "--no-judge", "--json",
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert codegen.model.leftovers() == {}
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    new_id = team.domain_id(sid)
    assert summary["synthesis"]["funnel"]["accepted"] == 1
    (row,) = summary["synthesis"]["results"]
    assert row["status"] == "accepted" and row["domain"] == new_id and row["llm_calls"] > 20
    [package] = summary["synthesis"]["packages"]
    assert Path(package).parts[-2:] == ("domains", new_id)
    lake = Lake(LakeSettings(root=str(tmp_path / "lake")))
    episodes = lake.read("episodes").filter(pl.col("run_id") == "synth").collect()
    # The new domain was simulated beside the library's, its tools in the sandbox.
    assert set(episodes["domain_id"]) == {"hotel", new_id}
    verdicts = lake.read("task_verdicts").filter(pl.col("domain_id") == new_id).collect()
    assert verdicts.height == 2
    assert lake.read("blueprints").collect()["status"].to_list() == ["accepted"]
    report = Path(summary["html"]).read_text()
    assert "Synthesis" in report and new_id in report  # the funnel is in the report
