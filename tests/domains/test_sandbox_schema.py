"""The host's own models, rebuilt from the JSON a sandbox child reports: what the subset accepts
maps to fixed types; anything else, or a description of the wrong shape, is refused with where."""

from __future__ import annotations

import re
import typing
from datetime import date
from typing import Any

import pytest
from pydantic import ValidationError

from maestro.domains import Problem
from maestro.domains.loader import load_db
from maestro.domains.sandbox.description import host_tables, read_description
from maestro.domains.sandbox.schema import (
    MAX_NODES,
    SchemaError,
    params_model,
    record_model,
    without_marks,
)
from maestro.domains.sdk import Ref


def _record(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "title": "Thing",
        "additionalProperties": False,
        "properties": {"thing_id": {"type": "string"}, **properties},
        "required": ["thing_id", *(required or [])],
    }


def test_the_subset_maps_to_fixed_types_with_refs_and_constraints() -> None:
    schema = _record(
        {
            "day": {"type": "string", "format": "date"},
            "owner": {"type": "string", "x-maestro-ref": "owners", "minLength": 2},
            "tags": {"type": "array", "items": {"type": "string", "x-maestro-ref": "tags"}},
            "status": {"enum": ["open", "closed"], "type": "string", "default": "open"},
            "score": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "part": {"$ref": "#/$defs/Part"},
        },
        ["day", "owner"],
    )
    schema["$defs"] = {
        "Part": {
            "type": "object",
            "properties": {"sku": {"type": "string", "x-maestro-ref": "products"}},
            "required": ["sku"],
        }
    }
    model = record_model("Thing", "thing_id", schema)
    fields = model.model_fields
    assert model.__name__ == "Thing" and model.key_field == "thing_id"
    assert fields["day"].annotation is date
    assert fields["owner"].annotation is str and Ref("owners") in fields["owner"].metadata
    item = typing.get_args(fields["tags"].annotation)[0]
    assert typing.get_origin(item) is typing.Annotated and Ref("tags") in item.__metadata__
    assert fields["status"].annotation == typing.Literal["open", "closed"]
    assert fields["status"].default == "open"
    record = model.model_validate(
        {"thing_id": "T1", "day": "2026-01-02", "owner": "O1", "part": {"sku": "P1"}}
    ).model_dump(mode="json")
    assert record["day"] == "2026-01-02" and record["part"] == {"sku": "P1"}
    with pytest.raises(ValidationError):
        model.model_validate({"thing_id": "T1", "day": "x", "owner": "O1"})
    with pytest.raises(ValidationError):
        model.model_validate({"thing_id": "T1", "day": "2026-01-02", "owner": "O", "extra": 1})
    assert "x-maestro-ref" not in str(without_marks(schema))


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        ({"type": "string", "format": "email"}, "properties.x.format: 'email' is not supported"),
        ({"type": "array", "prefixItems": []}, "properties.x: keyword 'prefixItems'"),
        ({"type": "string", "pattern": "a" * 2000}, "pattern must be a string of at most"),
        ({"type": "integer", "minimum": "0"}, "minimum must be a number"),
        ({"type": "string", "pattern": "(?=a)b"}, "look-around, including look-ahead"),
        ({"type": "string", "pattern": "(a"}, 'Field "x": / SchemaError'),
        ({"$ref": "#/$defs/Nope"}, "does not name a definition"),
        ({"$ref": "http://x/schema"}, "does not name a definition"),
        ({"enum": []}, "must list 1 to"),
        ({"enum": [{"a": 1}]}, "dict values are not supported"),
        ({"type": "thing"}, "'thing' is not supported"),
        ({"not": {"type": "string"}}, "keyword 'not' is not supported"),
        ({"type": "object", "properties": {"_secret": {"type": "string"}}}, "cannot be a field"),
        ({"type": "object", "properties": {"model_config": {}}}, "cannot be a field"),
        ({"type": "object", "properties": {"json": {}}}, "cannot be a field"),
        ("not a schema", "not a schema"),
    ],
)
def test_anything_outside_the_subset_is_refused_with_where(prop: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(message)):
        record_model("Thing", "thing_id", _record({"x": prop}))


def test_recursive_and_oversized_schemas_are_refused() -> None:
    recursive = _record({"x": {"$ref": "#/$defs/Node"}})
    recursive["$defs"] = {
        "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
    }
    with pytest.raises(SchemaError, match="recursive types are not supported"):
        record_model("Thing", "thing_id", recursive)
    wide = _record({f"f{i}": {"type": "string"} for i in range(400)})
    wide["$defs"] = {f"D{i}": _record({}) for i in range(MAX_NODES // 2)}
    with pytest.raises(SchemaError):
        record_model("Thing", "thing_id", wide)
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "array", "items": deep}
    with pytest.raises(SchemaError, match="nested over"):
        record_model("Thing", "thing_id", _record({"x": deep}))
    with pytest.raises(SchemaError, match="key field 'nope'"):
        record_model("Thing", "nope", _record({}))


def test_arguments_are_validated_strictly_as_the_runtime_does() -> None:
    params = params_model(
        "find",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"n": {"type": "integer"}, "day": {"type": "string", "format": "date"}},
            "required": ["n"],
        },
    )
    assert params.model_validate_json('{"n": 3, "day": "2026-01-01"}').n == 3  # type: ignore[attr-defined]
    for bad in ('{"n": "3"}', '{"n": 3, "other": 1}', "{}"):
        with pytest.raises(ValidationError):
            params.model_validate_json(bad)


def test_a_description_of_the_wrong_shape_is_a_load_problem() -> None:
    good_table = {
        "name": "things",
        "class_name": "Thing",
        "key_field": "thing_id",
        "record_schema": _record({}),
    }
    tool = {
        "name": "get",
        "kind": "read",
        "description": "Get.",
        "parameters": {"type": "object", "properties": {}},
        "param_names": [],
    }
    base = {"ok": True, "tables": [good_table], "tools": [tool], "problems": [], "seq": 2}
    assert not isinstance(read_description(base), list)
    for change in (
        {"tables": [{**good_table, "name": "things; drop"}]},
        {"tables": [{**good_table, "extra": 1}]},
        {"tools": [{**tool, "kind": "admin"}]},
        {"tools": [{**tool, "name": "x" * 100}]},
        {"tools": []},
        {"ok": "yes"},
        {"problems": [["a", "b"]]},
    ):
        found = read_description({**base, **change})
        assert isinstance(found, list) and "invalid description" in found[0].message, change


def test_the_database_the_child_sends_is_validated_again_by_the_host() -> None:
    description = read_description(
        {
            "ok": True,
            "problems": [],
            "tools": [
                {
                    "name": "get",
                    "kind": "read",
                    "description": "Get.",
                    "parameters": {"type": "object", "properties": {}},
                    "param_names": [],
                }
            ],
            "tables": [
                {
                    "name": "things",
                    "class_name": "Thing",
                    "key_field": "thing_id",
                    "record_schema": _record({"n": {"type": "integer"}}, ["n"]),
                }
            ],
        }
    )
    assert not isinstance(description, list)
    problems: list[Problem] = []
    tables = host_tables(description, problems)
    db = {
        "things": {
            "T1": {"thing_id": "T1", "n": 1},
            "T2": {"thing_id": "T2", "n": "lots"},
            "T3": {"thing_id": "T4", "n": 3},
        },
        "secrets": {"S1": {}},
    }
    state = load_db(db, tables, problems)
    assert state is not None and list(state.keys("things")) == ["T1"]
    where = {(p.file, p.location) for p in problems}
    assert {("db.json", "things/T2.n"), ("db.json", "things/T3"), ("db.json", "secrets")} <= where
