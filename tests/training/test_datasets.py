"""Datasets from a real lake: SFT, DPO and GRPO rows, lineage, parquet export."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from maestro.agents.roles import Assistant
from maestro.domains import Domain
from maestro.storage import Lake
from maestro.training.datasets import DatasetError, build_dpo, build_grpo, build_sft

from .conftest import TASK_SET


def test_sft_has_successful_episodes_and_gold_paths(toy_lake: Lake, toy: Domain) -> None:
    ds = build_sft(toy_lake, {"toy": toy}, TASK_SET, split=None)
    by_source = sorted((r["source"], r["task_id"]) for r in ds.rows)
    assert by_source == [
        ("episode", "toy_cancel"),
        ("episode", "toy_status"),
        ("gold", "toy_cancel"),
        ("gold", "toy_status"),
    ]
    episode = next(r for r in ds.rows if r["source"] == "episode" and r["task_id"] == "toy_status")
    assert episode["episode_ids"] == ["r1/toy/toy_status/0/scripted"]  # the passing trial
    versions = {v["table"]: v["version"] for v in episode["table_versions"]}
    assert versions == {
        t: toy_lake.version(t) for t in ("task_sets", "tasks", "episodes", "scores")
    }
    roles = [m["role"] for m in episode["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    # Trained on the prompt the assistant is served with.
    assert episode["messages"][0]["content"] == Assistant(None, toy).system  # type: ignore[arg-type]
    call = episode["messages"][2]["tool_calls"][0]["function"]
    assert call["name"] == "get_order" and json.loads(call["arguments"]) == {"order_id": "O2"}
    assert {t["function"]["name"] for t in json.loads(episode["tools"])} >= {"get_order"}


def test_dpo_pairs_share_a_prefix(toy_lake: Lake, toy: Domain) -> None:
    ds = build_dpo(toy_lake, {"toy": toy}, TASK_SET, split=None)
    assert len(ds.rows) == 2
    for row in ds.rows:
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["chosen"] != row["rejected"]
        assert row["chosen"][0]["role"] == row["rejected"][0]["role"] == "assistant"
        good, bad = row["episode_ids"]
        assert good.endswith("/0/scripted") and bad.endswith("/1/scripted")


def test_grpo_prompts_name_the_task_and_its_opening(toy_lake: Lake, toy: Domain) -> None:
    ds = build_grpo(toy_lake, {"toy": toy}, TASK_SET, split=None)
    rows = {r["task_id"]: r for r in ds.rows}
    assert set(rows) == {"toy_cancel", "toy_status"}
    opening = rows["toy_cancel"]["prompt"][1]
    assert opening == {
        "role": "user",
        "content": "You want to cancel order O1.",
        "tool_calls": [],
        "name": "",
    }


def test_export_and_register(toy_lake: Lake, toy: Domain, tmp_path: Path) -> None:
    ds = build_sft(toy_lake, {"toy": toy}, TASK_SET, split=None)
    path = ds.export(tmp_path / "out")
    from datasets import Dataset

    back = Dataset.from_parquet(str(path))
    assert len(back) == len(ds.rows)
    assert back[0]["messages"] == ds.rows[0]["messages"]
    ds.register(toy_lake, "r2", str(path))
    row = toy_lake.read("datasets").collect().row(0, named=True)
    assert row["dataset_id"] == ds.dataset_id and row["n_rows"] == 4 and row["uri"] == str(path)
    assert [v["table"] for v in row["built_from"]] == ["task_sets", "tasks", "episodes", "scores"]


def test_split_filter_and_clear_errors(toy_lake: Lake, toy: Domain) -> None:
    # Toy tasks are all in the test split: a train dataset has nothing to train on.
    with pytest.raises(DatasetError, match="no rows"):
        build_sft(toy_lake, {"toy": toy}, TASK_SET, split="train")
    with pytest.raises(DatasetError, match="'nope' is not in the task_sets"):
        build_sft(toy_lake, {"toy": toy}, "nope")
    with pytest.raises(DatasetError, match=r"not loaded: \['toy'\]"):
        build_grpo(toy_lake, {}, TASK_SET)
    assert toy_lake.read("datasets").collect().filter(pl.col("n_rows") > 0).height == 0
