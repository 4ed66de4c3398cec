"""The data stage's contract: what the LLM writes (seed records and value vocabularies), how it
is checked, and how the host grows it into a database of real size around the clock.

The LLM writes a few seed records per main table and, for each of their text fields, a list of
realistic values; a catalog it writes whole (``catalog_size`` records), and the host never grows
it. The host grows each main table to ``main_size`` (``growth.py``): every new record copies a
seed's statuses, flags and nulls (so an open slot keeps no patient, a delivered order keeps its
delivery date), points its references at existing records, shifts the seed's dates together by
a random number of days inside each field's window (so a delivery stays after its order), draws
numbers near the seed's or inside the declared range, and draws text from the vocabulary
(people's names recombined, emails made from the names, the digits of a phone or street number
taken already redrawn). Keys continue the table's prefix (``PA1001``, ``PA1002``...). The
natural identifiers a lookup matches on stay unique.

Every check here says what is wrong and where, for the data stage's next attempt: values that
do not fit the types, dates outside their window, references to no record, placeholders
(``gate.py``), vocabularies too short, and tables where no record meets an operation's
preconditions (the task walks would find nothing to do).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from maestro.agents.codegen.blueprint import Blueprint, Entity, FieldType
from maestro.agents.codegen.conditions import all_hold, check_words, record_params, rooted_at
from maestro.agents.codegen.gate import placeholder_problems, repeated_problem

JSONRecord = dict[str, Any]
Database = dict[str, dict[str, JSONRecord]]
#: Days a date without a window may move when a record is grown from a seed.
_FREE_SHIFT = 365
#: A window this wide (a date of birth) moves on its own, not with the record's events.
_WIDE_WINDOW = 730
_EMAIL_DOMAINS = ("gmail.com", "outlook.com", "yahoo.com", "icloud.com")


class DataLimits(BaseModel):
    """How much the LLM writes and how far the host grows it."""

    #: Seed records the LLM writes per table (at least this many must be valid).
    seeds: int = 4
    #: Distinct values the LLM lists per text field.
    values: int = 10
    main_size: int = 100
    catalog_size: int = 10
    #: Records that must meet each write operation's preconditions after growth.
    coverage: int = 3


# ----- the answer's shape -----------------------------------------------------------------------


class _StrictRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def _python_type(ftype: FieldType) -> Any:
    if ftype.base == "enum":
        base: Any = Literal[ftype.choices]
    else:
        base = {"int": int, "float": float, "bool": bool}.get(ftype.base, str)
    return base | None if ftype.nullable else base


def record_type(entity: Entity) -> type[BaseModel]:
    """A strict pydantic type for one entity's records as JSON (dates as ISO strings)."""
    fields: dict[str, Any] = {entity.key: (str, ...)}
    for name, ftype in entity.field_types().items():
        fields[name] = (_python_type(ftype), ...)
    return create_model(entity.name, __base__=_StrictRecord, **fields)


def text_fields(entity: Entity) -> list[str]:
    """The entity's text fields."""
    return [f for f, t in entity.field_types().items() if t.base == "str"]


def vocabulary_fields(entity: Entity) -> list[str]:
    """The text fields grown records draw from a vocabulary: a main table's. A catalog is
    written whole and never grown, so a plan's name and its numbers stay one item's."""
    return [] if entity.catalog else text_fields(entity)


def data_answer_model(bp: Blueprint, limits: DataLimits | None = None) -> type[BaseModel]:
    """The data stage's answer: ``{"records": {table: [record]}, "values": {table: {field:
    [text]}}}``, each table's records typed by its entity (the schema sent to the model).

    With ``limits``, each list is bounded: at least what the stage needs (``seeds`` records,
    ``values`` values) and at most what the prompt asks for plus as many again (at least 4 more:
    the prompt asks for 4 to 8 seeds). Decoded under a grammar, an
    answer then has to close its lists: the embedded model once wrote one list on to its token
    cap (6,144 tokens), so the answer never parsed.
    """

    def bounded(item: Any, least: int, asked: int) -> Any:
        if limits is None:
            return list[item]
        return Annotated[list[item], Field(min_length=least, max_length=asked + max(4, asked))]

    seeds, n = (limits.seeds, limits.values) if limits else (0, 0)
    records: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for e in bp.entities:
        asked = limits.catalog_size if limits and e.catalog else seeds
        records[e.table] = (bounded(record_type(e), seeds, asked), ...)
        fields: dict[str, Any] = {f: (bounded(str, n, n), ...) for f in vocabulary_fields(e)}
        values[e.table] = (create_model(f"{e.name}Values", __base__=_StrictRecord, **fields), ...)
    return create_model(
        "DataAnswer",
        __base__=_StrictRecord,
        records=(create_model("Records", __base__=_StrictRecord, **records), ...),
        values=(create_model("Values", __base__=_StrictRecord, **values), ...),
    )


@dataclass
class SeedData:
    """The LLM's records that passed every check, and each text field's vocabulary."""

    records: Database = field(default_factory=dict)
    values: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: Records left out, and why (kept in the stage's event; not fatal while enough remain).
    dropped: list[str] = field(default_factory=list)


class DataError(ValueError):
    """An answer the data stage cannot use; the message lists what to fix."""


def parse_data(bp: Blueprint, raw: Any, limits: DataLimits) -> SeedData:
    """The seeds and vocabularies of an answer; :class:`DataError` naming every problem."""
    if not isinstance(raw, dict):
        raise DataError(f"the answer must be a JSON object, not {type(raw).__name__}")
    problems: list[str] = []
    unknown = sorted(set(raw) - {"records", "values"})
    if unknown:
        problems.append(f'unknown top-level keys {unknown}: the answer has "records" and "values"')
    records, values = raw.get("records"), raw.get("values")
    if not isinstance(records, dict):
        raise DataError('"records" must be an object of tables, each a list of records')
    if not isinstance(values, dict):
        values = {}
        problems.append('"values" must be an object: {table: {text field: [values]}}')
    problems += [
        f"unknown table {t!r}" for t in sorted(set(records) - {e.table for e in bp.entities})
    ]
    out = SeedData()
    for e in bp.entities:
        rows = records.get(e.table)
        out.records[e.table] = _valid_rows(bp, e, rows, out.dropped)
    _drop_dangling(bp, out)
    for e in bp.entities:
        kept = len(out.records[e.table])
        if kept < limits.seeds:
            problems.append(
                f"{e.table}: {kept} valid record(s), {limits.seeds} needed"
                + (
                    f" ({'; '.join(d for d in out.dropped if d.startswith(e.table))[:600]})"
                    if out.dropped
                    else ""
                )
            )
        problems += _uniqueness_problems(bp, e, out.records[e.table])
        listed = values.get(e.table)
        given: dict[str, Any] = listed if isinstance(listed, dict) else {}
        out.values[e.table] = {}
        for f in text_fields(e):
            asked = f in vocabulary_fields(e)
            out.values[e.table][f], found = _vocabulary(
                e, f, given.get(f) if asked else [], out.records[e.table], limits, asked=asked
            )
            problems += found
    if problems:
        raise DataError("; ".join(problems))
    return out


def _valid_rows(bp: Blueprint, e: Entity, rows: Any, dropped: list[str]) -> dict[str, JSONRecord]:
    model = record_type(e)
    types = e.field_types()
    kept: dict[str, JSONRecord] = {}
    if isinstance(rows, dict):
        rows = list(rows.values())
    if not isinstance(rows, list):
        dropped.append(f"{e.table}: expected a list of records")
        return kept
    key_shape = re.compile(rf"^{e.prefix}\d+$")
    for i, row in enumerate(rows):
        where = f"{e.table}[{i}]"
        try:
            rec = model.model_validate(row).model_dump(mode="json")
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            dropped.append(f"{where}.{loc}: {first['msg']}")
            continue
        key = rec[e.key]
        problem = None
        if not key_shape.match(key):
            problem = f"key {key!r} is not {e.prefix} and digits, like {e.prefix}1001"
        elif key in kept:
            problem = f"key {key!r} repeats"
        for fname, ftype in types.items():
            if problem:
                break
            if not ftype.accepts(rec[fname]):
                shape = "YYYY-MM-DD" if ftype.base == "date" else "YYYY-MM-DDTHH:MM:SS"
                problem = f"{fname} {rec[fname]!r} is not a {ftype.base} written {shape}"
            else:
                bounds = ftype.bounds_problem(rec[fname], bp.clock)
                problem = f"{fname} {bounds}" if bounds else None
        if problem:
            dropped.append(f"{where}: {problem}")
            continue
        kept[key] = rec
    return kept


def _drop_dangling(bp: Blueprint, data: SeedData) -> None:
    """Records whose references name no record are dropped (a null reference is kept)."""
    changed = True
    while changed:  # dropping one record can leave another dangling
        changed = False
        for e in bp.entities:
            for key, rec in list(data.records[e.table].items()):
                for fname, ftype in e.field_types().items():
                    target = ftype.ref
                    value = rec[fname]
                    if target and value is not None and value not in data.records[target]:
                        keys = sorted(data.records[target])
                        data.dropped.append(
                            f"{e.table}/{key}.{fname}: {value!r} is not a key of {target} "
                            f"({', '.join(keys[:6]) or 'none'})"
                        )
                        del data.records[e.table][key]
                        changed = True
                        break


def _uniqueness_problems(bp: Blueprint, e: Entity, rows: dict[str, JSONRecord]) -> list[str]:
    out = []
    for fields in unique_fields(bp, e):
        seen: dict[tuple[Any, ...], str] = {}
        for key, rec in rows.items():
            combo = tuple(rec[f] for f in fields)
            if combo in seen:
                out.append(
                    f"{e.table}: {seen[combo]} and {key} share {dict(zip(fields, combo, strict=True))}; "
                    "a lookup needs them to tell one record"
                )
            seen[combo] = key
    return out


def unique_fields(bp: Blueprint, e: Entity) -> list[tuple[str, ...]]:
    """Field combinations that name one record: each lookup's ``by``, and email fields."""
    combos = {tuple(op.by) for op in bp.operations if op.kind == "lookup" and op.table == e.table}
    combos |= {(f,) for f in text_fields(e) if "email" in f}
    return sorted(combos)


def _vocabulary(
    e: Entity,
    fname: str,
    given: Any,
    rows: dict[str, JSONRecord],
    limits: DataLimits,
    *,
    asked: bool = True,
) -> tuple[list[str], list[str]]:
    """The field's distinct values (the seeds' and the listed, when a list was ``asked``), and
    the problems found."""
    where = f"values.{e.table}.{fname}"
    listed = [v for v in given if isinstance(v, str)] if isinstance(given, list) else []
    seeded = [rec[fname] for rec in rows.values() if isinstance(rec[fname], str)]
    problems = placeholder_problems(
        e.table, fname, [(f"{e.table}.{fname}", v) for v in seeded] + [(where, v) for v in listed]
    )
    repeated = repeated_problem(e.table, fname, seeded)
    if repeated:
        problems.append(repeated)
    distinct = list(dict.fromkeys(v.strip() for v in seeded + listed if v.strip()))
    if asked and len(dict.fromkeys(listed)) < limits.values:
        problems.append(
            f"{where}: {len(set(listed))} distinct value(s), {limits.values} needed "
            "(realistic, all different)"
        )
    return distinct, problems


# ----- checks on the grown database -------------------------------------------------------------


def database_problems(bp: Blueprint, db: Database) -> list[str]:
    """Placeholders anywhere in the database (what growth made included)."""
    out: list[str] = []
    for e in bp.entities:
        for fname in text_fields(e):
            pairs = (
                (f"{e.table}/{k}.{fname}", r[fname])
                for k, r in db[e.table].items()
                if isinstance(r[fname], str)
            )
            out += placeholder_problems(e.table, fname, pairs, limit=2)
    return out


def coverage_problems(bp: Blueprint, db: Database, limits: DataLimits) -> list[str]:
    """Write operations and agent rules no record allows: the tasks would find nothing to do.

    Counted per record parameter, over the conditions on that record alone (conditions that
    compare with another parameter are left to the walks)."""
    out = []
    for op in bp.operations:
        if op.tool_kind != "write":
            continue
        for param, table in record_params(bp, op).items():
            own = rooted_at(bp, op, op.requires, param)
            ok = list(_meeting(bp, op, own, param, table, db))
            need = min(limits.coverage, len(db[table]))
            if len(ok) < need:
                out.append(_coverage_line(bp, op, own, table, len(ok), need, "its checks"))
                continue
            for rule in bp.agent_rules_of(op.name):
                extra = rooted_at(bp, op, rule.refuse_when, param)
                if extra and not any(all_hold(bp, op, extra, {param: k}, db, bp.clock) for k in ok):
                    out.append(
                        _coverage_line(
                            bp, op, own + extra, table, 0, 1, f"the agent rule {rule.rule!r}"
                        )
                    )
    return out


def _meeting(
    bp: Blueprint, op: Any, conditions: list[Any], param: str, table: str, db: Database
) -> Iterator[str]:
    for key in sorted(db[table]):
        if all_hold(bp, op, conditions, {param: key}, db, bp.clock):
            yield key


def _coverage_line(
    bp: Blueprint, op: Any, conditions: list[Any], table: str, found: int, need: int, what: str
) -> str:
    words = "; ".join(check_words(bp, op, c) for c in conditions) or "it exists"
    return (
        f"{table}: {found} record(s) meet {op.name}'s {what} ({words}), {need} needed: grown "
        "records copy a seed's statuses and nulls and move its dates together inside their "
        "windows, so give seeds that meet them"
    )


def clock_date(bp: Blueprint) -> date:
    return bp.clock.date()
