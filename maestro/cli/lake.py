"""``maestro tables`` and ``maestro query``: what is in the lake, and SQL over it."""

from __future__ import annotations

import json

import polars as pl
import typer
from rich.table import Table

from maestro.cli.inputs import lake_or_exit, seconds
from maestro.cli.output import console, echo
from maestro.storage import QueryLimits, QueryRefused, StorageError


def tables(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every lake table with its rows, files and latest version."""
    lake = lake_or_exit()
    infos = lake.tables()
    if as_json:
        echo(
            json.dumps(
                [
                    {"table": i.name, "version": i.version, "rows": i.rows, "files": i.files}
                    for i in infos
                ]
            )
        )
        return
    table = Table("table", "version", "rows", "files", "holds", title=f"lake: {lake.root}")
    for i in infos:
        table.add_row(
            i.name,
            "-" if i.version is None else str(i.version),
            str(i.rows),
            str(i.files),
            i.description,
        )
    console().print(table)


def query(
    sql: str = typer.Argument(
        ...,
        help="One query over the lake's tables (polars SQL), e.g. 'select count(*) from "
        "episodes'. Files, URLs and table functions are refused.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON."),
    limit: int = typer.Option(50, min=1, max=1_000_000, help="Rows shown in the table view."),
    timeout_s: float | None = typer.Option(
        None,
        parser=seconds,
        help="Stop the query after this many seconds (default: MAESTRO_LAKE_QUERY_TIMEOUT_S, 20).",
    ),
    memory_mb: int | None = typer.Option(
        None,
        min=64,
        max=1024 * 1024,
        help="MiB of memory the query may use (default: MAESTRO_LAKE_QUERY_MEMORY_MB, 1024).",
    ),
    result_mb: int | None = typer.Option(
        None,
        min=1,
        max=64 * 1024,
        help="MiB of result the query may return (default: MAESTRO_LAKE_QUERY_RESULT_MB, 64).",
    ),
) -> None:
    """Run one SQL query over the lake's tables (and nothing else), bounded in time and memory."""
    lake = lake_or_exit()
    try:
        limits = QueryLimits(
            timeout_s or lake.settings.query_timeout_s,
            memory_mb or lake.settings.query_memory_mb,
            result_mb or lake.settings.query_result_mb,
        )
        df = lake.query(sql, limits)
    except QueryRefused as exc:
        echo(f"error: query refused: {exc}", err=True)
        raise typer.Exit(2) from None
    except StorageError as exc:
        echo(str(exc), err=True)
        raise typer.Exit(1) from None
    if as_json:
        echo(json.dumps(df.to_dicts(), default=str))
        return
    with pl.Config(tbl_rows=limit, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200):
        echo(str(df.head(limit)))
    if df.height > limit:
        echo(f"({df.height} rows, {limit} shown; --limit or --json for more)")
