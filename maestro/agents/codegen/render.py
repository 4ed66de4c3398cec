"""From a blueprint to package files, without an LLM: models.py and domain.json.

The host never imports the generated ``models.py``; it runs only in the sandbox (the data stage
validates records with types built from the blueprint, in ``data.py``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from maestro.agents.codegen.blueprint import Blueprint, FieldType
from maestro.agents.codegen.data import Database

_HEADER = (
    "from datetime import date, datetime\n"
    "from typing import Annotated, ClassVar, Literal\n\n"
    "from maestro.domains.sdk import Record, Ref\n"
)


def _annotation(ftype: FieldType) -> str:
    if ftype.base == "ref":
        text = f"Annotated[str, Ref({ftype.ref!r})]"
    elif ftype.base == "enum":
        text = "Literal[" + ", ".join(repr(c) for c in ftype.choices) + "]"
    else:
        text = ftype.base
    return f"{text} | None = None" if ftype.nullable else text


def models_source(bp: Blueprint) -> str:
    """models.py: one Record class per entity and the TABLES map."""
    parts = [_HEADER]
    for e in bp.entities:
        lines = [f"class {e.name}(Record):", f"    key_field: ClassVar[str] = {e.key!r}"]
        lines.append(f"    {e.key}: str")
        types = e.field_types()
        # Required fields first: a nullable field has a default, and may not precede one without.
        ordered = sorted(types.items(), key=lambda kv: kv[1].nullable)
        lines += [f"    {n}: {_annotation(t)}" for n, t in ordered]
        parts.append("\n".join(lines) + "\n")
    tables = ", ".join(f"{e.table!r}: {e.name}" for e in bp.entities)
    parts.append(f"TABLES = {{{tables}}}\n")
    return "\n\n".join(parts)


def manifest_json(bp: Blueprint, *, domain_id: str, synthesis_id: str, run_id: str | None) -> str:
    """domain.json for a synthesized domain; its clock is the blueprint's."""
    manifest = {
        "id": domain_id,
        "name": bp.name,
        "version": "0.1.0",
        "description": bp.description,
        "industry": bp.industry,
        "clock": bp.clock.isoformat(timespec="seconds"),
        "provenance": {
            "source": "synthesized",
            "authors": ["maestro codegen"],
            "created": datetime.now(UTC).date().isoformat(),
            "run_id": run_id,
            "notes": f"synthesis {synthesis_id}",
        },
    }
    return json.dumps(manifest, indent=2) + "\n"


def laws_json(bp: Blueprint) -> str:
    """laws.json: the blueprint's laws, each with its id."""
    rows = []
    for i, law in enumerate(bp.laws):
        spec = law.model_dump(exclude_none=True)
        spec.setdefault("id", f"{law.table}_{i + 1}")
        rows.append(spec)
    return "[\n" + ",\n".join("  " + json.dumps(r) for r in rows) + "\n]\n"


def db_json(db: Database) -> str:
    return json.dumps(db, indent=1, sort_keys=True) + "\n"
