"""The table catalog as Markdown, generated from the row models (docs/tables.md is its output)."""

from __future__ import annotations

import pyarrow as pa

from maestro.storage.schemas import TABLES


def _type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {_type(f.type)}" for f in t) + ">"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return str(t).replace("large_", "")


def catalog_markdown() -> str:
    lines = [
        "# Table catalog",
        "",
        "Generated from the row models of `maestro/storage/rows.py` (each table's Arrow schema is derived",
        "from its model) by `python -m maestro.storage.catalog`; a test keeps this page equal to them. Every",
        "table lives under the lake root (`MAESTRO_LAKE_ROOT`, default `lake` in the run folder",
        "`MAESTRO_RUN_DIR`, itself `runs` by default; `s3://bucket/prefix` on a cluster), one Delta table per",
        "folder. Every row carries the `run_id` that wrote it and `written_at`;",
        "writes merge on the keys, so re-running a run never duplicates a row. Query them with",
        '`maestro query "SQL"`, `Lake().rows(EpisodeRow, run_id=...)` (typed rows) or `Lake().read(name)`',
        "(a polars LazyFrame).",
        "",
    ]
    for t in TABLES.values():
        lines += [
            f"## {t.name}",
            "",
            t.description,
            "",
            f"Keys: {', '.join(f'`{k}`' for k in t.keys)}",
            "",
        ]
        lines += ["| column | type |", "|---|---|"]
        lines += [f"| `{f.name}` | {_type(f.type)} |" for f in t.schema]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(catalog_markdown(), end="")
