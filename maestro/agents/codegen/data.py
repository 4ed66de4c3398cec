"""The data stage's checks on a generated world (``generator.py`` runs the model's program).

Records are made as records, from the records they reference; the host then checks what no
program should be trusted with: every value inside its field's range or window, every
reference naming a record, no placeholder, the natural identifiers a lookup matches on unique,
every law kept by every record, each enum value's share where the blueprint asks for one, enough
records in every table, and enough records for every write operation and agent rule to be
tested and asked for. Each problem says how many records and shows a few, for the stage's next
attempt.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from maestro.agents.codegen.blueprint import Blueprint, Entity, FieldType
from maestro.agents.codegen.conditions import (
    all_hold,
    check_words,
    record_params,
    rooted_at,
    shapes,
)
from maestro.agents.codegen.gate import placeholder_problems, repeated_problem
from maestro.domains.laws import LawCheck, check_laws, compile_law, mapping_view

JSONRecord = dict[str, Any]
Database = dict[str, dict[str, JSONRecord]]
#: Examples shown per problem.
EXAMPLES = 3
#: How far a share may stray from what the blueprint asks, in percentage points (or two
#: records' worth, in a small table).
SHARE_TOLERANCE = 5.0


def share_tolerance(n: int) -> float:
    """How many percentage points a share of a table of ``n`` records may stray (the data
    prompt states it, ``share_problems`` holds the data to it)."""
    return max(SHARE_TOLERANCE, 200.0 / n) if n else SHARE_TOLERANCE


class DataLimits(BaseModel):
    """How much data the stage makes."""

    main_size: int = 100
    catalog_size: int = 10
    #: Records that must meet each write operation's preconditions.
    coverage: int = 3
    #: Fewest records a main table may hold (a table of one record per parent may hold fewer
    #: than ``main_size``, never fewer than this).
    least: int = 10


class DataError(ValueError):
    """Data the stage cannot use; the message lists what to fix."""


def text_fields(entity: Entity) -> list[str]:
    """The entity's text fields."""
    return [f for f, t in entity.field_types().items() if t.base == "str"]


def unique_fields(bp: Blueprint, e: Entity) -> list[tuple[str, ...]]:
    """Field combinations that name one record: each lookup's ``by``, and email fields."""
    combos = {tuple(op.by) for op in bp.operations if op.kind == "lookup" and op.table == e.table}
    combos |= {(f,) for f in text_fields(e) if "email" in f}
    return sorted(combos)


def _counted(what: str, found: list[str], total: int) -> str:
    shown = "; ".join(found[:EXAMPLES])
    return f"{what}: {len(found)} of {total} record(s), such as {shown}"


# ----- the checks -------------------------------------------------------------------------------


def field_problems(bp: Blueprint, db: Database) -> list[str]:
    """Values outside their types, ranges or windows, and references to no record."""
    out = []
    for e in bp.entities:
        rows = db.get(e.table, {})
        declared = {e.key, *e.fields}
        extra = [
            f"{e.table}/{k} holds {sorted(set(r) - declared)}"
            for k, r in rows.items()
            if set(r) - declared
        ]
        if extra:
            out.append(_counted(f"{e.table}: fields the table does not have", extra, len(rows)))
        for fname, ftype in e.field_types().items():
            wrong: list[str] = []
            for key, rec in rows.items():
                value = rec.get(fname)
                problem = _value_problem(bp, ftype, value, db)
                if problem:
                    wrong.append(f"{e.table}/{key}.{fname} {problem}")
            if wrong:
                out.append(
                    _counted(f"{e.table}.{fname} ({ftype.describe(bp.clock)})", wrong, len(rows))
                )
    return out


def _value_problem(bp: Blueprint, ftype: FieldType, value: Any, db: Database) -> str | None:
    if not ftype.accepts(value):
        return f"is {value!r}, not a {ftype.describe(bp.clock)}"
    bounds = ftype.bounds_problem(value, bp.clock)
    if bounds:
        return bounds
    if ftype.ref and value is not None and value not in db.get(ftype.ref, {}):
        return f"is {value!r}, which names no {ftype.ref} record"
    return None


def size_problems(bp: Blueprint, db: Database, limits: DataLimits) -> list[str]:
    out = []
    for e in bp.entities:
        n = len(db.get(e.table, {}))
        need = min(limits.catalog_size if e.catalog else limits.least, limits.main_size)
        need = min(need, 3) if e.catalog else need
        if n < need:
            out.append(
                f"{e.table}: {n} record(s); make_{e.table} must give at least {need} "
                f"(up to {limits.catalog_size if e.catalog else limits.main_size})"
            )
    return out


def uniqueness_problems(bp: Blueprint, db: Database) -> list[str]:
    out = []
    for e in bp.entities:
        for fields in unique_fields(bp, e):
            seen: dict[tuple[Any, ...], str] = {}
            clashes = []
            for key, rec in db.get(e.table, {}).items():
                combo = tuple(rec.get(f) for f in fields)
                if combo in seen:
                    clashes.append(
                        f"{seen[combo]} and {key} share {dict(zip(fields, combo, strict=True))}"
                    )
                seen.setdefault(combo, key)
            if clashes:
                out.append(
                    f"{e.table}: {len(clashes)} pair(s) of records share {list(fields)}, which a "
                    f"lookup needs to tell one record, such as {'; '.join(clashes[:EXAMPLES])}"
                )
    return out


def database_problems(bp: Blueprint, db: Database) -> list[str]:
    """Placeholders anywhere in the database, and one value in most records of a text field."""
    out: list[str] = []
    for e in bp.entities:
        rows = db.get(e.table, {})
        for fname in text_fields(e):
            pairs = [
                (f"{e.table}/{k}.{fname}", r[fname])
                for k, r in rows.items()
                if isinstance(r.get(fname), str)
            ]
            out += placeholder_problems(e.table, fname, pairs, limit=2)
            if not e.catalog:
                repeated = repeated_problem(e.table, fname, [v for _, v in pairs], at_least=10)
                if repeated:
                    out.append(repeated)
    return out


def _law_check(bp: Blueprint, db: Database) -> LawCheck:
    """The blueprint's laws checked on every record of ``db``."""
    tables = shapes(bp)
    laws = [compile_law(spec, tables, i) for i, spec in enumerate(bp.laws)]
    get, rows = mapping_view(db)
    return check_laws(laws, tables, get, rows, bp.clock)


def law_problems(bp: Blueprint, db: Database) -> list[str]:
    """Every law broken, with how many records break it and a few of them."""
    return _law_check(bp, db).lines() if bp.laws else []


def law_report_lines(bp: Blueprint, db: Database) -> list[str]:
    """Each law with how many records it was checked on and broken by (the review's view)."""
    if not bp.laws:
        return []
    report = _law_check(bp, db).report()
    return [
        f"{r['says']} [{r['law']}] on {r['table']}: checked on {r['checked']} records, broken by {r['broken']}"
        for r in report
    ]


def share_problems(bp: Blueprint, db: Database) -> list[str]:
    """Enum fields whose values' shares stray from what the blueprint asks."""
    out = []
    for e in bp.entities:
        rows = db.get(e.table, {})
        n = len(rows)
        if not n:
            continue
        for fname, wanted in e.shares.items():
            counts = Counter(r.get(fname) for r in rows.values())
            tolerance = share_tolerance(n)
            off = []
            for value, pct in wanted.items():
                got = 100.0 * counts.get(value, 0) / n
                if abs(got - pct) > tolerance:
                    off.append(f"{value!r} {got:.0f}% (asked {pct:g}%)")
            if off:
                out.append(
                    f"{e.table}.{fname} shares stray more than {tolerance:.0f} points: "
                    + ", ".join(off)
                )
    return out


def coverage_problems(bp: Blueprint, db: Database, limits: DataLimits) -> list[str]:
    """Write operations and agent rules no record allows: the tasks would find nothing to do.

    Counted per record parameter, over the checks on that record alone (checks that read
    another parameter are left to the walks)."""
    out = []
    for op in bp.operations:
        if op.tool_kind != "write":
            continue
        for param, table in record_params(bp, op).items():
            own = rooted_at(bp, op, op.requires, param)
            ok = list(_meeting(bp, op, own, param, table, db))
            need = min(limits.coverage, len(db.get(table, {})))
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
    for key in sorted(db.get(table, {})):
        if all_hold(bp, op, conditions, {param: key}, db, bp.clock):
            yield key


def _coverage_line(
    bp: Blueprint, op: Any, conditions: list[Any], table: str, found: int, need: int, what: str
) -> str:
    words = "; ".join(check_words(bp, op, c) for c in conditions) or "it exists"
    return (
        f"{table}: {found} record(s) meet {op.name}'s {what} ({words}), {need} needed: make "
        "records of every kind the operations need"
    )


def world_problems(bp: Blueprint, db: Database, limits: DataLimits) -> list[str]:
    """Everything the host finds wrong with a generated world (the data stage's error)."""
    problems = field_problems(bp, db) + size_problems(bp, db, limits)
    if problems:
        return problems  # the other checks read references and sizes
    problems += uniqueness_problems(bp, db) + database_problems(bp, db)
    problems += law_problems(bp, db) + share_problems(bp, db)
    problems += coverage_problems(bp, db, limits)
    return problems


def world_sample(
    bp: Blueprint, db: Database, n: int = 20, seed: int = 0
) -> dict[str, list[JSONRecord]]:
    """``n`` records of each table, with the records they refer to (what a reviewer reads)."""
    import random

    rng = random.Random(seed)
    chosen: dict[str, dict[str, JSONRecord]] = {}
    for e in bp.entities:
        keys = sorted(db.get(e.table, {}))
        picked = keys if len(keys) <= n else sorted(rng.sample(keys, n))
        chosen[e.table] = {k: db[e.table][k] for k in picked}
    grew = True
    while grew:  # a record added for its referrer brings its own references too
        grew = False
        for e in bp.entities:
            for rec in list(chosen[e.table].values()):
                for fname, ftype in e.field_types().items():
                    value = rec.get(fname)
                    target = chosen.get(ftype.ref or "")
                    known = db.get(str(ftype.ref), {})
                    if (
                        target is not None
                        and isinstance(value, str)
                        and value not in target
                        and value in known
                    ):
                        target[value] = known[value]
                        grew = True
    return {t: [rows[k] for k in sorted(rows)] for t, rows in chosen.items()}
