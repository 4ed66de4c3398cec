"""Records and arguments prepared for one derived unit test (``checks.py``): values that meet or
break a precondition at its boundary, put on the records the call's paths reach.

Two paths may reach the same record: ``order_id.category_id`` and ``new_category_id`` both
name ``PC1001`` when the test order happens to be in the category the call names. Written one
path at a time, the second check's value overwrote the first's (the order's category became
``premium`` while its check demands ``standard``) and the derived test contradicted its own
spec. So a reference the fixture follows is pointed at a record no other path claims, unless a
check pins it (``order_id.event_id equals $event_id``: then the paths mean the same record), and
the checks that do land on one record are met together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Condition, FieldType, Operation
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


# ----- values that meet or break a condition -----------------------------------------------------


def stored(value: date | datetime) -> str:
    """A date or datetime as a record holds it."""
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else value.isoformat()


def _edges(
    cond: Condition, ftype: FieldType, args: dict[str, Any], clock: datetime, db: Database
) -> tuple[list[Any], list[Any]]:
    """Values that meet and values that break one condition, boundary values first."""
    test = cond.test
    value = argument_value(cond.value, args)
    if test == "is_null":
        return [None], samples(ftype, clock, db)
    if test == "not_null":
        return samples(ftype, clock, db), [None]
    if test in ("in", "not_in", "equals"):
        listed = value if isinstance(value, list) else [value]
        others = [v for v in samples(ftype, clock, db, avoid=listed) if v not in listed]
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
    at, early = stored(edge_when), stored(before)
    if test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead"):
        return [at], [early]
    return [early], [at]


def samples(
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
        return [stored(clock + timedelta(days=1)), stored(clock + timedelta(days=3))]
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
    candidates += samples(ftype, clock, db)
    for v in candidates:
        if all(holds(c, v, ftype, args, clock) for c in conds):
            return True, v
    return False, None


def break_value(
    ftype: FieldType,
    cond: Condition,
    others: list[Condition],
    args: dict[str, Any],
    clock: datetime,
    db: Database,
) -> tuple[bool, Any]:
    """A value that breaks ``cond`` just past its boundary while ``others`` (the checks on the
    same value) still hold."""
    candidates = _edges(cond, ftype, args, clock, db)[1] + samples(ftype, clock, db)
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
class Fixture:
    """Arguments and the record fields prepared for one call."""

    bp: Blueprint
    op: Operation
    db: Database
    args: dict[str, Any]
    setup: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The record a followed reference path (``order_id.category_id``) settled on.
    reached: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Reference fields the fixture pointed itself (a check did not pin them).
    routed: set[tuple[str, str, str]] = field(default_factory=set)
    #: The checks met on each value (an address or ``$param``), met together.
    placed: dict[str, list[Condition]] = field(default_factory=dict)

    def get(self, table: str, key: str) -> JSONRecord | None:
        rec = self.db.get(table, {}).get(key)
        if rec is None:
            return None
        return {**rec, **self.setup.get((table, key), {})}

    def _claimed(self) -> dict[tuple[str, str], str]:
        """Which path each record is reached by: the parameters' own records, then hops."""
        out = {
            (table, self.args[p]): p
            for p, table in record_params(self.bp, self.op).items()
            if isinstance(self.args.get(p), str)
        }
        return {**self.reached, **out}

    def _route(self, table: str, ref: Any, path: str) -> Any:
        """The record a reference path settles on: its own unless another path has it."""
        rows = self.db.get(table, {})
        claimed = self._claimed()

        def free(k: str) -> bool:
            return claimed.get((table, k), path) == path

        if isinstance(ref, str) and ref in rows and free(ref):
            choice: Any = ref
        else:
            # Another path's record, or none: the first record nobody else reaches (when every
            # record is taken, the checks met together find the contradiction, if any).
            choice = next((k for k in sorted(rows) if free(k)), ref if ref in rows else None)
            if choice is None:
                choice = sorted(rows)[0] if rows else ref
        if isinstance(choice, str):
            self.reached.setdefault((table, choice), path)
        return choice

    def address(self, target: Target) -> Address:
        """Where a target lives: each reference on the way a check pinned is followed, any
        other one is pointed at a record of its own (see the module's note)."""
        table, key = target.tables[0], self.args[target.root]
        path = target.root
        for hop, nxt in zip(target.hops, target.tables[1:], strict=True):
            path += "." + hop
            ref = (self.get(table, key) or {}).get(hop)
            pinned = hop in self.setup.get((table, key), {}) and (table, key, hop) not in (
                self.routed
            )
            if pinned:
                if isinstance(ref, str):
                    self.reached.setdefault((nxt, ref), path)
            else:
                chosen = self._route(nxt, ref, path)
                if chosen != ref:
                    self.setup.setdefault((table, key), {})[hop] = chosen
                    self.routed.add((table, key, hop))
                ref = chosen
            table, key = nxt, ref
        return Address(table, key, target.field)

    def where(self, subject: Target | ParamRef) -> str:
        """The value a subject reads, as one string: two subjects on one value share it."""
        if isinstance(subject, ParamRef):
            return subject.text
        at = self.address(subject)
        return f"{at.table}/{at.key}.{at.field}"

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
        fields = self.setup.setdefault((where.table, where.key), {})
        fields[where.field] = value
        self.routed.discard((where.table, where.key, where.field))  # a check pins it now

    def setup_tuple(self) -> tuple[tuple[str, str, dict[str, Any]], ...]:
        return tuple((t, k, dict(f)) for (t, k), f in sorted(self.setup.items()))

    def copy(self) -> Fixture:
        return Fixture(
            self.bp,
            self.op,
            self.db,
            dict(self.args),
            {a: dict(f) for a, f in self.setup.items()},
            dict(self.reached),
            set(self.routed),
            {w: list(c) for w, c in self.placed.items()},
        )


def grouped(
    bp: Blueprint, op: Operation, conds: list[Condition]
) -> list[tuple[Target | ParamRef, list[Condition]]]:
    """Conditions by subject: parameters first (record conditions may compare with them), then
    by how many references the path follows (a check that pins a reference comes before the
    checks on the record it points at)."""
    groups: dict[str, tuple[Target | ParamRef, list[Condition]]] = {}
    for c in conds:
        subject = resolve(bp, op, c.check)
        groups.setdefault(subject.text, (subject, []))[1].append(c)

    def order(g: tuple[Target | ParamRef, list[Condition]]) -> int:
        return -1 if isinstance(g[0], ParamRef) else len(g[0].hops)

    return sorted(groups.values(), key=order)


def base_fixture(bp: Blueprint, op: Operation, db: Database) -> Fixture:
    """Distinct records for the record parameters, an ordinary value for the others."""
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
            args[p] = samples(ptype, bp.clock, db)[0]
    return Fixture(bp, op, db, args)


def meeting(fx: Fixture, conds: list[Condition]) -> Fixture:
    """The fixture with every condition met: the checks that land on one value (one record
    field reached by two paths) met together."""
    for subject, group in grouped(fx.bp, fx.op, conds):
        where = fx.where(subject)
        joint = fx.placed.get(where, []) + group
        ok, value = _meet(subject.ftype, joint, fx.args, fx.bp.clock, fx.db)
        if not ok:
            several = len(joint) > len(group)  # checks by other paths on the same value
            words = ", ".join(
                f"{c.check + ' ' if several else ''}{c.test} {c.value!r}" for c in joint
            )
            raise FixtureError(f"{fx.op.name}: no value of {subject.text} meets {words} together")
        fx.put(subject, value)
        fx.placed[where] = joint
    return fx
