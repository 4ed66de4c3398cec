"""Paths, preconditions and effects of blueprint operations: what they name, whether they fit
the tables, and what they mean on live records at the clock.

A path names a value an operation sees:

- ``$quantity``: the parameter ``quantity``;
- ``order_id.status``: the field ``status`` of the ``orders`` record whose key the parameter
  ``order_id`` holds (a parameter names a record when it is a table's key field, or ends with
  ``_<key field>``: ``new_slot_id``);
- ``booking_id.sailing_id.departs_at``: a field of a record reached through a reference;
- ``new.amount``: a field of the record a ``create`` operation adds;
- a bare field (``status``) is the operation's own record: ``<key>.status`` for read and update,
  ``new.status`` for the effects of create.

Semantics, stated in the prompts the same way: a null value fails every test but ``is_null``;
``within_last_days N`` holds when the date is on or after the clock's date minus N days (a
datetime: at or after now minus N days); ``at_least_days_ahead N`` when it is on or after today
plus N days (now plus N days); ``at_least_hours_ahead H`` when a datetime is at or after now plus
H hours. The host evaluates the same semantics (this module) for unit tests, data coverage and
refusal tasks; the LLM writes them into the tool code.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from maestro.agents.codegen.blueprint import (
    Condition,
    FieldType,
    Operation,
    Test,
    parse_when,
)

if TYPE_CHECKING:
    from maestro.agents.codegen.blueprint import Blueprint, BlueprintDraft

NUMERIC_TESTS = ("at_least", "at_most")
DATE_TESTS = tuple(t for t in typing.get_args(Test) if t.endswith(("_days", "_ahead")))
HOUR_TESTS = ("at_least_hours_ahead", "less_than_hours_ahead")
NULL_TESTS = ("is_null", "not_null")
#: Most reference hops a path may follow.
MAX_HOPS = 2


@dataclass(frozen=True)
class Target:
    """A record field a path names: from the record ``root`` names, through ``hops``."""

    root: str
    hops: tuple[str, ...]
    field: str
    #: The root record's table, then the table after each hop.
    tables: tuple[str, ...]
    ftype: FieldType

    @property
    def table(self) -> str:
        return self.tables[-1]

    @property
    def text(self) -> str:
        return ".".join((self.root, *self.hops, self.field))


@dataclass(frozen=True)
class ParamRef:
    """A parameter's value."""

    name: str
    ftype: FieldType

    @property
    def text(self) -> str:
        return f"${self.name}"


Subject = Target | ParamRef


def record_params(bp: BlueprintDraft, op: Operation) -> dict[str, str]:
    """Parameters that name a record, with its table: a table's key field, or ``..._<key>``."""
    keys = {e.key: e.table for e in bp.entities}
    out: dict[str, str] = {}
    for p in op.params:
        if p in keys:
            out[p] = keys[p]
            continue
        for key, table in sorted(keys.items(), key=lambda kv: -len(kv[0])):
            if p.endswith("_" + key):
                out[p] = table
                break
    return out


def own_root(bp: BlueprintDraft, op: Operation, *, effect: bool = False) -> str | None:
    """What a bare field means: the key parameter of read and update, ``new`` for create's
    effects; None when a bare field means nothing (lookup, list, create's checks)."""
    if op.kind in ("read", "update"):
        return bp.entity(op.table).key
    if op.kind == "create" and effect:
        return "new"
    return None


def resolve(bp: BlueprintDraft, op: Operation, text: str, *, effect: bool = False) -> Subject:
    """The parameter or record field ``text`` names in ``op``; ValueError saying why not."""
    if text.startswith("$"):
        name = text[1:]
        types = op.param_types()
        if name not in types:
            raise ValueError(f"{text!r} names no parameter of {op.name}; they are {list(types)}")
        return ParamRef(name, types[name])
    parts = text.split(".")
    if len(parts) == 1:
        root = own_root(bp, op, effect=effect)
        if root is None:
            raise ValueError(
                f"{text!r} needs a record: write <parameter>.{text}, such as "
                f"{next(iter(record_params(bp, op)), 'customer_id')}.{text}"
            )
        parts = [root, text]
    root, fields = parts[0], parts[1:]
    if root == "new":
        if op.kind != "create" or not effect:
            raise ValueError(f"{text!r}: 'new' is the record a create operation adds, in its sets")
        table = op.table
    else:
        named = record_params(bp, op)
        if root not in named:
            raise ValueError(
                f"{text!r}: {root!r} is not a parameter of {op.name} that names a record "
                f"(a parameter named like a table's key, such as {sorted(named) or ['order_id']})"
            )
        table = named[root]
    if len(fields) - 1 > MAX_HOPS:
        raise ValueError(f"{text!r} follows more than {MAX_HOPS} references")
    tables = [table]
    for hop in fields[:-1]:
        ftype = bp.entity(tables[-1]).field_types().get(hop)
        if ftype is None or ftype.base != "ref" or ftype.ref is None:
            raise ValueError(f"{text!r}: {tables[-1]}.{hop} is not a ref field")
        tables.append(ftype.ref)
    entity = bp.entity(tables[-1])
    field = fields[-1]
    if field == entity.key:
        raise ValueError(f"{text!r}: the key {field!r} cannot be checked or set; name the record")
    ftype = entity.field_types().get(field)
    if ftype is None:
        raise ValueError(f"{text!r}: {tables[-1]} has no field {field!r}")
    return Target(root, tuple(fields[:-1]), field, tuple(tables), ftype)


def rooted_at(
    bp: BlueprintDraft, op: Operation, conditions: list[Condition], param: str
) -> list[Condition]:
    """The conditions on the record ``param`` names (or reached from it) that compare with
    constants only: those one record decides alone."""
    out = []
    for c in conditions:
        subject = resolve(bp, op, c.check)
        other = isinstance(c.value, str) and c.value.startswith("$")
        if isinstance(subject, Target) and subject.root == param and not other:
            out.append(c)
    return out


# ----- meaning at the clock -----------------------------------------------------------------------

Getter = Callable[[str, str], dict[str, Any] | None]


def as_when(value: Any, base: str) -> date | datetime | None:
    """A stored date or datetime value as an object (the clock's own objects pass through)."""
    if isinstance(value, datetime):
        return value if base == "datetime" else value.date()
    if isinstance(value, date):
        return value if base == "date" else None
    return parse_when(value, base)


def holds(
    cond: Condition, value: Any, ftype: FieldType, args: dict[str, Any], clock: datetime
) -> bool:
    """Whether ``cond`` holds of ``value`` (a JSON value of ``ftype``) with these arguments."""
    test = cond.test
    if test == "is_null":
        return value is None
    if value is None:
        return False
    if test == "not_null":
        return True
    expected = argument_value(cond.value, args)
    if test == "in":
        return isinstance(expected, list) and value in expected
    if test == "not_in":
        return isinstance(expected, list) and value not in expected
    if test == "equals":
        return bool(value == expected)
    if test in NUMERIC_TESTS:
        if not isinstance(expected, int | float) or not isinstance(value, int | float):
            return False
        return value >= expected if test == "at_least" else value <= expected
    when = as_when(value, ftype.base)
    if when is None or not isinstance(expected, int | float):
        return False
    edge = date_edge(test, int(expected), clock, datetime_field=isinstance(when, datetime))
    if isinstance(when, datetime) != isinstance(edge, datetime):
        return False  # hours on a date field: rejected when the blueprint was checked
    if test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead"):
        return bool(when >= edge)
    return bool(when < edge)


def date_edge(test: str, n: int, clock: datetime, *, datetime_field: bool) -> date | datetime:
    """The first date (or instant) on the far side of a date test's boundary: a value at it
    passes ``within_last_days``/``at_least_*`` and fails ``older_than_days``/``less_than_*``."""
    if test in HOUR_TESTS:
        return clock + timedelta(hours=n)
    days = -n if test in ("within_last_days", "older_than_days") else n
    base: date | datetime = clock if datetime_field else clock.date()
    return base + timedelta(days=days)


def argument_value(value: Any, args: dict[str, Any]) -> Any:
    """A condition's value with ``$param`` replaced by the argument."""
    if isinstance(value, str) and value.startswith("$") and value[1:] in args:
        return args[value[1:]]
    return value


@dataclass(frozen=True)
class Address:
    """Where a target lives on a given state: one field of one record."""

    table: str
    key: str
    field: str


def locate(target: Target, args: dict[str, Any], get: Getter) -> Address | None:
    """The record field ``target`` names with these arguments, or None when a record on the way
    does not exist or a reference on the way is null."""
    if target.root == "new":
        return None
    key = args.get(target.root)
    table = target.tables[0]
    for hop, next_table in zip(target.hops, target.tables[1:], strict=True):
        record = get(table, key) if isinstance(key, str) else None
        if record is None:
            return None
        key, table = record.get(hop), next_table
    if not isinstance(key, str) or get(table, key) is None:
        return None
    return Address(table, key, target.field)


def read(bp: BlueprintDraft, op: Operation, text: str, args: dict[str, Any], get: Getter) -> Any:
    """The value a check's subject has on a state (``None`` when absent)."""
    subject = resolve(bp, op, text)
    if isinstance(subject, ParamRef):
        return args.get(subject.name)
    where = locate(subject, args, get)
    record = get(where.table, where.key) if where else None
    return record.get(where.field) if record and where else None


def all_hold(
    bp: BlueprintDraft,
    op: Operation,
    conditions: list[Condition],
    args: dict[str, Any],
    get: Getter,
    clock: datetime,
) -> bool:
    """Whether every condition holds on a state; a missing record fails its conditions."""
    for cond in conditions:
        subject = resolve(bp, op, cond.check)
        value = read(bp, op, cond.check, args, get)
        if not holds(cond, value, subject.ftype, args, clock):
            return False
    return True


_WORDS = {
    "in": "is one of",
    "not_in": "is none of",
    "equals": "equals",
    "at_least": ">=",
    "at_most": "<=",
}


def condition_text(cond: Condition, ftype: FieldType, clock: datetime) -> str:
    """A condition in words, with the absolute date of a clock-relative boundary."""
    subject, test, value = cond.check, cond.test, cond.value
    if test == "is_null":
        return f"{subject} is null"
    if test == "not_null":
        return f"{subject} is not null"
    if test in _WORDS:
        shown = ", ".join(repr(v) for v in value) if isinstance(value, list) else repr(value)
        if isinstance(value, str) and value.startswith("$"):
            shown = value
        return f"{subject} {_WORDS[test]} {shown}"
    n = int(value) if isinstance(value, int | float) else 0
    dt = ftype.base == "datetime"
    edge = date_edge(test, n, clock, datetime_field=dt)
    when = edge.isoformat()
    origin = "now" if dt or test in HOUR_TESTS else "today"
    unit = "hours" if test in HOUR_TESTS else "days"
    sign = "-" if test in ("within_last_days", "older_than_days") else "+"
    span = f"{origin} {sign} {n} {unit}"
    if test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead"):
        return f"{subject} is on or after {span} ({when} or later)"
    return f"{subject} is before {span} (earlier than {when})"


def check_words(bp: Blueprint, op: Operation, cond: Condition) -> str:
    """A check in words, its subject written out in full (``booking_id.status``, not
    ``status``), with the absolute date of a clock-relative boundary."""
    subject = resolve(bp, op, cond.check)
    shown = cond.model_copy(update={"check": subject.text})
    return condition_text(shown, subject.ftype, bp.clock)
