"""From a blueprint to package files, without an LLM: models.py, domain.json, and the database
(LLM-written records validated against the record types, then filled programmatically to size).

Record types for validation are built with ``pydantic.create_model`` from the blueprint, so the
host never imports the generated ``models.py``; that runs only in the sandbox.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from maestro.agents.codegen.blueprint import Blueprint, Entity, FieldType

#: The fixed "now" of every synthesized world, so that episodes replay identically.
CLOCK = "2026-01-05T09:00:00"

JSONRecord = dict[str, Any]
Database = dict[str, dict[str, JSONRecord]]

_HEADER = "from typing import Annotated, ClassVar, Literal\n\nfrom maestro.domains.sdk import Record, Ref\n"


def _annotation(ftype: FieldType) -> str:
    if ftype.base == "ref":
        return f"Annotated[str, Ref({ftype.ref!r})]"
    if ftype.base == "enum":
        return "Literal[" + ", ".join(repr(c) for c in ftype.choices) + "]"
    return ftype.base


def models_source(bp: Blueprint) -> str:
    """models.py: one Record class per entity and the TABLES map."""
    parts = [_HEADER]
    for e in bp.entities:
        lines = [f"class {e.name}(Record):", f"    key_field: ClassVar[str] = {e.key!r}"]
        lines.append(f"    {e.key}: str")
        lines += [f"    {n}: {_annotation(t)}" for n, t in e.field_types().items()]
        parts.append("\n".join(lines) + "\n")
    tables = ", ".join(f"{e.table!r}: {e.name}" for e in bp.entities)
    parts.append(f"TABLES = {{{tables}}}\n")
    return "\n\n".join(parts)


def manifest_json(bp: Blueprint, *, domain_id: str, synthesis_id: str, run_id: str | None) -> str:
    """domain.json for a synthesized domain."""
    manifest = {
        "id": domain_id,
        "name": bp.name,
        "version": "0.1.0",
        "description": bp.description,
        "industry": bp.industry,
        "clock": CLOCK,
        "provenance": {
            "source": "synthesized",
            "authors": ["maestro codegen"],
            "created": datetime.now(UTC).date().isoformat(),
            "run_id": run_id,
            "notes": f"synthesis {synthesis_id}",
        },
    }
    return json.dumps(manifest, indent=2) + "\n"


def _python_type(ftype: FieldType) -> Any:
    if ftype.base == "enum":
        return Literal[ftype.choices]
    return {"str": str, "ref": str, "int": int, "float": float, "bool": bool}[ftype.base]


class _StrictRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def record_type(entity: Entity) -> type[BaseModel]:
    """A pydantic type for one entity's records (strict: no silent coercion of LLM output)."""
    fields: dict[str, Any] = {entity.key: (str, ...)}
    for name, ftype in entity.field_types().items():
        fields[name] = (_python_type(ftype), ...)
    return create_model(entity.name, __base__=_StrictRecord, **fields)


def validate_records(bp: Blueprint, raw: Any) -> tuple[Database, list[str]]:
    """The LLM's records that fit the models (references checked later), and why others don't."""
    db: Database = {e.table: {} for e in bp.entities}
    problems: list[str] = []
    if not isinstance(raw, dict):
        return db, [f"expected a JSON object of tables, got {type(raw).__name__}"]
    for table in raw:
        if table not in db:
            problems.append(f"unknown table {table!r}; tables are {sorted(db)}")
    for e in bp.entities:
        rows = raw.get(e.table) or []
        if isinstance(rows, dict):
            rows = list(rows.values())
        model = record_type(e)
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            try:
                rec = model.model_validate(row).model_dump(mode="json")
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"])
                problems.append(f"{e.table}[{i}].{loc}: {first['msg']}")
                continue
            key = rec[e.key]
            if key in db[e.table]:
                problems.append(f"{e.table}[{i}]: key {key!r} repeats")
                continue
            db[e.table][key] = rec
    return db, problems


def _value(ftype: FieldType, field: str, i: int, rng: random.Random, keys: list[str]) -> Any:
    if ftype.base == "enum":
        return ftype.choices[i % len(ftype.choices)]
    if ftype.base == "ref":
        return keys[i % len(keys)]
    if ftype.base == "int":
        return rng.randint(1, 20)
    if ftype.base == "float":
        return round(rng.uniform(5, 500), 2)
    if ftype.base == "bool":
        return i % 2 == 0
    return f"{field.replace('_', ' ')} {i + 1}"


def _order(bp: Blueprint) -> list[Entity]:
    """Entities with referenced tables first, so references can point at existing keys."""
    done: list[Entity] = []
    pending = list(bp.entities)
    while pending:
        ready = [
            e
            for e in pending
            if all(
                t.ref in {d.table for d in done} or t.ref == e.table
                for t in e.field_types().values()
                if t.ref is not None
            )
        ] or pending[:1]  # a cycle: start anywhere, the fix-up pass points refs at real keys
        done.append(ready[0])
        pending.remove(ready[0])
    return done


def fill_database(bp: Blueprint, db: Database, *, size: int, seed: int = 0) -> list[str]:
    """Add records until each table has ``size``, and point dangling references at real keys.

    Returns a note per reference repaired, for the stage's event.
    """
    rng = random.Random(seed)
    notes: list[str] = []
    for e in _order(bp):
        rows = db.setdefault(e.table, {})
        i = 0
        while len(rows) < size:
            key = f"{e.prefix}{1001 + i}"
            i += 1
            if key in rows:
                continue
            rec: JSONRecord = {e.key: key}
            for name, ftype in e.field_types().items():
                targets = sorted(db.get(ftype.ref, {})) if ftype.ref else []
                rec[name] = _value(ftype, name, len(rows), rng, targets or [key])
            rows[key] = rec
    for e in bp.entities:
        for key, rec in db[e.table].items():
            for name, ftype in e.field_types().items():
                if ftype.ref is not None and rec[name] not in db[ftype.ref]:
                    new = sorted(db[ftype.ref])[0]
                    notes.append(f"{e.table}/{key}.{name}: {rec[name]!r} -> {new!r}")
                    rec[name] = new
    return notes


def db_json(db: Database) -> str:
    return json.dumps(db, indent=1, sort_keys=True) + "\n"
