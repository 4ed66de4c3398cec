"""Every lake table's Arrow schema and keys, derived from its row model (``rows.py``).

Messages and tool calls are nested ``list<struct>`` columns, so a data scientist can query into
them (``explode``, ``unnest``) instead of parsing JSON strings. Every row carries the ``run_id``
that wrote it and ``written_at``, the last two columns.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from maestro.storage.rows import ROW_MODELS, STAMP, Row, Struct


@dataclass(frozen=True)
class TableDef:
    name: str
    keys: tuple[str, ...]
    schema: pa.Schema
    description: str
    row: type[Row]


def timestamp() -> pa.DataType:
    return pa.timestamp("us", tz="UTC")


_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: timestamp(),
}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The type inside ``X | None``, and whether None was allowed."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"a column has one type, not {annotation!r}")
        return args[0], True
    return annotation, False


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a row model field's Python type."""
    inner, _ = _unwrap(annotation)
    if typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        return pa.list_(arrow_type(item))
    if isinstance(inner, type) and issubclass(inner, Struct):
        return pa.struct(_fields(inner, nested=True))
    try:
        return _SCALARS[inner]
    except KeyError:
        raise TypeError(f"no Arrow type for {inner!r}") from None


def _fields(model: type[BaseModel], *, nested: bool) -> list[pa.Field]:
    hints = typing.get_type_hints(model)
    out = []
    for name in model.model_fields:
        if not nested and name in STAMP:
            continue
        annotation = hints[name]
        _, optional = _unwrap(annotation)
        out.append(pa.field(name, arrow_type(annotation), nullable=nested or optional))
    return out


def table_def(row: type[Row]) -> TableDef:
    """The table of a row model: non-key columns optional, the stamp last."""
    hints = typing.get_type_hints(row)
    body = _fields(row, nested=False)
    stamp = [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("written_at", timestamp(), nullable=False),
    ]
    schema = pa.schema([*body, *stamp])
    for f in body:
        if f.nullable == (f.name in row.KEYS):
            kind = "a key, so it cannot be optional" if f.name in row.KEYS else "optional"
            raise TypeError(f"{row.__name__}.{f.name} ({hints[f.name]}) must be {kind}")
    missing = [k for k in row.KEYS if k not in schema.names]
    if missing:
        raise TypeError(f"{row.__name__}: keys {missing} are not columns")
    description = " ".join(inspect.cleandoc(row.__doc__ or "").split())
    return TableDef(row.TABLE, row.KEYS, schema, description, row)


TABLES: Mapping[str, TableDef] = MappingProxyType({r.TABLE: table_def(r) for r in ROW_MODELS})
