"""The table catalog as Markdown, generated from the schemas (docs/tables.md is its output)."""

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
        "Generated from `maestro/storage/schemas.py` by `python -m maestro.storage.catalog`; a test keeps",
        "this page equal to the schemas. Every table lives under the lake root (`MAESTRO_LAKE_ROOT`, default",
        "`runs/lake`; `s3://bucket/prefix` on a cluster), one Delta table per folder. Every row carries the",
        "`run_id` that wrote it and `written_at`; writes merge on the keys, so re-running a run never",
        'duplicates a row. Query them with `maestro query "SQL"` or `Lake().read(name)` (a polars LazyFrame).',
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
