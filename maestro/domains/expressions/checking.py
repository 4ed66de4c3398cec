"""Types and names of the expression language: what a path names in a scope, and the type of
every expression, with a located problem for each that does not fit (a date plus a text, a
comparison of an enum with a value it does not have, a law naming a field its table lacks).

A scope says what names mean where the expression sits: in an operation, ``$quantity`` is a
parameter, ``booking_id.status`` a field of the record the parameter ``booking_id`` names, a bare
field the operation's own record; in a law, a bare field is the record the law is about, and
``self`` that record (its key). Inside ``count(T where ...)``, a name that is a field of ``T`` is
the counted record's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

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
    unparse,
)

Base = Literal[
    "int", "float", "str", "enum", "bool", "date", "datetime", "duration", "ref", "list", "null"
]
#: Most references one path may follow.
MAX_HOPS = 3
#: The row of an aggregate's ``where``, as a path root.
ROW = "@row"


@dataclass(frozen=True)
class VType:
    """The type of a value: a field's, a parameter's, an expression's."""

    base: Base
    nullable: bool = False
    choices: tuple[str, ...] = ()
    ref: str | None = None
    item: VType | None = None

    @property
    def numeric(self) -> bool:
        return self.base in ("int", "float")

    @property
    def temporal(self) -> bool:
        return self.base in ("date", "datetime")

    @property
    def textual(self) -> bool:
        return self.base in ("str", "enum", "ref")

    def text(self) -> str:
        if self.base == "enum":
            shown = "enum:" + "|".join(self.choices)
        elif self.base == "ref":
            shown = f"ref:{self.ref}"
        elif self.base == "list":
            shown = f"list of {self.item.text() if self.item else 'values'}"
        else:
            shown = self.base
        return shown + ("?" if self.nullable and self.base != "null" else "")

    def plain(self) -> VType:
        return replace(self, nullable=False)


NULL = VType("null", nullable=True)
BOOL = VType("bool")
INT = VType("int")
FLOAT = VType("float")
DATE = VType("date")
DATETIME = VType("datetime")
DURATION = VType("duration")


@dataclass(frozen=True)
class TableShape:
    """A table as expressions see it: its key field and its fields' types."""

    name: str
    key: str
    fields: Mapping[str, VType]


@dataclass(frozen=True)
class Scope:
    """What names mean where an expression sits.

    ``params``: the parameters (``$name``), a record parameter typed ``ref:<table>``;
    ``records``: the names that are records (a record parameter, ``new``, ``self``, a create's
    other new records), each with its table; ``own``: the record a bare field belongs to (a
    name of ``records``), or None; ``row``: inside an aggregate's ``where``, the counted table.
    """

    tables: Mapping[str, TableShape]
    params: Mapping[str, VType] = field(default_factory=dict)
    records: Mapping[str, str] = field(default_factory=dict)
    own: str | None = None
    row: str | None = None


@dataclass(frozen=True)
class Resolved:
    """What one path names: a parameter's value, or a field (or the key) of a record reached
    from ``root`` through ``hops``."""

    kind: Literal["param", "field"]
    root: str
    hops: tuple[str, ...]
    #: The field read at the end; None when the path names the record itself (its key).
    field: str | None
    #: The root record's table, then the table after each hop.
    tables: tuple[str, ...]
    vtype: VType

    @property
    def table(self) -> str:
        return self.tables[-1]


def resolve_path(path: Path, scope: Scope) -> Resolved:
    """What ``path`` names in ``scope``; ExpressionError saying why it names nothing."""
    parts = path.parts
    head = parts[0]
    if not path.dollar and scope.row is not None:
        shape = scope.tables[scope.row]
        if head in shape.fields or head == shape.key:
            # The counted record's own fields and key: ``count(reservations where
            # reservation_id != self)``; an outer parameter is written ``$name``.
            return _walk(path, scope, ROW, scope.row, parts)
    if path.dollar:
        if head not in scope.params:
            raise ExpressionError(
                f"{path.text!r} names no parameter; the parameters are "
                f"{sorted(scope.params) or 'none'}"
            )
        if len(parts) == 1:
            return Resolved("param", head, (), None, (), scope.params[head])
        if head not in scope.records:
            raise ExpressionError(
                f"{path.text!r}: the parameter {head!r} names no record, so it has no fields"
            )
        return _walk(path, scope, head, scope.records[head], parts[1:])
    if scope.own is not None and len(parts) == 1:
        # A bare name is the own record's field first (``patient_id`` of a slot), and only
        # then a record parameter's key.
        own_shape = scope.tables.get(scope.records[scope.own])
        if own_shape is not None and head in own_shape.fields:
            return _walk(path, scope, scope.own, scope.records[scope.own], parts)
    if head in scope.records:
        return _walk(path, scope, head, scope.records[head], parts[1:])
    if scope.own is not None:
        own = scope.tables.get(scope.records[scope.own])
        if own is not None and len(parts) > 1 and head not in own.fields and head != own.key:
            raise ExpressionError(
                f"{path.text!r}: {head!r} is neither a parameter that names a record "
                f"({sorted(r for r in scope.records if r != 'self') or 'none'}) nor a field of "
                f"{own.name} ({sorted(own.fields)})"
            )
        return _walk(path, scope, scope.own, scope.records[scope.own], parts)
    hint = f" (the parameter is ${head})" if head in scope.params else ""
    raise ExpressionError(
        f"{path.text!r} names nothing here{hint}: write $<parameter>, or "
        f"<record>.<field> with a record among {sorted(scope.records) or ['none']}"
    )


def _walk(path: Path, scope: Scope, root: str, table: str, rest: tuple[str, ...]) -> Resolved:
    tables = [table]
    hops: list[str] = []
    if not rest:
        return Resolved("field", root, (), None, (table,), VType("ref", ref=table))
    if len(rest) - 1 > MAX_HOPS:
        raise ExpressionError(f"{path.text!r} follows more than {MAX_HOPS} references")
    nullable = False
    for i, name in enumerate(rest):
        shape = scope.tables.get(tables[-1])
        if shape is None:
            raise ExpressionError(f"{path.text!r}: no table {tables[-1]!r}")
        last = i == len(rest) - 1
        if name == shape.key:
            if not last:
                raise ExpressionError(f"{path.text!r}: {tables[-1]}.{name} is the key, not a ref")
            vtype = VType("ref", ref=tables[-1], nullable=nullable)
            return Resolved("field", root, tuple(hops), None, tuple(tables), vtype)
        ftype = shape.fields.get(name)
        if ftype is None:
            raise ExpressionError(
                f"{path.text!r}: {tables[-1]} has no field {name!r}; its fields are "
                f"{sorted(shape.fields)}"
            )
        if last:
            vtype = replace(ftype, nullable=ftype.nullable or nullable)
            return Resolved("field", root, tuple(hops), name, tuple(tables), vtype)
        if ftype.base != "ref" or ftype.ref is None:
            raise ExpressionError(
                f"{path.text!r}: {tables[-1]}.{name} is a {ftype.text()}, not a ref to follow"
            )
        nullable = nullable or ftype.nullable
        hops.append(name)
        tables.append(ftype.ref)
    raise AssertionError("unreachable")


# ----- types ------------------------------------------------------------------------------------


def _where(node: Node) -> str:
    return f"in {unparse(node)!r}"


def _nullable(*types: VType) -> bool:
    return any(t.nullable for t in types)


def _lit_type(value: object) -> VType:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    return VType("str")


def infer(node: Node, scope: Scope) -> VType:
    """The type of ``node`` in ``scope``; ExpressionError naming the part that does not fit."""
    if isinstance(node, Lit):
        return _lit_type(node.value)
    if isinstance(node, ListLit):
        if not node.items:
            raise ExpressionError(f"{_where(node)}: an empty list")
        types = [infer(i, scope) for i in node.items]
        item = types[0]
        for t in types[1:]:
            if not comparable(item, t, "="):
                raise ExpressionError(
                    f"{_where(node)}: the list mixes {item.text()} and {t.text()}"
                )
        return VType("list", item=item.plain())
    if isinstance(node, Clock):
        return DATE if node.name == "today" else DATETIME
    if isinstance(node, Path):
        return resolve_path(node, scope).vtype
    if isinstance(node, Neg):
        t = infer(node.operand, scope)
        if not (t.numeric or t.base == "duration"):
            raise ExpressionError(f"{_where(node)}: minus a {t.text()}")
        return t
    if isinstance(node, Arith):
        return _arith(node, infer(node.left, scope), infer(node.right, scope))
    if isinstance(node, Compare):
        left, right = infer(node.left, scope), infer(node.right, scope)
        if left.base == "null" or right.base == "null":
            if node.op not in ("=", "!="):
                raise ExpressionError(f"{_where(node)}: null has no order; write 'x is null'")
            return BOOL
        if not comparable(left, right, node.op):
            raise ExpressionError(
                f"{_where(node)}: a {left.text()} cannot be compared with a {right.text()}"
                + _compare_hint(left, right)
            )
        _enum_literals(node, node.left, left, [node.right])
        _enum_literals(node, node.right, right, [node.left])
        return BOOL
    if isinstance(node, Member):
        operand, options = infer(node.operand, scope), infer(node.options, scope)
        if options.base != "list" or options.item is None:
            raise ExpressionError(f"{_where(node)}: 'in' needs a list such as ['a', 'b']")
        if not comparable(operand, options.item, "="):
            raise ExpressionError(
                f"{_where(node)}: a {operand.text()} is never in a {options.text()}"
            )
        if isinstance(node.options, ListLit):
            _enum_literals(node, node.operand, operand, list(node.options.items))
        return BOOL
    if isinstance(node, IsNull):
        t = infer(node.operand, scope)
        if not t.nullable:
            raise ExpressionError(
                f"{_where(node)}: {unparse(node.operand)} is a {t.text()} that is never null"
            )
        return BOOL
    if isinstance(node, Not):
        _boolean(node.operand, scope)
        return BOOL
    if isinstance(node, Logic):
        for part in node.items:
            _boolean(part, scope)
        return BOOL
    if isinstance(node, Call):
        return _call(node, [infer(a, scope) for a in node.args])
    if isinstance(node, Aggregate):
        return _aggregate(node, scope)
    raise ExpressionError(f"not an expression: {node!r}")


def _boolean(node: Node, scope: Scope) -> None:
    t = infer(node, scope)
    if t.base != "bool":
        raise ExpressionError(
            f"{_where(node)}: a {t.text()} where a condition (true or false) is needed"
        )


def check_condition(node: Node, scope: Scope) -> None:
    """ExpressionError unless ``node`` is a condition (a bool) in ``scope``."""
    _boolean(node, scope)


def comparable(left: VType, right: VType, op: str) -> bool:
    """Whether two types may meet in a comparison (``=`` and ``!=`` for texts and flags, every
    comparison for numbers, dates, datetimes and durations of the same kind)."""
    if left.numeric and right.numeric:
        return True
    ordered = op not in ("=", "!=")
    for kind in ("date", "datetime", "duration"):
        if left.base == kind and right.base == kind:
            return True
    if ordered:
        return False
    if left.base == "bool" and right.base == "bool":
        return True
    if left.textual and right.textual:
        if left.base == "ref" and right.base == "ref":
            return left.ref == right.ref
        if left.base == "enum" and right.base == "enum":
            return bool(set(left.choices) & set(right.choices))
        return not (left.base == "ref" and right.base == "enum") and not (
            left.base == "enum" and right.base == "ref"
        )
    return False


def _compare_hint(left: VType, right: VType) -> str:
    pair = {left.base, right.base}
    if pair == {"date", "datetime"}:
        return ": compare a datetime with now (or date(x) with today)"
    if pair <= {"date", "datetime", "int", "float"} and pair & {"int", "float"}:
        return ": use days_between(a, b) for a number of days"
    if "enum" in pair and pair & {"int", "float"}:
        return ": an enum holds texts"
    return ""


def _enum_literals(node: Node, side: Node, stype: VType, others: list[Node]) -> None:
    """A text constant compared with an enum must be one of its values."""
    if stype.base != "enum":
        return
    for other in others:
        if (
            isinstance(other, Lit)
            and isinstance(other.value, str)
            and other.value not in stype.choices
        ):
            raise ExpressionError(
                f"{_where(node)}: {other.value!r} is not a value of {unparse(side)} "
                f"({'|'.join(stype.choices)})"
            )


def _arith(node: Arith, left: VType, right: VType) -> VType:
    nullable = _nullable(left, right)
    op = node.op
    if left.numeric and right.numeric:
        base: Base = "int" if left.base == right.base == "int" and op != "/" else "float"
        return VType(base, nullable=nullable)
    if op in ("+", "-") and left.temporal and right.base == "duration":
        return VType(left.base, nullable=nullable)
    if op == "+" and left.base == "duration" and right.temporal:
        return VType(right.base, nullable=nullable)
    if op in ("+", "-") and left.base == right.base == "duration":
        return VType("duration", nullable=nullable)
    if op in ("*", "/") and left.base == "duration" and right.numeric:
        return VType("duration", nullable=nullable)
    if op == "*" and left.numeric and right.base == "duration":
        return VType("duration", nullable=nullable)
    hint = ""
    if op == "-" and left.temporal and right.temporal:
        hint = ": days_between(a, b) or hours_between(a, b) give the time between two dates"
    elif left.temporal or right.temporal:
        hint = ": a date moves by days(n) or hours(n), such as pickup_at + days($extra_days)"
    raise ExpressionError(f"{_where(node)}: a {left.text()} {op} a {right.text()}{hint}")


def _call(node: Call, args: list[VType]) -> VType:
    name, n = node.name, len(args)
    nullable = _nullable(*args)

    def bad(what: str) -> ExpressionError:
        return ExpressionError(f"{_where(node)}: {name}() takes {what}")

    if name == "round":
        if n not in (1, 2) or not args[0].numeric or (n == 2 and args[1].base != "int"):
            raise bad("a number and optionally a whole number of decimals: round(x, 2)")
        return VType("float" if n == 2 else "int", nullable=nullable)
    if name in ("min", "max"):
        if n < 2:
            raise bad("two or more values")
        first = args[0]
        if all(a.numeric for a in args):
            whole = all(a.base == "int" for a in args)
            return VType("int" if whole else "float", nullable=nullable)
        if all(
            a.base == first.base and first.base in ("date", "datetime", "duration") for a in args
        ):
            return VType(first.base, nullable=nullable)
        raise bad("numbers, or dates, datetimes or durations of one kind")
    if name == "abs":
        if n != 1 or not (args[0].numeric or args[0].base == "duration"):
            raise bad("one number")
        return args[0]
    if name in ("days", "hours"):
        if n != 1 or not args[0].numeric:
            raise bad("one number: days(3), hours($hours)")
        return VType("duration", nullable=nullable)
    if name == "days_between":
        if n != 2 or not all(a.temporal for a in args):
            raise bad("two dates or datetimes: days_between(pickup_at, returned_at)")
        return VType("int", nullable=nullable)
    if name == "hours_between":
        if n != 2 or not all(a.base == "datetime" for a in args):
            raise bad("two datetimes")
        return VType("float", nullable=nullable)
    if name == "if":
        if n != 3 or args[0].base != "bool":
            raise bad("a condition and two values: if(tier = 1, tier1_copay, tier2_copay)")
        a, b = args[1], args[2]
        if a.base == "null":
            return replace(b, nullable=True)
        if b.base == "null":
            return replace(a, nullable=True)
        if not comparable(a, b, "="):
            raise bad(f"two values of one type, not a {a.text()} and a {b.text()}")
        if a.numeric and b.numeric and a.base != b.base:
            return VType("float", nullable=a.nullable or b.nullable)
        return replace(a, nullable=a.nullable or b.nullable)
    if name == "coalesce":
        if n < 2:
            raise bad("two or more values: coalesce(fuel_out, 0)")
        known = [a for a in args if a.base != "null"]
        first = known[0] if known else args[0]
        for other in known[1:]:
            if not comparable(first, other, "="):
                raise bad(f"values of one type, not a {first.text()} and a {other.text()}")
        whole = all(a.base == "int" for a in known)
        base = first.base if not all(a.numeric for a in known) else ("int" if whole else "float")
        return replace(first, base=base, nullable=args[-1].nullable)
    if name == "date":
        if n != 1 or not (args[0].temporal or args[0].base == "str"):
            raise bad("one date, datetime, or a text holding one (YYYY-MM-DD...)")
        return VType("date", nullable=nullable or args[0].base == "str")
    if name == "datetime":
        if n != 1 or args[0].base not in ("datetime", "str"):
            raise bad("a datetime, or a text holding one (YYYY-MM-DDTHH:MM:SS)")
        return VType("datetime", nullable=nullable or args[0].base == "str")
    raise ExpressionError(f"{_where(node)}: unknown function {name!r}")


def _aggregate(node: Aggregate, scope: Scope) -> VType:
    shape = scope.tables.get(node.table)
    if shape is None:
        raise ExpressionError(
            f"{_where(node)}: no table {node.table!r}; tables are {sorted(scope.tables)}"
        )
    if node.kind == "count" and node.field is not None:
        raise ExpressionError(f"{_where(node)}: count takes a table, sum(table.field) a field")
    out = INT
    if node.kind == "sum":
        if node.field is None:
            raise ExpressionError(f"{_where(node)}: sum needs a number field: sum(table.field)")
        ftype = shape.fields.get(node.field)
        if ftype is None or not ftype.numeric:
            raise ExpressionError(
                f"{_where(node)}: {node.table}.{node.field} is not a number field"
            )
        out = VType(ftype.base)
    if node.where is not None:
        if scope.row is not None or any(isinstance(n, Aggregate) for n in _descendants(node.where)):
            raise ExpressionError(
                f"{_where(node)}: a count or sum inside another's where is not allowed (its "
                "cost grows with the square of the table)"
            )
        _boolean(node.where, replace(scope, row=node.table))
    return out


def _descendants(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = list(node.children())
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children())
    return out
