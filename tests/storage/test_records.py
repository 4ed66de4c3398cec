"""Rows built from maestro's objects fit the lake's schemas, and read back as they went in."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from maestro.agents.client import LLMCall
from maestro.agents.scripted_server import ScriptedServer, ServerConfig
from maestro.domains import Domain, library_path, load_domain
from maestro.scoring import Scorer
from maestro.simulation.runner import BatchConfig, make_jobs, run_batch
from maestro.storage import Lake, LakeSettings
from maestro.storage.records import (
    call_rows,
    domain_row,
    episode_id,
    episode_row,
    score_row,
    task_row,
    write_unit_calls,
)
from maestro.storage.rows import LLMCallRow
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
    lake.write("llm_calls", call_rows("r1", batch.llm_calls), "r1")
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


def _call(label: str, second: int, role: str = "assistant") -> LLMCall:
    return LLMCall(
        role=role,
        model="m",
        endpoint="http://x/v1",
        episode=label,
        started_at=datetime(2025, 1, 1, 0, 0, second, tzinfo=UTC),
        latency_s=0.1,
        attempts=1,
    )


def test_a_redone_unit_keeps_only_its_last_attempts_calls(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    first = [_call("d/t/0", s) for s in (1, 2, 3)] + [_call("d/t/1", 4)]
    assert write_unit_calls(lake, "r1", {"d/t/0": None, "d/t/1": None}, first) == 4
    # d/t/0 is redone (its episode row never landed) with two calls instead of three.
    redo = [_call("d/t/0", s, role="user") for s in (8, 9)]
    write_unit_calls(lake, "r1", {"d/t/0": None}, redo)
    calls = lake.rows(LLMCallRow, run_id="r1")
    by_unit = sorted((c.episode, c.call_id, c.role) for c in calls)
    assert by_unit == [
        ("d/t/0", "r1/d/t/0/0", "user"),
        ("d/t/0", "r1/d/t/0/1", "user"),
        ("d/t/1", "r1/d/t/1/0", "assistant"),
    ]
    # The same unit in another run is another unit.
    write_unit_calls(lake, "r2", {"d/t/0": None}, [_call("d/t/0", 1)])
    assert len(lake.rows(LLMCallRow, episode="d/t/0")) == 3
    with pytest.raises(ValueError, match=r"calls of units not being stored: \['d/t/1'\]"):
        write_unit_calls(lake, "r1", {"d/t/0": None}, [_call("d/t/1", 5)])


def test_a_unit_asked_again_after_its_result_was_stored_keeps_both_attempts(
    tmp_path: Path,
) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    write_unit_calls(lake, "r1", {"d/t/review": None}, [_call("d/t/review", s) for s in (1, 2)])
    verdict_at = datetime.now(UTC)  # the verdict that kept the first review's result
    again = [_call("d/t/review", 30)]
    write_unit_calls(lake, "r1", {"d/t/review": verdict_at}, again)
    # Killed before its verdict landed, the second review is asked once more.
    write_unit_calls(lake, "r1", {"d/t/review": verdict_at}, [_call("d/t/review", 40)])
    ids = sorted(c.call_id for c in lake.rows(LLMCallRow))
    assert ids == ["r1/d/t/review/0", "r1/d/t/review/1", "r1/d/t/review/2"]
    [third] = lake.rows(LLMCallRow, call_id="r1/d/t/review/2")
    assert third.started_at == datetime(2025, 1, 1, 0, 0, 40, tzinfo=UTC)
