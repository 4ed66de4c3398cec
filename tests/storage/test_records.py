"""Rows built from maestro's objects fit the lake's schemas, and read back as they went in."""

from __future__ import annotations

import asyncio
from pathlib import Path

import polars as pl

from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain, library_path, load_domain
from maestro.scoring import Scorer
from maestro.simulation.runner import BatchConfig, make_jobs, run_batch
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import (
    domain_row,
    episode_id,
    episode_row,
    llm_call_row,
    score_row,
    task_row,
)
from tests.simulation.test_runner import fast_settings, urls


def test_domain_and_task_rows_round_trip(tmp_path: Path) -> None:
    hotel = load_domain(library_path("hotel"))
    lake = Lake(LakeSettings(root=str(tmp_path)))
    lake.write("domains", [domain_row(hotel)], "run")
    lake.write("tasks", [task_row(hotel, t) for t in hotel.tasks], "run")
    d = lake.read("domains").collect().to_dicts()[0]
    assert (d["domain_id"], d["n_tasks"], d["n_tools"]) == ("hotel", 30, len(hotel.toolkit.specs))
    assert d["policy_md"] == (library_path("hotel") / "policy.md").read_text()
    tasks = lake.read("tasks").collect()
    assert tasks.height == 30
    refusals = tasks.filter(pl.col("category") == "refusal")
    assert refusals.height == 5 and refusals["n_gold_actions"].sum() == 0
    from maestro.domains import Task

    assert Task.model_validate_json(
        tasks.filter(pl.col("task_id") == "hotel_007")["task_json"].item()
    ) == hotel.task("hotel_007")


def test_episode_score_and_call_rows_round_trip(tmp_path: Path, toy: Domain) -> None:
    with ScriptedServer(ServerConfig(mode="oracle", domain_paths=[str(toy.path)])) as server:
        batch = asyncio.run(
            run_batch(make_jobs(toy, None, 2), fast_settings(), urls(server), BatchConfig())
        )  # type: ignore[arg-type]
    scorer = Scorer(toy)
    lake = Lake(LakeSettings(root=str(tmp_path)))
    lake.write(
        "episodes",
        [episode_row("r1", e, "0.1.0", "scripted", "scripted") for e in batch.episodes],
        "r1",
    )
    cards = [scorer.score(toy.task(e.task_id), e.trajectory) for e in batch.episodes]
    lake.write(
        "scores",
        [score_row("r1", e, c, "scripted") for e, c in zip(batch.episodes, cards, strict=True)],
        "r1",
    )
    lake.write("llm_calls", [llm_call_row("r1", c) for c in batch.llm_calls], "r1")
    eps = lake.read("episodes").collect()
    assert eps.height == 6
    first = batch.episodes[0]
    row = eps.filter(
        pl.col("episode_id") == episode_id("r1", "toy", first.task_id, first.trial, "scripted")
    ).to_dicts()[0]
    assert [m["role"] for m in row["messages"]] == [m.role for m in first.trajectory.messages]
    assert row["n_tool_calls"] == first.tool_calls
    scores = lake.read("scores").collect()
    assert scores["reward"].to_list() == [1.0] * 6
    refuse = scores.filter(pl.col("task_id") == "toy_refuse")
    assert refuse["pending"].to_list()[0] == ["NL_ASSERTION"] and not refuse["passed"].to_list()[0]
    assert lake.read("llm_calls").collect().height == len(batch.llm_calls)
