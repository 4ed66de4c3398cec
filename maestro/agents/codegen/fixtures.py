"""Records and arguments prepared for one derived unit test (``checks.py``): values that meet or
break a check at its boundary, put on the records the call's paths reach.

A check is an expression (``conditions.py``). To meet it at its boundary, one value it reads (a
*pivot*: a parameter, a record field, or a count of records) is set to where the check turns:
for an ordered comparison the host solves for the value where both sides are equal (it
evaluates the sides at two values of the pivot; dates count in days, datetimes in minutes) and
takes the closest value on the grid (a whole number, a cent, a day, a minute) that meets the
check; for an equality it takes the other side's value; for a count it makes that many records
match. To break it, the closest value past the boundary. Every candidate is evaluated by the
same code that defines the checks' meaning, and kept only when every other check still holds.

Two paths may reach the same record: ``order_id.category_id`` and ``new_category_id`` both
name ``PC1001`` when the test order happens to be in the category the call names. So a
reference the fixture follows is pointed at a record no other path claims, unless a check pins
it (``order_id.event_id = $event_id``: then the paths mean the same record).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Condition, FieldType, Operation
from maestro.agents.codegen.conditions import (
    Address,
    ParamRef,
    Target,
    View,
    applies,
    cond_holds,
    condition_node,
    env,
    paths_of,
    record_params,
    subject_of,
    when_node,
)
from maestro.agents.codegen.data import Database, JSONRecord
from maestro.domains.expressions import (
    Aggregate,
    Compare,
    Env,
    ExpressionError,
    ListLit,
    Lit,
    Member,
    Node,
    Path,
    conjuncts,
    evaluate,
    stored,
    unparse,
    walk,
)


class FixtureError(ValueError):
    """No records and arguments can meet an operation's preconditions (a blueprint problem)."""


# ----- values -----------------------------------------------------------------------------------


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
        low = int(ftype.low) if ftype.low is not None else 2
        return [max(2, low), int(top) + 1]
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


def _to_number(value: Any) -> float | None:
    """An ordered value on one axis: numbers as they are, dates in days, datetimes in minutes,
    durations in minutes."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        return (value - datetime(2000, 1, 1)).total_seconds() / 60
    if isinstance(value, date):
        return float(value.toordinal())
    if isinstance(value, timedelta):
        return value.total_seconds() / 60
    return None


#: The grid a pivot's value lives on, by type: one step, and how a number becomes a value.
def _step(ftype: FieldType) -> float:
    return 0.01 if ftype.base == "float" else 1.0


def _from_axis(x: float, ftype: FieldType) -> Any:
    if ftype.base == "int":
        return round(x)
    if ftype.base == "float":
        return round(x, 2)
    if ftype.base == "date":
        return date.fromordinal(round(x)).isoformat()
    if ftype.base == "datetime":
        return stored(datetime(2000, 1, 1) + timedelta(minutes=round(x)))
    return None


def _on_axis(value: Any, ftype: FieldType) -> float | None:
    if ftype.base in ("int", "float"):
        return _to_number(value)
    if ftype.base == "date" and isinstance(value, str):
        try:
            return float(date.fromisoformat(value).toordinal())
        except ValueError:
            return None
    if ftype.base == "datetime" and isinstance(value, str):
        try:
            return _to_number(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


# ----- pivots -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CountPivot:
    """A count (or sum) a check reads: set by making records of its table match."""

    node: Aggregate

    @property
    def text(self) -> str:
        return unparse(self.node)


Pivot = Target | ParamRef | CountPivot


def leaves(bp: Blueprint, op: Operation, node: Node) -> list[Pivot]:
    """The values an expression reads that a fixture can set, in the order written."""
    out: list[Pivot] = []
    seen: set[str] = set()
    stack = [node]
    order: list[Node] = []
    while stack:
        n = stack.pop()
        order.append(n)
        if isinstance(n, Aggregate):
            continue
        stack.extend(reversed(n.children()))
    for n in order:
        pivot: Pivot | None = None
        if isinstance(n, Aggregate):
            pivot = CountPivot(n)
        elif isinstance(n, Path):
            try:
                pivot = subject_of(bp, op, n)
            except ExpressionError:
                pivot = None
        if pivot is not None and pivot.text not in seen:
            seen.add(pivot.text)
            out.append(pivot)
    return out


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
    #: Records the fixture added (for counts), whole: ``(table, key)``.
    added: set[tuple[str, str]] = field(default_factory=set)

    def get(self, table: str, key: str) -> JSONRecord | None:
        rec = self.db.get(table, {}).get(key)
        if rec is None and (table, key) not in self.added:
            return None
        return {**(rec or {}), **self.setup.get((table, key), {})}

    def keys(self, table: str) -> list[str]:
        extra = [k for t, k in self.added if t == table]
        return sorted({*self.db.get(table, {}), *extra})

    def rows(self, table: str) -> Iterable[tuple[str, JSONRecord]]:
        for key in self.keys(table):
            rec = self.get(table, key)
            if rec is not None:
                yield key, rec

    def view(self) -> View:
        return View(self.get, self.rows)

    def env(self) -> Env:
        return env(self.bp, self.op, self.args, self.view(), self.bp.clock)

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
        keys = self.keys(table)
        claimed = self._claimed()

        def free(k: str) -> bool:
            return claimed.get((table, k), path) == path

        if isinstance(ref, str) and ref in keys and free(ref):
            choice: Any = ref
        else:
            choice = next((k for k in keys if free(k)), ref if ref in keys else None)
            if choice is None:
                choice = keys[0] if keys else ref
        if isinstance(choice, str):
            self.reached.setdefault((table, choice), path)
        return choice

    def address(self, target: Target) -> Address:
        """Where a target lives: each reference on the way a check pinned is followed, any
        other one is pointed at a record of its own (see the module's note)."""
        table, key = target.tables[0], self.args.get(target.root)
        path = target.root
        for hop, nxt in zip(target.hops, target.tables[1:], strict=True):
            path += "." + hop
            ref = (self.get(table, key) or {}).get(hop) if isinstance(key, str) else None
            pinned = (
                hop in self.setup.get((table, str(key)), {})
                and (
                    table,
                    str(key),
                    hop,
                )
                not in self.routed
            )
            if pinned:
                if isinstance(ref, str):
                    self.reached.setdefault((nxt, ref), path)
            else:
                chosen = self._route(nxt, ref, path)
                if chosen != ref and isinstance(key, str):
                    self.setup.setdefault((table, key), {})[hop] = chosen
                    self.routed.add((table, key, hop))
                ref = chosen
            table, key = nxt, ref
        return Address(table, str(key), target.field)

    def route_all(self, node: Node) -> None:
        """Settle every reference path an expression reads (before its values are judged)."""
        for p in paths_of(node):
            try:
                subject = subject_of(self.bp, self.op, p)
            except ExpressionError:
                continue
            if isinstance(subject, Target) and subject.hops:
                self.address(subject)

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
        out = []
        for (t, k), f in sorted(self.setup.items()):
            if (t, k) in self.added:
                key_field = self.bp.entity(t).key
                out.append((t, k, {**f, key_field: k}))
            else:
                out.append((t, k, dict(f)))
        return tuple(out)

    def copy(self) -> Fixture:
        return Fixture(
            self.bp,
            self.op,
            self.db,
            dict(self.args),
            {a: dict(f) for a, f in self.setup.items()},
            dict(self.reached),
            set(self.routed),
            set(self.added),
        )


def base_fixture(bp: Blueprint, op: Operation, db: Database, offset: int = 0) -> Fixture:
    """Distinct records for the record parameters (the first ones, or ``offset`` further on),
    an ordinary value for the others."""
    args: dict[str, Any] = {}
    taken: dict[str, set[str]] = {}
    for p, table in record_params(bp, op).items():
        keys = [k for k in sorted(db.get(table, {})) if k not in taken.get(table, set())]
        if not keys:
            raise FixtureError(f"{op.name}: the table {table} has no record for {p}")
        args[p] = keys[offset % len(keys)]
        taken.setdefault(table, set()).add(args[p])
    for p, ptype in op.param_types().items():
        if p not in args:
            args[p] = samples(ptype, bp.clock, db)[0]
    return Fixture(bp, op, db, args)


# ----- counts ------------------------------------------------------------------------------------


def _count_env(fx: Fixture) -> Env:
    return fx.env()


def _matches(fx: Fixture, node: Aggregate, key: str) -> bool:
    if node.where is None:
        return True
    e = _count_env(fx).within((node.table, key))
    try:
        return evaluate(node.where, e) is True
    except ExpressionError:
        return False


def _row_fields(node: Aggregate, fx: Fixture) -> dict[str, FieldType]:
    types = fx.bp.entity(node.table).field_types()
    names: list[str] = []
    if node.where is not None:
        for n in walk(node.where):
            if isinstance(n, Path) and not n.dollar and n.parts[0] in types:
                names.append(n.parts[0])
    return {n: types[n] for n in dict.fromkeys(names)}


def _row_candidates(
    fx: Fixture, node: Aggregate, fname: str, ftype: FieldType, key: str
) -> list[Any]:
    """Values of one field of a counted record worth trying: what its where compares it with,
    and ordinary values of its type."""
    out: list[Any] = []
    e = _count_env(fx).within((node.table, key))
    assert node.where is not None
    for part in walk(node.where):
        sides: list[Node] = []
        if isinstance(part, Compare):
            sides = [part.left, part.right]
        elif isinstance(part, Member) and isinstance(part.options, ListLit):
            sides = [part.operand, *part.options.items]
        if not any(isinstance(s, Path) and s.parts[0] == fname for s in sides):
            continue
        for s in sides:
            if isinstance(s, Path) and s.parts[0] == fname:
                continue
            try:
                v = evaluate(s, e)
            except ExpressionError:
                continue
            if v is not None:
                out.append(stored(v))
                x = _on_axis(stored(v), ftype)
                if x is not None:
                    out += [_from_axis(x + d * _step(ftype), ftype) for d in (1, -1)]
    out += samples(ftype, fx.bp.clock, fx.db)
    if ftype.base == "str":
        out.append("x")
    if ftype.nullable:
        out.append(None)
    return _unique(out)


def _unique(values: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for v in values:
        k = repr(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def _set_match(fx: Fixture, node: Aggregate, key: str, want: bool) -> bool:
    """Change fields of one counted record until its where is ``want``; whether it could."""
    if _matches(fx, node, key) == want:
        return True
    for fname, ftype in _row_fields(node, fx).items():
        for v in _row_candidates(fx, node, fname, ftype, key):
            before = dict(fx.setup.get((node.table, key), {}))
            fx.setup.setdefault((node.table, key), {})[fname] = v
            if _matches(fx, node, key) == want:
                return True
            fx.setup[(node.table, key)] = before
    # Two fields may have to change together (a reference and a status): meet one, then the other.
    parts = conjuncts(node.where) if want and node.where is not None else []
    if len(parts) > 1:  # each part is smaller than the whole: this ends
        for part in parts:
            sub = Aggregate(node.kind, node.table, node.field, part)
            _set_match(fx, sub, key, True)
        return _matches(fx, node, key) == want
    return False


def _protected(fx: Fixture) -> set[tuple[str, str]]:
    """Records a count may not repurpose: the call's own records."""
    return {
        (t, fx.args[p])
        for p, t in record_params(fx.bp, fx.op).items()
        if isinstance(fx.args.get(p), str)
    }


def set_count(fx: Fixture, node: Aggregate, k: int) -> bool:
    """Make exactly ``k`` records of the table match the count's where (adding records when
    the table has too few); whether it could."""
    table = node.table
    keep_out = _protected(fx)
    matching = [key for key in fx.keys(table) if _matches(fx, node, key)]
    for key in matching[k:] if len(matching) > k else []:
        if not _set_match(fx, node, key, False):
            return False
    matching = [key for key in fx.keys(table) if _matches(fx, node, key)]
    spare = [key for key in fx.keys(table) if key not in matching and (table, key) not in keep_out]
    while len(matching) < k:
        if spare:
            key = spare.pop(0)
        else:
            added = _add_record(fx, table)
            if added is None:
                return False
            key = added
        if _set_match(fx, node, key, True):
            matching.append(key)
        elif key in fx.added:
            return False
    return len([key for key in fx.keys(table) if _matches(fx, node, key)]) == k


def _add_record(fx: Fixture, table: str) -> str | None:
    """A new record of ``table``, a copy of one of its records under a new key."""
    keys = fx.keys(table)
    if not keys or len(fx.added) > 20:
        return None
    entity = fx.bp.entity(table)
    template = fx.get(table, keys[0]) or {}
    n = 1
    while f"{entity.prefix}{8000 + n}" in keys:
        n += 1
    key = f"{entity.prefix}{8000 + n}"
    fx.added.add((table, key))
    fx.setup[(table, key)] = {f: v for f, v in template.items() if f != entity.key}
    return key


# ----- meeting and breaking checks ------------------------------------------------------------------


class _Trial:
    """Try values of one pivot on a copy of the fixture."""

    def __init__(self, fx: Fixture, pivot: Pivot) -> None:
        self.fx = fx
        self.pivot = pivot

    def put(self, value: Any) -> Fixture | None:
        fx = self.fx.copy()
        if isinstance(self.pivot, CountPivot):
            if not isinstance(value, int | float) or value < 0:
                return None
            if self.pivot.node.kind == "count":
                return fx if set_count(fx, self.pivot.node, int(value)) else None
            if not set_count(fx, self.pivot.node, 1):
                return None
            key = next(
                k for k in fx.keys(self.pivot.node.table) if _matches(fx, self.pivot.node, k)
            )
            assert self.pivot.node.field is not None
            fx.setup.setdefault((self.pivot.node.table, key), {})[self.pivot.node.field] = value
            return fx
        fx.put(self.pivot, value)
        return fx

    def current(self) -> Any:
        if isinstance(self.pivot, CountPivot):
            try:
                return evaluate(self.pivot.node, self.fx.env())
            except ExpressionError:
                return 0
        return self.fx.value(self.pivot)


def _sides(node: Node) -> tuple[Node, Node] | None:
    if isinstance(node, Compare):
        return node.left, node.right
    return None


def _mentions(node: Node, pivot: Pivot) -> bool:
    for n in walk(node):
        if isinstance(pivot, CountPivot) and n == pivot.node:
            return True
        if isinstance(n, Path) and not isinstance(pivot, CountPivot):
            text = n.text
            if text == pivot.text or text.lstrip("$") == pivot.text.lstrip("$"):
                return True
    return False


def _gap(atom: Node, fx: Fixture) -> float | None:
    sides = _sides(atom)
    if sides is None:
        return None
    try:
        e = fx.env()
        a, b = _to_number(evaluate(sides[0], e)), _to_number(evaluate(sides[1], e))
    except ExpressionError:
        return None
    if a is None or b is None:
        return None
    return a - b


#: Spans (in the pivot's units: a number, a day, a minute) the turning point is looked for
#: with: a datetime read through date() or days_between() moves only by the day.
_SPANS = {"int": (10.0, 1000.0), "float": (10.0, 1000.0), "date": (10.0, 400.0),
          "datetime": (10.0, 1440.0, 43200.0)}  # fmt: skip


def _holds_at(atom: Node, trial: _Trial, ftype: FieldType, x: float) -> bool | None:
    fx = trial.put(_from_axis(x, ftype))
    if fx is None:
        return None
    try:
        return evaluate(atom, fx.env()) is True
    except ExpressionError:
        return None


def _root(atom: Node, trial: _Trial, ftype: FieldType) -> float | None:
    """Where an ordered comparison turns, as a value of the pivot on its axis (None when the
    comparison does not move with the pivot): the two sides are evaluated at two values of the
    pivot, wider apart until they move (a datetime read by the day moves only by the day), and
    the exact turn on the pivot's grid is then found by halving."""
    start = _on_axis(stored(trial.current()), ftype)
    if start is None:
        start = (
            0.0 if ftype.base in ("int", "float") else _on_axis(stored(trial.fx.bp.clock), ftype)
        )
    if start is None:
        return None
    for span in _SPANS.get(ftype.base, (10.0,)):
        points = []
        for x in (start, start + span):
            fx = trial.put(_from_axis(x, ftype))
            if fx is None:
                return None
            g = _gap(atom, fx)
            if g is None:
                return None
            points.append(g)
        slope = (points[1] - points[0]) / span
        if slope != 0 and math.isfinite(slope):
            guess = start - points[0] / slope
            return _refined(atom, trial, ftype, guess, span)
    return None


def _refined(atom: Node, trial: _Trial, ftype: FieldType, guess: float, span: float) -> float:
    """The grid value nearest ``guess`` where the atom's truth changes (halving between a value
    where it holds and one where it does not), or ``guess`` when none is found nearby."""
    step = _step(ftype)
    here = _holds_at(atom, trial, ftype, guess)
    if here is None:
        return guess
    for k in (1, 2, 4):
        for other in (guess + k * span, guess - k * span):
            there = _holds_at(atom, trial, ftype, other)
            if there is None or there == here:
                continue
            lo, hi = (guess, other) if guess < other else (other, guess)
            lo_holds = _holds_at(atom, trial, ftype, lo)
            for _ in range(40):
                if hi - lo <= step:
                    break
                mid = math.floor((lo + hi) / 2 / step) * step
                if mid <= lo or mid >= hi:
                    break
                if _holds_at(atom, trial, ftype, mid) == lo_holds:
                    lo = mid
                else:
                    hi = mid
            return lo  # lo and lo + one step straddle the turn: the candidates take both
    return guess


def candidates(
    bp: Blueprint, op: Operation, fx: Fixture, atom: Node, pivot: Pivot
) -> tuple[list[Any], float | None]:
    """Values of ``pivot`` worth trying for ``atom`` (nearest its boundary first), and the
    boundary on the pivot's axis when the atom is an ordered comparison."""
    ftype = _type_of(bp, op, pivot)
    trial = _Trial(fx, pivot)
    out: list[Any] = []
    root = None
    if ftype.base in ("int", "float", "date", "datetime"):
        root = _root(atom, trial, ftype)
        if root is not None:
            step = _step(ftype)
            grid = math.floor(root / step) * step
            for d in (0, 1, -1, 2, -2, 3, -3):
                out.append(_from_axis(grid + d * step, ftype))
            if ftype.base == "datetime":
                out += [_from_axis(root + d, ftype) for d in (30, -30)]
    # the other side of an equality or membership, and the constants the atom names
    e = fx.env()
    for n in walk(atom):
        if isinstance(n, Compare | Member):
            for side in n.children():
                if _mentions(side, pivot):
                    continue
                try:
                    v = evaluate(side, e)
                except ExpressionError:
                    continue
                vals = v if isinstance(v, list) else [v]
                for item in vals:
                    if item is not None:
                        out.append(stored(item))
                        x = _on_axis(stored(item), ftype)
                        if x is not None:
                            out += [_from_axis(x + d * _step(ftype), ftype) for d in (1, -1)]
        if isinstance(n, Lit) and n.value is not None:
            out.append(n.value)
    if isinstance(pivot, CountPivot):
        out += [0, 1, 2, 3]
    elif ftype.base == "ref" and ftype.ref:
        out += fx.keys(ftype.ref)[:6]
    else:
        out += samples(ftype, bp.clock, fx.db)
        if ftype.base == "str":
            out += ["x" + str(v) for v in out if isinstance(v, str)][:2]
    if ftype.nullable:
        out.append(None)
    out = [v for v in _unique(out) if _fits(v, ftype)]
    if root is not None:

        def distance(v: Any) -> float:
            x = _on_axis(v, ftype)
            return abs(x - root) if x is not None else math.inf

        out.sort(key=distance)
    return out, root


def _fits(value: Any, ftype: FieldType) -> bool:
    if value is None:
        return ftype.nullable
    if ftype.base == "ref":
        return isinstance(value, str)
    if ftype.base == "int" and isinstance(value, float):
        return value.is_integer()
    return ftype.accepts(value) or (ftype.base == "int" and isinstance(value, int))


def _type_of(bp: Blueprint, op: Operation, pivot: Pivot) -> FieldType:
    if isinstance(pivot, CountPivot):
        return FieldType(base="int" if pivot.node.kind == "count" else "float")
    if isinstance(pivot, ParamRef) and pivot.name in record_params(bp, op):
        return FieldType(base="ref", ref=record_params(bp, op)[pivot.name])
    return pivot.ftype


def atoms(node: Node) -> list[Node]:
    """The parts of a check that are met or broken one at a time: its ``and``-ed parts."""
    return conjuncts(node)


def _holds_all(fx: Fixture, conds: list[Condition]) -> bool:
    e = fx.env()
    return all(cond_holds(fx.bp, fx.op, c, e) for c in conds)


def meet(fx: Fixture, conds: list[Condition], *, boundary: bool = True) -> Fixture:
    """The fixture with every check met, each at its boundary where it has one (the value it
    turns at, the last allowed amount, 24 hours ahead to the minute)."""
    bp, op = fx.bp, fx.op
    order = sorted(range(len(conds)), key=lambda i: _rank(bp, op, conds[i]))
    done: list[Condition] = []
    used: set[str] = set()
    for i in order:
        cond = conds[i]
        node = condition_node(bp, op, cond)
        fx.route_all(node)
        when = when_node(cond)
        if when is not None:
            fx.route_all(when)
            fx = _meet_node(fx, when, done, used, cond, whole=False) or fx
        for atom in atoms(node):
            found = _meet_node(fx, atom, done, used, cond, whole=False, boundary=boundary)
            if found is None:
                break
            fx = found
        if not _holds_all(fx, [*done, cond]):
            # the parts met one at a time do not hold together: try the check as a whole
            found = _meet_node(fx, node, done, used, cond, whole=True, boundary=boundary)
            if found is None or not _holds_all(found, [*done, cond]):
                mine = {p.text for p in leaves(bp, op, node)}
                related = [
                    c
                    for c in done
                    if mine & {p.text for p in leaves(bp, op, condition_node(bp, op, c))}
                ]
                words = " and ".join(
                    unparse(condition_node(bp, op, c)) for c in [*(related or done), cond]
                )
                raise FixtureError(f"{op.name}: no records and arguments meet {words} together")
            fx = found
        done.append(cond)
    return fx


def _rank(bp: Blueprint, op: Operation, cond: Condition) -> tuple[int, int]:
    """Checks on parameters first, then those that follow fewer references (a check that pins
    a reference comes before the checks on the record it points at), counts last."""
    try:
        node = condition_node(bp, op, cond)
    except ExpressionError:
        return (9, 0)
    pivots = leaves(bp, op, node)
    has_count = any(isinstance(p, CountPivot) for p in pivots)
    hops = max((len(p.hops) for p in pivots if isinstance(p, Target)), default=-1)
    return (1 if has_count else 0, hops)


def _meet_node(
    fx: Fixture,
    atom: Node,
    done: list[Condition],
    used: set[str],
    cond: Condition,
    *,
    whole: bool,
    boundary: bool = True,
) -> Fixture | None:
    bp, op = fx.bp, fx.op
    e = fx.env()
    try:
        already = evaluate(atom, e) is True
    except ExpressionError:
        already = False
    pivots = leaves(bp, op, atom)
    # free pivots first: a value another check was met on is moved only when nothing else works
    pivots.sort(key=lambda p: (_pivot_key(fx, p) in used, isinstance(p, CountPivot)))
    for pivot in pivots:
        values, root = candidates(bp, op, fx, atom, pivot)
        if already and (root is None or not boundary):
            return fx
        for v in values:
            trial = _Trial(fx, pivot).put(v)
            if trial is None:
                continue
            te = trial.env()
            try:
                ok = evaluate(atom, te) is True
            except ExpressionError:
                ok = False
            if ok and all(cond_holds(bp, op, c, te) for c in done):
                used.add(_pivot_key(trial, pivot))
                return trial
    if already:
        return fx
    return _repair(fx, atom, done, pivots)


def _repair(fx: Fixture, atom: Node, done: list[Condition], pivots: list[Pivot]) -> Fixture | None:
    """Meet ``atom`` by moving one pivot even where that breaks checks already met, then meet
    those again with the other values they read (the moved pivot held): two values that must
    move together (a later return date and the later pickup that keeps a 30-day limit)."""
    bp, op = fx.bp, fx.op
    for pivot in pivots:
        values, _ = candidates(bp, op, fx, atom, pivot)
        for v in values[:12]:
            trial = _Trial(fx, pivot).put(v)
            if trial is None:
                continue
            try:
                if evaluate(atom, trial.env()) is not True:
                    continue
            except ExpressionError:
                continue
            frozen = {pivot.text}
            fixed = _remeet(trial, atom, done, frozen)
            if fixed is not None:
                return fixed
    return None


def _remeet(fx: Fixture, atom: Node, done: list[Condition], frozen: set[str]) -> Fixture | None:
    bp, op = fx.bp, fx.op
    for _ in range(len(done) + 1):
        e = fx.env()
        broken = [c for c in done if not cond_holds(bp, op, c, e)]
        if not broken:
            return fx
        cond = broken[0]
        node = condition_node(bp, op, cond)
        moved = None
        for part in atoms(node):
            for pivot in leaves(bp, op, part):
                if pivot.text in frozen:
                    continue
                values, _ = candidates(bp, op, fx, part, pivot)
                for v in values:
                    trial = _Trial(fx, pivot).put(v)
                    if trial is None:
                        continue
                    te = trial.env()
                    try:
                        if evaluate(atom, te) is not True:
                            continue
                    except ExpressionError:
                        continue
                    if cond_holds(bp, op, cond, te):
                        moved = trial
                        frozen = frozen | {pivot.text}
                        break
                if moved is not None:
                    break
            if moved is not None:
                break
        if moved is None:
            return None
        fx = moved
    return fx if all(cond_holds(bp, op, c, fx.env()) for c in done) else None


def _pivot_key(fx: Fixture, pivot: Pivot) -> str:
    if isinstance(pivot, CountPivot):
        return pivot.text
    try:
        return fx.where(pivot)
    except Exception:
        return pivot.text


@dataclass(frozen=True)
class Broken:
    """A fixture on which one check fails just past its boundary while the others hold."""

    fixture: Fixture
    pivot: str
    value: Any
    atom: str


def break_check(fx: Fixture, cond: Condition, others: list[Condition]) -> Broken | None:
    """The fixture with ``cond`` broken just past its boundary (its ``when`` still holding) and
    every one of ``others`` still met; None when no such state exists."""
    bp, op = fx.bp, fx.op
    node = condition_node(bp, op, cond)
    for atom in atoms(node):
        for pivot in leaves(bp, op, atom):
            values, _ = candidates(bp, op, fx, atom, pivot)
            for v in values:
                trial = _Trial(fx, pivot).put(v)
                if trial is None:
                    continue
                te = trial.env()
                if not applies(bp, op, cond, te) or cond_holds(bp, op, cond, te):
                    continue
                if all(cond_holds(bp, op, c, te) for c in others):
                    return Broken(trial, pivot.text, v, unparse(atom))
    return None


def lift_when(fx: Fixture, cond: Condition, others: list[Condition]) -> Broken | None:
    """A fixture on which ``cond``'s ``when`` does not hold and its check fails (so the call
    must still succeed), every one of ``others`` met; None when there is none."""
    when = when_node(cond)
    if when is None:
        return None
    broken = break_check(fx, cond, others)
    if broken is None:
        return None
    bp, op = fx.bp, fx.op
    base = broken.fixture
    for atom in atoms(when):
        for pivot in leaves(bp, op, atom):
            values, _ = candidates(bp, op, base, atom, pivot)
            for v in values:
                trial = _Trial(base, pivot).put(v)
                if trial is None:
                    continue
                te = trial.env()
                if applies(bp, op, cond, te):
                    continue
                try:
                    fails = evaluate(condition_node(bp, op, cond), te) is not True
                except ExpressionError:
                    fails = True
                if fails and all(cond_holds(bp, op, c, te) for c in others):
                    return Broken(trial, pivot.text, v, unparse(atom))
    return None
