"""Conditions on a table's columns, for typed reads and deletes (``Lake.rows``, ``Lake.delete``).

A condition is a value (the column equals it), ``OneOf(values)`` or ``NoneOf(values)``. Column
names are checked against the row model, so a misspelt column is an error that names the table,
not an empty result.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from maestro.storage.errors import StorageError
from maestro.storage.rows import Row


@dataclass(frozen=True)
class OneOf:
    """The column's value is one of these."""

    values: Collection[Any]


@dataclass(frozen=True)
class NoneOf:
    """The column's value is none of these (null counts as none of them)."""

    values: Collection[Any]


def check_columns(row: type[Row], names: Collection[str]) -> None:
    unknown = sorted(set(names) - set(row.model_fields))
    if unknown:
        raise StorageError(
            f"{row.TABLE} has no column(s) {unknown}; its columns are {list(row.model_fields)}"
        )


def expression(row: type[Row], where: Mapping[str, Any]) -> pl.Expr | None:
    """The conditions as one polars filter; None when there are none."""
    check_columns(row, where)
    parts = []
    for name, cond in where.items():
        col = pl.col(name)
        if isinstance(cond, OneOf):
            parts.append(col.is_in(list(cond.values)))
        elif isinstance(cond, NoneOf):
            parts.append(~col.is_in(list(cond.values)).fill_null(False))
        else:
            parts.append(col == cond)
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def sql_predicate(row: type[Row], where: Mapping[str, Any]) -> str:
    """The conditions as a Delta (DataFusion SQL) predicate, for deletes."""
    check_columns(row, where)
    if not where:
        raise StorageError(f"{row.TABLE}: a delete needs at least one condition")
    parts = []
    for name, cond in where.items():
        if isinstance(cond, OneOf | NoneOf):
            if not cond.values:
                parts.append("false" if isinstance(cond, OneOf) else "true")
                continue
            items = ", ".join(_literal(v) for v in cond.values)
            parts.append(f"{name} {'IN' if isinstance(cond, OneOf) else 'NOT IN'} ({items})")
        else:
            parts.append(f"{name} = {_literal(cond)}")
    return " AND ".join(parts)
