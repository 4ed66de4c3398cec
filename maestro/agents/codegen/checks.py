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

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Adjust, Blueprint, Condition, FieldType, Operation
from maestro.agents.codegen.conditions import (
    HOUR_TESTS,
    Address,
    ParamRef,
    Target,
    argument_value,
    date_edge,
    holds,
    record_params,
    resolve,
)
from maestro.agents.codegen.data import Database, JSONRecord


class FixtureError(ValueError):
    """No records and arguments can meet an operation's preconditions (a blueprint problem)."""


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


# ----- values that meet or break a condition -----------------------------------------------------


def _stored(value: date | datetime) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else value.isoformat()


def _edges(
    cond: Condition, ftype: FieldType, args: dict[str, Any], clock: datetime, db: Database
) -> tuple[list[Any], list[Any]]:
    """Values that meet and values that break one condition, boundary values first."""
    test = cond.test
    value = argument_value(cond.value, args)
    if test == "is_null":
        return [None], _samples(ftype, clock, db)
    if test == "not_null":
        return _samples(ftype, clock, db), [None]
    if test in ("in", "not_in", "equals"):
        listed = value if isinstance(value, list) else [value]
        others = [v for v in _samples(ftype, clock, db, avoid=listed) if v not in listed]
        return (listed, others) if test != "not_in" else (others, listed)
    if test in ("at_least", "at_most"):
        if not isinstance(value, int | float):
            return [], []
        step = 1 if ftype.base == "int" else 0.01
        edge: float = value
        if ftype.base == "int":
            edge = int(-(-value // 1)) if test == "at_least" else int(value // 1)
        past = round(edge - step if test == "at_least" else edge + step, 2)
        return [edge], [int(past) if ftype.base == "int" else past]
    n = int(value) if isinstance(value, int | float) else 0
    dt = ftype.base == "datetime"
    edge_when = date_edge(test, n, clock, datetime_field=dt)
    before = edge_when - (timedelta(minutes=30) if test in HOUR_TESTS else timedelta(days=1))
    at, early = _stored(edge_when), _stored(before)
    if test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead"):
        return [at], [early]
    return [early], [at]


def _samples(
    ftype: FieldType, clock: datetime, db: Database, avoid: list[Any] | None = None
) -> list[Any]:
    """Ordinary values of a type (none of ``avoid``), for a condition's other side."""
    avoid = avoid or []
    if ftype.base == "enum":
        return list(ftype.choices)
    if ftype.base == "bool":
        return [True, False]
    if ftype.base == "int":
        top = max([v for v in avoid if isinstance(v, int | float)], default=0)
        return [2, int(top) + 1]
    if ftype.base == "float":
        top = max([v for v in avoid if isinstance(v, int | float)], default=0)
        return [20.0, round(float(top) + 1, 2)]
    if ftype.base == "date":
        return [clock.date().isoformat(), (clock.date() + timedelta(days=3)).isoformat()]
    if ftype.base == "datetime":
        return [_stored(clock + timedelta(days=1)), _stored(clock + timedelta(days=3))]
    if ftype.base == "ref":
        return sorted(db.get(str(ftype.ref), {}))[:4]
    return ["as agreed on the phone", "another value"]


def _meet(
    ftype: FieldType, conds: list[Condition], args: dict[str, Any], clock: datetime, db: Database
) -> tuple[bool, Any]:
    candidates: list[Any] = []
    for c in conds:
        candidates += _edges(c, ftype, args, clock, db)[0]
    for c in conds:
        candidates += _edges(c, ftype, args, clock, db)[1]
    candidates += _samples(ftype, clock, db)
    for v in candidates:
        if all(holds(c, v, ftype, args, clock) for c in conds):
            return True, v
    return False, None


def _break(
    ftype: FieldType,
    cond: Condition,
    others: list[Condition],
    args: dict[str, Any],
    clock: datetime,
    db: Database,
) -> tuple[bool, Any]:
    candidates = _edges(cond, ftype, args, clock, db)[1] + _samples(ftype, clock, db)
    if ftype.nullable:
        candidates.append(None)
    for v in candidates:
        if not holds(cond, v, ftype, args, clock) and all(
            holds(c, v, ftype, args, clock) for c in others
        ):
            return True, v
    return False, None


# ----- fixtures ---------------------------------------------------------------------------------


@dataclass
class _Fixture:
    """Arguments and the record fields prepared for one call."""

    bp: Blueprint
    op: Operation
    db: Database
    args: dict[str, Any]
    setup: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def get(self, table: str, key: str) -> JSONRecord | None:
        rec = self.db.get(table, {}).get(key)
        if rec is None:
            return None
        return {**rec, **self.setup.get((table, key), {})}

    def address(self, target: Target) -> Address:
        """Where a target lives, pointing null references on the way at existing records."""
        table, key = target.tables[0], self.args[target.root]
        for hop, nxt in zip(target.hops, target.tables[1:], strict=True):
            rec = self.get(table, key) or {}
            ref = rec.get(hop)
            if not isinstance(ref, str) or ref not in self.db.get(nxt, {}):
                ref = sorted(self.db[nxt])[0]
                self.setup.setdefault((table, key), {})[hop] = ref
            table, key = nxt, ref
        return Address(table, key, target.field)

    def value(self, subject: Target | ParamRef) -> Any:
        if isinstance(subject, ParamRef):
            return self.args.get(subject.name)
        where = self.address(subject)
        return (self.get(where.table, where.key) or {}).get(where.field)

    def put(self, subject: Target | ParamRef, value: Any) -> None:
        if isinstance(subject, ParamRef):
            self.args[subject.name] = value
            return
        where = self.address(subject)
        self.setup.setdefault((where.table, where.key), {})[where.field] = value

    def setup_tuple(self) -> tuple[tuple[str, str, dict[str, Any]], ...]:
        return tuple((t, k, dict(f)) for (t, k), f in sorted(self.setup.items()))

    def copy(self) -> _Fixture:
        return _Fixture(
            self.bp, self.op, self.db, dict(self.args), {a: dict(f) for a, f in self.setup.items()}
        )


def _grouped(
    bp: Blueprint, op: Operation, conds: list[Condition]
) -> list[tuple[Target | ParamRef, list[Condition]]]:
    """Conditions by subject, parameters first (record conditions may compare with them)."""
    groups: dict[str, tuple[Target | ParamRef, list[Condition]]] = {}
    for c in conds:
        subject = resolve(bp, op, c.check)
        groups.setdefault(subject.text, (subject, []))[1].append(c)
    return sorted(groups.values(), key=lambda g: not isinstance(g[0], ParamRef))


def _base_fixture(bp: Blueprint, op: Operation, db: Database) -> _Fixture:
    args: dict[str, Any] = {}
    taken: dict[str, set[str]] = {}
    for p, table in record_params(bp, op).items():
        keys = [k for k in sorted(db.get(table, {})) if k not in taken.get(table, set())]
        if not keys:
            raise FixtureError(f"{op.name}: the table {table} has no record for {p}")
        args[p] = keys[0]
        taken.setdefault(table, set()).add(keys[0])
    for p, ptype in op.param_types().items():
        if p not in args:
            args[p] = _samples(ptype, bp.clock, db)[0]
    return _Fixture(bp, op, db, args)


def _meeting(fx: _Fixture, conds: list[Condition]) -> _Fixture:
    for subject, group in _grouped(fx.bp, fx.op, conds):
        ok, value = _meet(subject.ftype, group, fx.args, fx.bp.clock, fx.db)
        if not ok:
            words = ", ".join(f"{c.test} {c.value!r}" for c in group)
            raise FixtureError(f"{fx.op.name}: no value of {subject.text} meets {words} together")
        fx.put(subject, value)
    return fx


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
    fx = _base_fixture(bp, op, db)
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
    base = _meeting(_base_fixture(bp, op, db), op.requires)
    tests = [
        _success(bp, op, base, f"{op.name}: succeeds when every check passes (at its boundary)")
    ]
    for subject, group in _grouped(bp, op, op.requires):
        for cond in group:
            others = [c for c in group if c is not cond]
            ok, bad = _break(subject.ftype, cond, others, base.args, bp.clock, db)
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
                )
            )
    tests += _unknown_key_tests(bp, op, base)
    for rule in bp.agent_rules_of(op.name):
        try:
            fx = _meeting(base.copy(), op.requires + rule.refuse_when)
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
            )
        )
    return tests


def _unknown_key_tests(bp: Blueprint, op: Operation, fx: _Fixture) -> list[ToolTest]:
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


def _success(bp: Blueprint, op: Operation, fx: _Fixture, name: str) -> ToolTest:
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
    )


def _effect_value(fx: _Fixture, target: Target, value: Any) -> Any:
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
        return _stored(clock)
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
                options = _samples(ftype.model_copy(update={"nullable": False}), bp.clock, db)
                rec[fname] = options[int(key[-1]) % len(options)] if options else None
    return db


def fixture_problems(bp: Blueprint) -> list[str]:
    """Operations whose preconditions no record could meet (found before any code is written)."""
    db = sample_database(bp)
    out = []
    for op in bp.operations:
        try:
            operation_tests(bp, op, db)
        except FixtureError as exc:
            out.append(str(exc))
    return out
