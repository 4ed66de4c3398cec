"""The lake on real Delta tables in temporary folders, and on a local S3 server (moto)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from maestro.storage import TABLES, Lake, LakeSettings, StorageError


def episodes(n: int, start: int = 0, termination: str = "user_stop") -> list[dict[str, Any]]:
    return [
        {
            "episode_id": f"e{i}",
            "domain_id": "hotel" if i % 2 else "energy",
            "task_id": f"t{i % 3}",
            "trial": i,
            "termination": termination,
            "messages": [
                {"role": "user", "content": "Cancel R1.", "tool_calls": []},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "name": "cancel", "arguments": '{"id": "R1"}'}],
                },
                {
                    "role": "tool",
                    "content": "ok",
                    "tool_calls": [],
                    "tool_call_id": "c1",
                    "status": "ok",
                },
            ],
        }
        for i in range(start, start + n)
    ]


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(LakeSettings(root=str(tmp_path / "lake")))


def test_every_design_table_is_declared_once() -> None:
    assert set(TABLES) == {
        "blueprints", "domains", "tasks", "synthesis_events", "episodes", "scores", "task_verdicts",
        "task_sets", "datasets", "training_runs", "models", "evaluations", "llm_calls", "annotations",
    }  # fmt: skip
    for t in TABLES.values():
        assert {"run_id", "written_at"} <= set(t.schema.names)
        assert t.keys and t.description


def test_writes_are_idempotent_merges_on_the_keys(lake: Lake) -> None:
    first = lake.write("episodes", episodes(4), "run-a")
    assert (first.version, first.inserted) == (1, 4)  # version 0 is the empty table's creation
    again = lake.write("episodes", episodes(4), "run-a")
    assert (again.inserted, again.updated) == (0, 4)
    changed = lake.write(
        "episodes", episodes(2, termination="deadline") + episodes(1, start=9), "run-b"
    )
    assert (changed.inserted, changed.updated) == (1, 2)
    df = lake.read("episodes").sort("episode_id").collect()
    assert df["episode_id"].to_list() == ["e0", "e1", "e2", "e3", "e9"]
    assert df.filter(pl.col("episode_id") == "e0")["termination"].item() == "deadline"
    assert df.filter(pl.col("episode_id") == "e0")["run_id"].item() == "run-b"
    assert df["written_at"].null_count() == 0


def test_insert_mode_keeps_what_was_stored(lake: Lake) -> None:
    lake.write("episodes", episodes(2), "run-a")
    result = lake.write("episodes", episodes(3, termination="deadline"), "run-b", mode="insert")
    assert (result.inserted, result.updated) == (1, 0)
    df = lake.read("episodes").sort("episode_id").collect()
    assert df["termination"].to_list() == ["user_stop", "user_stop", "deadline"]


def test_duplicate_keys_in_one_batch_keep_the_last_row(lake: Lake) -> None:
    rows = episodes(1) + episodes(1, termination="max_turns")
    lake.write("episodes", rows, "run")
    assert lake.read("episodes").collect()["termination"].to_list() == ["max_turns"]


def test_bad_rows_get_clear_errors_and_nothing_is_written(lake: Lake) -> None:
    with pytest.raises(StorageError, match="unknown table 'episode'"):
        lake.write("episode", episodes(1), "run")
    with pytest.raises(
        StorageError, match=r"row 1 has no value for key column\(s\) \['episode_id'\]"
    ):
        lake.write("episodes", [*episodes(1), {"domain_id": "x"}], "run")
    with pytest.raises(StorageError, match=r"unknown column\(s\) \['colour'\]"):
        lake.write("episodes", [{**episodes(1)[0], "colour": "red"}], "run")
    with pytest.raises(StorageError, match="episodes: rows do not fit the schema"):
        lake.write("episodes", [{**episodes(1)[0], "trial": "first"}], "run")
    with pytest.raises(StorageError, match="needs a run id"):
        lake.write("episodes", episodes(1), "")
    assert lake.version("episodes") is None


def test_nested_messages_are_queryable_without_parsing_json(lake: Lake) -> None:
    lake.write("episodes", episodes(3), "run")
    calls = (
        lake.read("episodes")
        .explode("messages")
        .unnest("messages")
        .explode("tool_calls")
        .filter(pl.col("tool_calls").is_not_null())
        .select("episode_id", pl.col("tool_calls").struct.field("name"))
        .collect()
    )
    assert calls["name"].to_list() == ["cancel"] * 3


def test_time_travel_history_and_compaction(lake: Lake) -> None:
    for i in range(4):
        lake.write("episodes", episodes(1, start=i), f"run-{i}")
    assert lake.version("episodes") == 4  # version 0 created the empty table
    assert lake.read("episodes", version=2).collect().height == 2
    assert lake.read("episodes", version=0).collect().height == 0
    history = lake.history("episodes")
    assert [h["version"] for h in history] == [4, 3, 2, 1, 0]
    assert [h["run_id"] for h in history] == ["run-3", "run-2", "run-1", "run-0", "run-0"]
    assert [h["operation"] for h in history][-1] == "CREATE TABLE"
    info = {t.name: t for t in lake.tables()}["episodes"]
    assert (info.rows, info.files, info.version) == (4, 4, 4)
    result = lake.compact("episodes")
    assert result["files_merged"] == 4 and result["files_added"] == 1
    assert {t.name: t for t in lake.tables()}["episodes"].files == 1
    assert lake.read("episodes").collect().height == 4
    assert lake.read("episodes", version=2).collect().height == 2  # older versions still readable
    with pytest.raises(StorageError, match="never been written"):
        lake.read("scores", version=0)


def test_sql_over_all_tables(lake: Lake) -> None:
    lake.write("episodes", episodes(6), "run")
    lake.write(
        "scores",
        [
            {
                "episode_id": f"e{i}",
                "domain_id": "hotel" if i % 2 else "energy",
                "reward": float(i % 2),
                "passed": bool(i % 2),
            }
            for i in range(6)
        ],
        "run",
    )
    df = lake.query(
        "select e.domain_id, avg(s.reward) as pass_rate, count(*) as n from episodes e join scores s "
        "on e.episode_id = s.episode_id group by e.domain_id order by e.domain_id"
    )
    assert df.to_dicts() == [
        {"domain_id": "energy", "pass_rate": 0.0, "n": 3},
        {"domain_id": "hotel", "pass_rate": 1.0, "n": 3},
    ]
    assert (
        lake.query("select count(*) as n from annotations").item() == 0
    )  # empty tables are queryable
    with pytest.raises(StorageError, match="query failed"):
        lake.query("select nope from episodes")


def _writer(root: str, start: int, n: int, batches: int) -> None:
    lake = Lake(LakeSettings(root=root))
    for b in range(batches):
        lake.write("episodes", episodes(n, start=start + b * n), f"writer-{start}")


def test_two_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    root = str(tmp_path / "lake")
    ctx = multiprocessing.get_context("spawn")  # deltalake's runtime does not survive fork
    procs = [ctx.Process(target=_writer, args=(root, start, 5, 6)) for start in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    df = Lake(LakeSettings(root=root)).read("episodes").collect()
    assert df.height == 60
    assert df["episode_id"].n_unique() == 60


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="maestro-lake")
    yield {"endpoint": endpoint}
    server.stop()


def _s3_settings(endpoint: str, prefix: str) -> LakeSettings:
    return LakeSettings(
        root=f"s3://maestro-lake/{prefix}",
        s3_endpoint_url=endpoint,
        s3_access_key_id="test",
        s3_secret_access_key="test",  # type: ignore[arg-type]
        s3_allow_http=True,
    )


def test_the_lake_on_s3(s3: dict[str, str]) -> None:
    lake = Lake(_s3_settings(s3["endpoint"], "single"))
    lake.write("episodes", episodes(3), "run-a")
    lake.write("episodes", episodes(2, termination="deadline"), "run-b")
    df = lake.read("episodes").sort("episode_id").collect()
    assert df["termination"].to_list() == ["deadline", "deadline", "user_stop"]
    assert lake.read("episodes", version=1).collect().height == 3
    assert lake.query("select count(*) as n from episodes").item() == 3


def _s3_writer(endpoint: str, start: int) -> None:
    lake = Lake(_s3_settings(endpoint, "shared"))
    for b in range(5):
        lake.write("episodes", episodes(4, start=start + b * 4), f"writer-{start}")


def test_two_writers_at_once_on_s3_lose_nothing(s3: dict[str, str]) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_s3_writer, args=(s3["endpoint"], start)) for start in (0, 1000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    df = Lake(_s3_settings(s3["endpoint"], "shared")).read("episodes").collect()
    assert df.height == 40
    assert df["episode_id"].n_unique() == 40


def test_the_table_catalog_page_matches_the_schemas() -> None:
    from maestro.storage.catalog import catalog_markdown

    page = Path(__file__).parents[2] / "docs" / "tables.md"
    assert page.read_text() == catalog_markdown(), (
        "regenerate: python -m maestro.storage.catalog > docs/tables.md"
    )


def _same_rows_writer(root: str, run_id: str, barrier: Any) -> None:
    lake = Lake(LakeSettings(root=root))
    barrier.wait(timeout=60)
    lake.write(
        "domains",
        [{"domain_id": d, "version": "1.0.0", "name": d} for d in ("a", "b", "c")],
        run_id,
    )


def test_writers_creating_a_table_at_once_store_each_key_once(tmp_path: Path) -> None:
    # Regression: the first write used to create the table with its rows; two writers doing it
    # at once both committed (one as an append) and the table held every row twice.
    root = str(tmp_path / "lake")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = [
        ctx.Process(target=_same_rows_writer, args=(root, f"run-{i}", barrier)) for i in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    df = Lake(LakeSettings(root=root)).read("domains").collect()
    assert sorted(df["domain_id"].to_list()) == ["a", "b", "c"]


def test_a_table_written_by_an_older_schema_gains_the_new_columns(lake: Lake) -> None:
    """A lake from before a column was added keeps its rows; the next write adds the column."""
    from deltalake import DeltaTable, write_deltalake

    schema = TABLES["task_verdicts"].schema
    old = schema.remove(schema.get_field_index("review_cause"))
    old = old.remove(old.get_field_index("duplicate_of"))
    DeltaTable.create(lake.uri("task_verdicts"), schema=old)
    stored = lake.to_arrow("task_verdicts", [{"domain_id": "d", "task_id": "t0"}], "old-run")
    write_deltalake(
        lake.uri("task_verdicts"), stored.drop(["review_cause", "duplicate_of"]), mode="append"
    )
    new = [{"domain_id": "d", "task_id": "t1", "review_cause": "task_defect"}]
    result = lake.write("task_verdicts", new, "new-run")
    assert result.inserted == 1
    df = lake.read("task_verdicts").sort("task_id").collect()
    assert df["task_id"].to_list() == ["t0", "t1"]
    assert df["review_cause"].to_list() == [None, "task_defect"]
    assert df["run_id"].to_list() == ["old-run", "new-run"]
