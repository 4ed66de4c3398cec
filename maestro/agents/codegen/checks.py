"""Unit tests derived from a blueprint's operations, run against the LLM-written tools.

Every kind of operation gets its tests:

- read: the record comes back; an unknown key is a ToolError.
- lookup: the record whose ``by`` fields equal the arguments comes back; the same arguments
  with one field changed (a wrong date of birth) match nothing and are a ToolError.
- list: every matching record comes back; an unknown referenced key is a ToolError.
- update and create: a call on records prepared to meet every precondition exactly at its
  boundary (day N of "within N days", the last allowed amount) succeeds and leaves every effect
  in place (a create adds exactly one record, under a new key the answer shows); for each
  precondition, the same call with that one precondition broken just past its boundary (day
  N+1) is a ToolError that changes nothing; a key that names no record is a ToolError; a call
  an agent rule forbids still succeeds (the agent refuses it, not the tool).

The tests run wherever the given domain runs its tools: the synthesis passes a sandboxed domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Adjust, Blueprint, Condition, FieldType, Operation
from maestro.agents.codegen.conditions import Getter, Target, all_hold, read, record_params, resolve
from maestro.agents.codegen.data import Database, JSONRecord
from maestro.agents.codegen.fixtures import (
    Fixture,
    FixtureError,
    base_fixture,
    break_value,
    grouped,
    meeting,
    samples,
    stored,
)

__all__ = ["FixtureError", "TestDerivationError", "ToolTest", "operation_tests", "untestable"]


class TestDerivationError(RuntimeError):
    """The derived tests contradict the operation's own checks: a fault of this module, not of
    the blueprint or the model's code, found before any code is asked for."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Expect:
    """A field a record must hold after a successful call (``key`` None: the created record)."""

    table: str
    key: str | None
    field: str
    value: Any
    base: str


@dataclass(frozen=True)
class ToolTest:
    """One call of one tool on prepared records, and what must come of it."""

    name: str
    operation: str
    arguments: dict[str, Any]
    #: Fields written onto records before the call: ``(table, key, fields)``.
    setup: tuple[tuple[str, str, dict[str, Any]], ...]
    expect_ok: bool
    expect: tuple[Expect, ...] = ()
    #: Text the answer must contain (the record's key; a list's keys).
    shows: tuple[str, ...] = ()
    #: The table a successful call must add exactly one record to.
    creates: str | None = None
    creates_prefix: str = ""
    #: Checks that must hold on the prepared records besides the operation's own (an agent
    #: rule's ``refuse_when``), for a call expected to succeed.
    applies: tuple[Condition, ...] = ()
    #: The check a call expected to fail breaks.
    breaks: Condition | None = None


# ----- the tests --------------------------------------------------------------------------------


def operation_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    """The tests one operation's code must pass; :class:`FixtureError` when the blueprint makes
    them impossible."""
    if not db.get(op.table):
        return []
    if op.kind == "read":
        return _read_tests(bp, op, db)
    if op.kind == "lookup":
        return _lookup_tests(bp, op, db)
    if op.kind == "list":
        return _list_tests(bp, op, db)
    return _write_tests(bp, op, db)


def _read_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    entity = bp.entity(op.table)
    fx = base_fixture(bp, op, db)
    key = fx.args[entity.key]
    tests = [ToolTest(f"{op.name}: returns the record", op.name, fx.args, (), True, shows=(key,))]
    return tests + _unknown_key_tests(bp, op, fx)


def _lookup_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    entity = bp.entity(op.table)
    rows = db[op.table]
    found = [k for k in sorted(rows) if all(rows[k].get(f) is not None for f in op.by)]
    if not found:
        raise FixtureError(f"{op.name}: no {op.table} record has every field of {op.by}")
    key = found[0]
    args = {f: rows[key][f] for f in op.by}
    tests = [
        ToolTest(
            f"{op.name}: finds {key} by {', '.join(op.by)}", op.name, args, (), True, shows=(key,)
        )
    ]
    types = entity.field_types()
    for f in op.by:
        wrong = _no_match(rows, args, f, types[f])
        if wrong is not None:
            bad = {**args, f: wrong}
            tests.append(
                ToolTest(
                    f"{op.name}: refuses when {f} does not match ({wrong!r})",
                    op.name,
                    bad,
                    (),
                    False,
                )
            )
    return tests


def _no_match(
    rows: dict[str, JSONRecord], args: dict[str, Any], field: str, ftype: FieldType
) -> Any:
    """A value for ``field`` that, with the other arguments, matches no record."""
    value = args[field]
    options: list[Any]
    if ftype.base == "date":
        day = date.fromisoformat(value)
        options = [(day + timedelta(days=d)).isoformat() for d in (1, -1, 2, 400)]
    elif ftype.base in ("int", "float"):
        options = [value + 1, value + 7]
    elif ftype.base == "enum":
        options = [c for c in ftype.choices if c != value]
    elif ftype.base == "bool":
        options = [not value]
    else:
        options = ["x" + str(value), str(value) + "x"]
    for v in options:
        probe = {**args, field: v}
        if not any(all(r.get(k) == pv for k, pv in probe.items()) for r in rows.values()):
            return v
    return None


def _list_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    rows = db[op.table]
    entity = bp.entity(op.table)
    found = [k for k in sorted(rows) if all(rows[k].get(f) is not None for f in op.by)]
    if not found:
        raise FixtureError(f"{op.name}: no {op.table} record has every field of {op.by}")
    args = {f: rows[found[0]][f] for f in op.by}
    matching = sorted(k for k, r in rows.items() if all(r.get(f) == v for f, v in args.items()))
    tests = [
        ToolTest(
            f"{op.name}: lists every matching record",
            op.name,
            args,
            (),
            True,
            shows=tuple(matching[:12]),
        )
    ]
    types = entity.field_types()
    for f in op.by:
        target = types[f].ref
        if target:
            prefix = bp.entity(target).prefix
            tests.append(
                ToolTest(
                    f"{op.name}: refuses an unknown {f}",
                    op.name,
                    {**args, f: f"{prefix}0000"},
                    (),
                    False,
                )
            )
    return tests


def _write_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    base = meeting(base_fixture(bp, op, db), op.requires)
    tests = [
        _success(bp, op, base, f"{op.name}: succeeds when every check passes (at its boundary)")
    ]
    for subject, group in grouped(bp, op, op.requires):
        for cond in group:
            # The checks met on the same value (by any path) must still hold when this breaks.
            others = [c for c in base.placed.get(base.where(subject), group) if c is not cond]
            ok, bad = break_value(subject.ftype, cond, others, base.args, bp.clock, db)
            if not ok:
                continue
            fx = base.copy()
            fx.put(subject, bad)
            tests.append(
                ToolTest(
                    f"{op.name}: refuses when {cond.check} is {bad!r} ({cond.test} {cond.value!r} fails)",
                    op.name,
                    fx.args,
                    fx.setup_tuple(),
                    False,
                    breaks=cond,
                )
            )
    tests += _unknown_key_tests(bp, op, base)
    for rule in bp.agent_rules_of(op.name):
        try:
            fx = meeting(base.copy(), op.requires + rule.refuse_when)
        except FixtureError:
            raise FixtureError(
                f"{op.name}: the agent rule {rule.rule!r} can never apply to a call the tool "
                "accepts (its refuse_when contradicts the requires)"
            ) from None
        tests.append(
            _success(
                bp,
                op,
                fx,
                f"{op.name}: still succeeds when the agent rule {rule.rule!r} applies (the agent refuses, not the tool)",
                applies=tuple(rule.refuse_when),
            )
        )
    problems = contradictions(bp, op, db, tests)
    if problems:
        raise TestDerivationError(
            f"{op.name}: the derived tests contradict the operation's checks (a fault of the "
            "test derivation, not of the blueprint or the code): " + "; ".join(problems)
        )
    return tests


def contradictions(bp: Blueprint, op: Operation, db: Database, tests: list[ToolTest]) -> list[str]:
    """Derived tests whose prepared records do not mean what the test says, under the
    blueprint's own evaluation (``conditions.py``): a call expected to succeed where a listed
    check fails, or a "refuses when" call where the check it breaks holds."""
    out = []
    for t in tests:
        get = _prepared(db, t.setup)
        if t.expect_ok:
            for cond in [*op.requires, *t.applies]:
                if not all_hold(bp, op, [cond], t.arguments, get, bp.clock):
                    value = read(bp, op, cond.check, t.arguments, get)
                    out.append(f"{t.name!r} expects success but {cond.check} is {value!r}")
        elif t.breaks is not None and all_hold(bp, op, [t.breaks], t.arguments, get, bp.clock):
            out.append(f"{t.name!r} expects a refusal but {t.breaks.check} holds")
    return out


def _prepared(db: Database, setup: tuple[tuple[str, str, dict[str, Any]], ...]) -> Getter:
    """The records as a test prepares them, to read conditions on."""
    changed = {(table, key): fields for table, key, fields in setup}

    def get(table: str, key: str) -> JSONRecord | None:
        rec = db.get(table, {}).get(key)
        return None if rec is None else {**rec, **changed.get((table, key), {})}

    return get


def _unknown_key_tests(bp: Blueprint, op: Operation, fx: Fixture) -> list[ToolTest]:
    out = []
    for p, table in record_params(bp, op).items():
        missing = f"{bp.entity(table).prefix}0000"
        out.append(
            ToolTest(
                f"{op.name}: refuses an unknown {p}",
                op.name,
                {**fx.args, p: missing},
                fx.setup_tuple(),
                False,
            )
        )
    return out


def _success(
    bp: Blueprint, op: Operation, fx: Fixture, name: str, applies: tuple[Condition, ...] = ()
) -> ToolTest:
    entity = bp.entity(op.table)
    expect: list[Expect] = []
    for target_text, value in op.sets.items():
        target = resolve(bp, op, target_text, effect=True)
        assert isinstance(target, Target)
        want = _effect_value(fx, target, value)
        if target.root == "new" and not target.hops:
            expect.append(Expect(op.table, None, target.field, want, target.ftype.base))
        else:
            where = fx.address(target)
            expect.append(Expect(where.table, where.key, where.field, want, target.ftype.base))
    shows = (fx.args[entity.key],) if op.kind == "update" else ()
    return ToolTest(
        name,
        op.name,
        dict(fx.args),
        fx.setup_tuple(),
        True,
        tuple(expect),
        shows=shows,
        creates=op.table if op.kind == "create" else None,
        creates_prefix=entity.prefix,
        applies=applies,
    )


def _effect_value(fx: Fixture, target: Target, value: Any) -> Any:
    clock = fx.bp.clock
    if isinstance(value, Adjust):
        before = fx.value(target) if target.root != "new" else 0
        amount = value.amount
        if isinstance(amount, str):
            amount = fx.args[amount.lstrip("$")]
        return round((before or 0) + value.sign * amount, 6)
    if value == "$today":
        return clock.date().isoformat()
    if value == "$now":
        return stored(clock)
    if isinstance(value, str) and value.startswith("$"):
        return fx.value(resolve(fx.bp, fx.op, value if "." not in value else value[1:]))
    return value


# ----- checks the blueprint stage runs ----------------------------------------------------------


def sample_database(bp: Blueprint) -> Database:
    """Three plain records per table, for checking that every operation can be tested."""
    db: Database = {e.table: {} for e in bp.entities}
    for e in bp.entities:
        for i in range(3):
            key = f"{e.prefix}{1001 + i}"
            db[e.table][key] = {e.key: key}
    for e in bp.entities:
        for key, rec in db[e.table].items():
            for fname, ftype in e.field_types().items():
                options = samples(ftype.model_copy(update={"nullable": False}), bp.clock, db)
                rec[fname] = options[int(key[-1]) % len(options)] if options else None
    return db


def fixture_problems(bp: Blueprint) -> list[str]:
    """Operations whose preconditions no record could meet (found before any code is written)."""
    return untestable(bp, sample_database(bp))


def untestable(bp: Blueprint, db: Database) -> list[str]:
    """Operations whose tests cannot be derived on the grown data (no record to test on), for
    the data stage; a derivation that contradicts its checks raises (a pipeline fault)."""
    out = []
    for op in bp.operations:
        try:
            operation_tests(bp, op, db)
        except FixtureError as exc:
            out.append(str(exc))
    return out
