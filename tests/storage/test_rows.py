"""Typed rows: each table's Arrow schema is derived from its row model, every model round-trips
through a real Delta table, and typed reads filter, project and refuse unknown columns."""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from maestro.storage import ROW_MODELS, TABLES, Lake, LakeSettings, NoneOf, OneOf, StorageError
from maestro.storage.rows import STAMP, EpisodeRow, Row, ScoreRow, Struct
from maestro.storage.schemas import table_def

WHEN = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)


def sample(annotation: Any, name: str) -> Any:
    """A value of every column: each table's row filled in, nested structs included."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is not list and len(args) == 1:
        annotation = args[0]
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return [sample(item, name), sample(item, name)]
    if isinstance(annotation, type) and issubclass(annotation, Struct):
        hints = typing.get_type_hints(annotation)
        return annotation(**{f: sample(hints[f], f) for f in annotation.model_fields})
    return {str: f"{name}-value", int: 7, float: 0.25, bool: True, datetime: WHEN}[annotation]


def full_row(model: type[Row], key: str) -> Row:
    hints = typing.get_type_hints(model)
    values = {f: sample(hints[f], f) for f in model.model_fields if f not in STAMP}
    values.update({k: f"{key}-{k}" for k in model.KEYS if k not in STAMP})
    return model(**values)


def test_every_table_has_one_row_model_and_its_schema_is_derived_from_it() -> None:
    assert [m.TABLE for m in ROW_MODELS] == list(TABLES)
    for model in ROW_MODELS:
        t = TABLES[model.TABLE]
        assert t.row is model
        body = [n for n in model.model_fields if n not in STAMP]
        assert t.schema.names == [*body, *STAMP]
        for f in t.schema:
            # Keys and the stamp are never null; every other column may be (old rows lack it).
            assert f.nullable == (f.name not in (*model.KEYS, *STAMP)), (model.TABLE, f.name)


def test_every_row_model_round_trips_through_its_delta_table(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    for model in ROW_MODELS:
        rows = [full_row(model, "a"), full_row(model, "b")]
        lake.write(model.TABLE, rows, "run-1")
        back = sorted(lake.rows(model), key=lambda r: str(r.model_dump(include=set(model.KEYS))))
        assert [r.model_dump(exclude=set(STAMP)) for r in back] == [
            r.model_dump(exclude=set(STAMP)) for r in rows
        ], model.TABLE
        assert {r.run_id for r in back} == {"run-1"}
        assert all(r.written_at is not None for r in back)


def test_a_row_of_another_table_is_refused(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    with pytest.raises(StorageError, match="scores: row 0 is a EpisodeRow, not a ScoreRow"):
        lake.write("scores", [EpisodeRow(episode_id="e1")], "run")


def test_typed_reads_filter_project_and_name_unknown_columns(tmp_path: Path) -> None:
    lake = Lake(LakeSettings(root=str(tmp_path)))
    rows = [
        ScoreRow(episode_id=f"e{i}", domain_id="hotel" if i % 2 else "energy", passed=i < 2)
        for i in range(4)
    ]
    lake.write("scores", rows, "r1")
    lake.write("scores", [ScoreRow(episode_id="e9", domain_id="hotel")], "r2")
    got = lake.rows(ScoreRow, run_id="r1", domain_id="hotel")
    assert sorted(r.episode_id for r in got) == ["e1", "e3"]
    assert sorted(r.episode_id for r in lake.rows(ScoreRow, episode_id=OneOf(["e0", "e9"]))) == [
        "e0",
        "e9",
    ]
    assert len(lake.rows(ScoreRow, run_id="r1", episode_id=NoneOf(["e0"]))) == 3
    assert sorted(lake.values(ScoreRow, "episode_id", passed=True)) == ["e0", "e1"]
    [only] = lake.rows(ScoreRow, fields=["passed"], episode_id="e0")
    assert (only.passed, only.domain_id) == (True, None)  # not read
    assert lake.rows(ScoreRow, at=1, run_id="r2") == []  # version 1: before r2 wrote
    with pytest.raises(StorageError, match=r"scores has no column\(s\) \['colour'\]"):
        lake.rows(ScoreRow, colour="red")
    assert lake.rows(EpisodeRow) == []  # a table never written reads empty


def test_the_derivation_refuses_an_optional_key_and_a_required_column() -> None:
    class OptionalKey(Row):
        """A table whose key may be null."""

        TABLE = "bad"
        KEYS = ("thing_id",)
        thing_id: str | None = None

    class RequiredColumn(Row):
        """A table with a column that may never be missing."""

        TABLE = "bad"
        KEYS = ("thing_id",)
        thing_id: str
        size: int

    with pytest.raises(TypeError, match=r"OptionalKey\.thing_id .* must be a key"):
        table_def(OptionalKey)
    with pytest.raises(TypeError, match=r"RequiredColumn\.size .* must be optional"):
        table_def(RequiredColumn)
