"""The meaning of an expression on a database at the clock.

Values: numbers, texts, flags, dates and datetimes (stored as ISO texts, read as dates by
their field's type), durations (``days(n)``, ``hours(n)``), lists. A null propagates: a sum
with a null is null, a comparison with a null is neither true nor false (None), ``and`` is
false as soon as one side is false, ``or`` true as soon as one side is true. A check (a
precondition) holds only when its value is true; a law is broken only when its value is false,
so a law about a null value is not broken by it.

Division by zero, and a date pushed out of the calendar, raise :class:`EvaluationError`
naming the expression: a located problem, never a crash of the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from maestro.domains.expressions.checking import ROW, Scope, VType, resolve_path
from maestro.domains.expressions.syntax import (
    Aggregate,
    Arith,
    Call,
    Clock,
    Compare,
    ExpressionError,
    IsNull,
    ListLit,
    Lit,
    Logic,
    Member,
    Neg,
    Node,
    Not,
    Path,
    conjuncts,
    unparse,
    walk,
)

Record = Mapping[str, Any]
Getter = Callable[[str, str], Record | None]
Rows = Callable[[str], Iterable[tuple[str, Record]]]


class EvaluationError(ExpressionError):
    """An expression that has no value on this state (a division by zero, a date out of range)."""


_EPS = 1e-9


@dataclass
class Env:
    """A state to evaluate on: records by key (``get``), every record of a table (``rows``,
    for aggregates), the arguments of a call, the records the scope's names stand for, and the
    clock."""

    scope: Scope
    get: Getter
    rows: Rows
    clock: datetime
    args: Mapping[str, Any] = field(default_factory=dict)
    #: Keys of the scope's record names (``self``, ``new``, a record parameter from ``args``).
    roots: Mapping[str, Any] = field(default_factory=dict)
    row: tuple[str, str] | None = None
    _index: dict[tuple[str, str], dict[Any, list[str]]] = field(default_factory=dict)
    #: Steps (parts evaluated, records counts read) still allowed, shared by every evaluation
    #: on this budget (None: unbounded); past it an :class:`EvaluationError`.
    budget: list[int] | None = None

    def __post_init__(self) -> None:
        self.clock = naive(self.clock)

    def key_of(self, root: str) -> Any:
        if root == ROW:
            return self.row[1] if self.row else None
        if root in self.roots:
            return self.roots[root]
        return self.args.get(root)

    def index(self, table: str, fname: str) -> dict[Any, list[str]]:
        """Keys of ``table`` by the value of one field, built once per state."""
        found = self._index.get((table, fname))
        if found is None:
            found = {}
            for key, rec in self.rows(table):
                value = key if fname == self.scope.tables[table].key else rec.get(fname)
                if isinstance(value, list | dict):
                    continue
                found.setdefault(value, []).append(key)
            self._index[(table, fname)] = found
        return found

    def within(self, row: tuple[str, str]) -> Env:
        """The environment inside an aggregate's ``where``, on one counted record."""
        scope = replace(self.scope, row=row[0])
        return Env(
            scope,
            self.get,
            self.rows,
            self.clock,
            self.args,
            self.roots,
            row,
            self._index,
            self.budget,
        )


def read_value(value: Any, vtype: VType) -> Any:
    """A stored JSON value as the expression sees it (a date text becomes a date)."""
    if value is None:
        return None
    if vtype.base == "date":
        if isinstance(value, datetime):
            return value.date()
        if isinstance(value, date):
            return value
        try:
            return date.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            return None
    if vtype.base == "datetime":
        if isinstance(value, datetime):
            return naive(value)
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            return None
        return naive(parsed) if parsed is not None else None
    return value


def naive(moment: datetime) -> datetime:
    """A datetime on the world's clock: one with an offset is moved to UTC, then left without
    it (a domain's clock and its records are naive: UTC)."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)


def stored(value: Any) -> Any:
    """A value as a record stores it (a date as ISO text; money to 2 decimals is the caller's)."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    return value


def evaluate(node: Node, env: Env) -> Any:
    """The value of ``node`` on ``env``'s state (None for null)."""
    if env.budget is not None:
        env.budget[0] -= 1
        if env.budget[0] < 0:
            raise EvaluationError(f"{unparse(node)[:80]!r}: the evaluation budget is spent")
    if isinstance(node, Lit):
        return node.value
    if isinstance(node, ListLit):
        return [evaluate(i, env) for i in node.items]
    if isinstance(node, Clock):
        return env.clock.date() if node.name == "today" else env.clock
    if isinstance(node, Path):
        return _path_value(node, env)
    if isinstance(node, Neg):
        v = evaluate(node.operand, env)
        return None if v is None else -v
    if isinstance(node, Arith):
        return _arith(node, evaluate(node.left, env), evaluate(node.right, env))
    if isinstance(node, Compare):
        return compare(node.op, evaluate(node.left, env), evaluate(node.right, env))
    if isinstance(node, Member):
        v, options = evaluate(node.operand, env), evaluate(node.options, env)
        if v is None or not isinstance(options, list):
            return None
        answers = [compare("=", v, o) for o in options]
        if True in answers:
            return not node.negated
        if None in answers:
            return None  # not among the known options, and a null one may be it
        return node.negated
    if isinstance(node, IsNull):
        return (evaluate(node.operand, env) is None) != node.negated
    if isinstance(node, Not):
        v = evaluate(node.operand, env)
        return None if v is None else not v
    if isinstance(node, Logic):
        return _logic(node, env)
    if isinstance(node, Call):
        if node.name == "coalesce":
            for arg in node.args:
                v = evaluate(arg, env)
                if v is not None:
                    return v
            return None
        if node.name == "if":
            cond = evaluate(node.args[0], env)
            if cond is None:
                return None
            return evaluate(node.args[1] if cond else node.args[2], env)
        return _call(node, [evaluate(a, env) for a in node.args])
    if isinstance(node, Aggregate):
        return _aggregate(node, env)
    raise ExpressionError(f"not an expression: {node!r}")


def holds(node: Node, env: Env) -> bool:
    """Whether a condition is true (a null value is not)."""
    return evaluate(node, env) is True


def _path_value(path: Path, env: Env) -> Any:
    r = resolve_path(path, env.scope)
    if r.kind == "param":
        return read_value(env.args.get(r.root), r.vtype)
    key = env.key_of(r.root)
    for hop, table in zip(r.hops, r.tables, strict=False):
        record = env.get(table, key) if isinstance(key, str) else None
        if record is None:
            return None
        key = record.get(hop)
    if not isinstance(key, str):
        return None
    record = env.get(r.table, key)
    if record is None:
        return None
    if r.field is None:
        return key
    return read_value(record.get(r.field), r.vtype)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _same_number(a: int | float, b: int | float) -> bool:
    """Equal numbers: whole numbers exactly; with a float among them, within a part in 10^9
    (so 0.1 + 0.2 = 0.3), however large the numbers (no conversion that overflows)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    try:
        scale = max(1.0, abs(float(a)), abs(float(b)))
        return abs(float(a) - float(b)) <= _EPS * scale
    except OverflowError:
        return a == b


def _compare_numbers(op: str, a: int | float, b: int | float) -> bool:
    """Numbers compared consistently: what is equal is neither less nor greater."""
    same = _same_number(a, b)
    if op == "=":
        return same
    if op == "!=":
        return not same
    if op == "<":
        return not same and a < b
    if op == "<=":
        return same or a < b
    if op == ">":
        return not same and a > b
    return same or a > b


def compare(op: str, left: Any, right: Any) -> bool | None:
    """A comparison of two values; None when either is null or they are not comparable."""
    if left is None or right is None:
        return None
    if _is_number(left) and _is_number(right):
        return _compare_numbers(op, left, right)
    if type(left) is not type(right) and not (isinstance(left, str) and isinstance(right, str)):
        return None if op not in ("=", "!=") else (op == "!=")
    try:
        if op == "=":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == "<=":
            return bool(left <= right)
        if op == ">":
            return bool(left > right)
        return bool(left >= right)
    except TypeError:
        return None


def _logic(node: Logic, env: Env) -> bool | None:
    unknown = False
    for item in node.items:
        v = evaluate(item, env)
        if node.op == "and" and v is False:
            return False
        if node.op == "or" and v is True:
            return True
        if v is None:
            unknown = True
    if unknown:
        return None
    return node.op == "and"


def _arith(node: Arith, left: Any, right: Any) -> Any:
    if left is None or right is None:
        return None
    op = node.op
    try:
        if op in ("+", "-") and isinstance(right, timedelta) and _is_date(left):
            return _move_date(left, right if op == "+" else -right)
        if op == "+" and isinstance(left, timedelta) and _is_date(right):
            return _move_date(right, left)
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if isinstance(right, int | float) and not isinstance(right, bool) and right == 0:
            raise EvaluationError(f"division by zero in {unparse(node)!r}")
        return left / right
    except (OverflowError, ValueError) as exc:
        raise EvaluationError(f"{unparse(node)!r} has no value: {exc}") from None
    except TypeError:
        return None


def _is_date(v: Any) -> bool:
    return isinstance(v, date) and not isinstance(v, datetime)


def _move_date(day: date, by: timedelta) -> date:
    """A date moved by a duration, in whole days, rounding down (so ``d - hours(12)`` and
    ``d + hours(-12)`` are both the day before)."""
    return day + timedelta(days=math.floor(by.total_seconds() / 86400))


def round_half_up(x: float, digits: int = 0) -> float:
    """Round as money is rounded (2.345 -> 2.35), not to even."""
    try:
        q = Decimal(str(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return x
    return float(q)


def _call(node: Call, args: list[Any]) -> Any:
    name = node.name
    if any(a is None for a in args):
        return None
    try:
        if name == "round":
            digits = int(args[1]) if len(args) > 1 else 0
            value = round_half_up(float(args[0]), digits)
            return value if len(args) > 1 else int(value)
        if name == "min":
            return min(args)
        if name == "max":
            return max(args)
        if name == "abs":
            return abs(args[0])
        if name == "days":
            return timedelta(days=float(args[0]))
        if name == "hours":
            return timedelta(hours=float(args[0]))
        if name == "days_between":
            a, b = (x.date() if isinstance(x, datetime) else x for x in args)
            return (b - a).days
        if name == "hours_between":
            return (args[1] - args[0]).total_seconds() / 3600
        if name == "date":
            if isinstance(args[0], str):
                return read_value(args[0][:10], VType("date"))
            return args[0].date() if isinstance(args[0], datetime) else args[0]
        if name == "datetime":
            if isinstance(args[0], str):
                return read_value(args[0], VType("datetime"))
            return args[0]
    except (OverflowError, ValueError) as exc:
        raise EvaluationError(f"{unparse(node)!r} has no value: {exc}") from None
    except TypeError:
        return None
    raise EvaluationError(f"unknown function {name!r}")


def _row_free(node: Node, env: Env, table: str) -> bool:
    """Whether ``node`` reads nothing of the counted record (so it can select by index)."""
    inner = Scope(env.scope.tables, env.scope.params, env.scope.records, env.scope.own, table)
    for n in walk(node):
        if isinstance(n, Aggregate):
            return False
        if isinstance(n, Path):
            try:
                if resolve_path(n, inner).root == ROW:
                    return False
            except ExpressionError:
                return False
    return True


def _candidates(node: Aggregate, env: Env) -> Iterable[str] | None:
    """Keys worth testing: those an equality ``field = <outer value>`` of the where selects."""
    if node.where is None:
        return None
    shape = env.scope.tables[node.table]
    for part in conjuncts(node.where):
        if not isinstance(part, Compare) or part.op != "=":
            continue
        for mine, other in ((part.left, part.right), (part.right, part.left)):
            if (
                isinstance(mine, Path)
                and not mine.dollar
                and len(mine.parts) == 1
                and (mine.parts[0] in shape.fields or mine.parts[0] == shape.key)
                and _row_free(other, env, node.table)
            ):
                value = evaluate(other, env)
                if isinstance(value, float | date | datetime) or value is None:
                    return None  # compared with tolerance, or stored as text: scan instead
                return list(env.index(node.table, mine.parts[0]).get(value, []))
    return None


def _aggregate(node: Aggregate, env: Env) -> Any:
    keys = _candidates(node, env)
    rows: Iterable[tuple[str, Record]]
    if keys is None:
        rows = env.rows(node.table)
    else:
        rows = ((k, r) for k in keys if (r := env.get(node.table, k)) is not None)
    count, total = 0, 0.0
    whole = True
    for key, rec in rows:
        if env.budget is not None:
            env.budget[0] -= 1
            if env.budget[0] < 0:
                raise EvaluationError(
                    f"{unparse(node)!r} reads more records than its budget allows: select "
                    "the counted records by a reference (field = self, field = $param)"
                )
        if (
            node.where is not None
            and evaluate(node.where, env.within((node.table, key))) is not True
        ):
            continue
        count += 1
        if node.kind == "sum" and node.field is not None:
            v = rec.get(node.field)
            if isinstance(v, int | float) and not isinstance(v, bool):
                total += v
                whole = whole and isinstance(v, int)
    if node.kind == "count":
        return count
    if math.isfinite(total) and whole:
        return int(total)
    return total
