"""Paths, checks and effects of blueprint operations in the expression language
(``maestro.domains.expressions``): what they name, whether they fit the tables, and what they
mean on live records at the clock.

A path names a value an operation sees:

- ``$quantity``: the parameter ``quantity``; ``$booking_id.fare``: a field of the record a
  parameter names, as it was before the call;
- ``order_id.status``: the field ``status`` of the ``orders`` record whose key the parameter
  ``order_id`` holds (a parameter names a record when it is a table's key field, or ends with
  ``_<key field>``: ``new_slot_id``);
- ``booking_id.sailing_id.departs_at``: a field of a record reached through a reference;
- ``new.amount``: a field of the record a ``create`` operation adds (``charge.amount``: of
  another record it adds, named in ``adds``);
- a bare field (``status``) is the operation's own record: ``<key>.status`` for read, update
  and quote, ``new.status`` for the effects of create.

A check is an expression that must be true (``rental_id.status = 'active'``,
``mileage_in >= rental_id.mileage_out``, ``count(refills where prescription_id =
$prescription_id and status = 'pending') = 0``); with ``when``, it applies only when that
holds. The older form (``{"check": path, "test": "within_last_days", "value": 30}``) means the
expression :func:`condition_node` writes for it. A null fails every check (``x is null``
aside). The host evaluates the same meaning everywhere: unit tests, data coverage, refusal
tasks, walks; the LLM writes it into the tool code.
"""

from __future__ import annotations

import typing
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from maestro.agents.codegen.blueprint import (
    Condition,
    FieldType,
    Operation,
    Test,
    parse_when,
)
from maestro.domains.expressions import (
    Aggregate,
    Call,
    Clock,
    Compare,
    Env,
    ExpressionError,
    IsNull,
    ListLit,
    Lit,
    Member,
    Node,
    Path,
    Scope,
    TableShape,
    VType,
    check_condition,
    evaluate,
    parse,
    resolve_path,
    unparse,
    walk,
)
from maestro.domains.expressions import (
    Arith as _Arith,
)

if TYPE_CHECKING:
    from maestro.agents.codegen.blueprint import Blueprint, BlueprintDraft

NUMERIC_TESTS = ("at_least", "at_most")
DATE_TESTS = tuple(t for t in typing.get_args(Test) if t.endswith(("_days", "_ahead")))
HOUR_TESTS = ("at_least_hours_ahead", "less_than_hours_ahead")
NULL_TESTS = ("is_null", "not_null")
#: Most reference hops a path may follow.
MAX_HOPS = 3

Record = dict[str, Any]
Getter = Callable[[str, str], Record | None]


# ----- tables and scopes -------------------------------------------------------------------------


def vtype(ftype: FieldType) -> VType:
    """A blueprint field type as the expression language types it."""
    base = ftype.base
    return VType(base, nullable=ftype.nullable, choices=ftype.choices, ref=ftype.ref)


#: Shapes and scopes of recent blueprints, by the objects' identity (each kept alive with its
#: entry, so an identity is never reused while cached): evaluation asks for them on every call.
_CACHE: OrderedDict[tuple[int, ...], tuple[Any, Any]] = OrderedDict()
_CACHE_SIZE = 512


def _cached(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    ids = tuple(id(k) if not isinstance(k, bool | str) else hash(k) for k in key)
    hit = _CACHE.get(ids)
    if hit is not None and all(a is b for a, b in zip(hit[0], key, strict=True)):
        _CACHE.move_to_end(ids)
        return hit[1]
    value = make()
    _CACHE[ids] = (key, value)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def shapes(bp: BlueprintDraft) -> dict[str, TableShape]:
    """Every table as expressions see it."""

    def make() -> dict[str, TableShape]:
        out = {}
        for e in bp.entities:
            fields = {n: vtype(t) for n, t in e.field_types().items()}
            out[e.table] = TableShape(e.table, e.key, fields)
        return out

    return _cached((bp,), make)


def blueprint_laws(bp: BlueprintDraft) -> list[Any]:
    """The blueprint's laws, compiled against its tables (once per blueprint)."""
    from maestro.domains.laws import compile_law

    return _cached(
        (bp, "laws"), lambda: [compile_law(s, shapes(bp), i) for i, s in enumerate(bp.laws)]
    )


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
    """What a bare field means: the key parameter of read, update and quote, ``new`` for
    create's effects; None when a bare field means nothing (lookup, list, create's checks)."""
    if op.kind in ("read", "update", "quote"):
        key = bp.entity(op.table).key
        return key if key in op.params else None
    if op.kind == "create" and effect:
        return "new"
    return None


def op_scope(bp: BlueprintDraft, op: Operation, *, effect: bool = False) -> Scope:
    """Names in one operation: its parameters, the records they name, and (``effect``) the
    records a create adds."""
    return _cached((bp, op, effect), lambda: _op_scope(bp, op, effect))


def _op_scope(bp: BlueprintDraft, op: Operation, effect: bool) -> Scope:
    named = record_params(bp, op)
    params: dict[str, VType] = {}
    for p, text in op.params.items():
        if p in named:
            params[p] = VType("ref", ref=named[p])
        else:
            try:
                params[p] = vtype(FieldType.parse(text))
            except ValueError:
                continue
    records = dict(named)
    if effect:
        records.update(op.new_records())
    return Scope(shapes(bp), params, records, own_root(bp, op, effect=effect))


# ----- checks as expressions ---------------------------------------------------------------------


def path_node(text: str) -> Path:
    """A path written as text (``$quantity``, ``order_id.status``)."""
    node = parse(text)
    if not isinstance(node, Path):
        raise ExpressionError(f"{text!r} is not a path such as order_id.status or $quantity")
    return node


def _value_node(value: Any) -> Node:
    if isinstance(value, str) and value.startswith("$"):
        return path_node(value)
    if isinstance(value, list):
        return ListLit(tuple(_value_node(v) for v in value))
    return Lit(value)


def _days(n: int) -> Node:
    return Call("days", (Lit(n),))


def legacy_node(bp: BlueprintDraft, op: Operation, cond: Condition) -> Node:
    """The expression an older-form check (``test`` and ``value``) means."""
    subject = path_node(cond.check)
    test, value = cond.test, cond.value
    if test == "is_null":
        return IsNull(subject)
    if test == "not_null":
        return IsNull(subject, negated=True)
    if test in ("in", "not_in"):
        return Member(
            subject, _value_node(value if isinstance(value, list) else [value]), test == "not_in"
        )
    if test == "equals":
        return Compare("=", subject, _value_node(value))
    if test == "at_least":
        return Compare(">=", subject, _value_node(value))
    if test == "at_most":
        return Compare("<=", subject, _value_node(value))
    n = int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
    datetime_field = resolve_path(subject, op_scope(bp, op)).vtype.base == "datetime"
    if test in HOUR_TESTS:
        edge: Node = _Arith("+", Clock("now"), Call("hours", (Lit(n),)))
    else:
        origin = Clock("now" if datetime_field else "today")
        back = test in ("within_last_days", "older_than_days")
        edge = _Arith("-" if back else "+", origin, _days(n))
    at_or_after = test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead")
    return Compare(">=" if at_or_after else "<", subject, edge)


def condition_node(bp: BlueprintDraft, op: Operation, cond: Condition) -> Node:
    """The check as an expression (an expression check parsed, an older one translated)."""
    if cond.test is None:
        return _cached_parse(cond.check)
    return _cached((bp, op, cond), lambda: legacy_node(bp, op, cond))


@lru_cache(maxsize=4096)
def _cached_parse(text: str) -> Node:
    return parse(text)


def when_node(cond: Condition) -> Node | None:
    return _cached_parse(cond.when) if cond.when is not None else None


def expression_problem(bp: BlueprintDraft, op: Operation, cond: Condition) -> str | None:
    """Why an expression check (and its ``when``) does not parse or type, or None."""
    scope = op_scope(bp, op)
    try:
        check_condition(parse(cond.check), scope)
        if cond.when is not None:
            check_condition(parse(cond.when), scope)
    except ExpressionError as exc:
        return str(exc)
    return None


# ----- state views -------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """A state to evaluate on: records by key, and every record of a table (for counts)."""

    get: Getter
    rows: Callable[[str], Iterable[tuple[str, Record]]]


def view_of(state: Any) -> View:
    """A :class:`View` of a session, a ``{table: {key: record}}`` database, or a view."""
    if isinstance(state, View):
        return state
    if isinstance(state, Mapping):
        db = state

        def get(table: str, key: str) -> Record | None:
            return db.get(table, {}).get(key)

        def rows(table: str) -> Iterable[tuple[str, Record]]:
            return list(db.get(table, {}).items())

        return View(get, rows)
    session = state

    def session_rows(table: str) -> Iterable[tuple[str, Record]]:
        for key in session.keys(table):
            rec = session.get(table, key)
            if rec is not None:
                yield key, rec

    return View(session.get, session_rows)


def env(
    bp: BlueprintDraft,
    op: Operation,
    args: Mapping[str, Any],
    state: Any,
    clock: datetime,
    *,
    effect: bool = False,
    roots: Mapping[str, Any] | None = None,
) -> Env:
    view = view_of(state)
    return Env(op_scope(bp, op, effect=effect), view.get, view.rows, clock, args, roots or {})


def applies(bp: BlueprintDraft, op: Operation, cond: Condition, e: Env) -> bool:
    """Whether the check applies on this state (its ``when`` holds, or it has none)."""
    when = when_node(cond)
    return when is None or evaluate(when, e) is True


def cond_holds(bp: BlueprintDraft, op: Operation, cond: Condition, e: Env) -> bool:
    """Whether the check is met: it does not apply, or it is true."""
    if not applies(bp, op, cond, e):
        return True
    try:
        return evaluate(condition_node(bp, op, cond), e) is True
    except ExpressionError:
        return False


def all_hold(
    bp: BlueprintDraft,
    op: Operation,
    conditions: list[Condition],
    args: dict[str, Any],
    state: Any,
    clock: datetime,
) -> bool:
    """Whether every check holds on a state; a missing record fails its checks."""
    e = env(bp, op, args, state, clock)
    return all(cond_holds(bp, op, c, e) for c in conditions)


def all_apply(
    bp: BlueprintDraft,
    op: Operation,
    conditions: list[Condition],
    args: dict[str, Any],
    state: Any,
    clock: datetime,
) -> bool:
    """Whether every condition is true (an agent rule's ``refuse_when``: each must hold for the
    rule to apply; a condition with ``when`` is true where its ``when`` does not hold)."""
    return all_hold(bp, op, conditions, args, state, clock)


def read(bp: BlueprintDraft, op: Operation, text: str, args: dict[str, Any], state: Any) -> Any:
    """The value a path has on a state (``None`` when absent)."""
    e = env(bp, op, args, state, datetime(2000, 1, 1))
    try:
        return evaluate(path_node(text), e)
    except ExpressionError:
        return None


def paths_of(node: Node) -> list[Path]:
    """The paths an expression reads outside any count's or sum's ``where``."""
    out: list[Path] = []
    stack = [node]
    from maestro.domains.expressions import Aggregate

    while stack:
        n = stack.pop()
        if isinstance(n, Aggregate):
            continue
        if isinstance(n, Path):
            out.append(n)
        stack.extend(reversed(n.children()))
    return out


def params_of(bp: BlueprintDraft, op: Operation, node: Node) -> set[str]:
    """The parameters an expression reads (``$x``, and record parameters used as roots)."""
    named = record_params(bp, op)
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, Path):
            head = n.parts[0]
            if n.dollar or head in named:
                out.add(head)
    return out


def scoped_paths(node: Node, scope: Scope) -> list[tuple[Path, Scope]]:
    """Every path under ``node`` with the scope it is read in: inside a count's or a sum's
    ``where``, the counted table's fields are the counted record's."""
    out: list[tuple[Path, Scope]] = []
    stack = [(node, scope)]
    while stack:
        n, sc = stack.pop()
        if isinstance(n, Path):
            out.append((n, sc))
        inner = replace(sc, row=n.table) if isinstance(n, Aggregate) else sc
        stack.extend((c, inner) for c in n.children())
    return out


def rooted_at(
    bp: BlueprintDraft, op: Operation, conditions: list[Condition], param: str
) -> list[Condition]:
    """The checks one record decides alone: every path roots at the record ``param`` names
    (or at the own record, when that is it), and no other parameter is read."""
    out = []
    scope = op_scope(bp, op)
    for c in conditions:
        try:
            nodes = [condition_node(bp, op, c)] + ([when_node(c)] if c.when else [])
        except ExpressionError:
            continue
        roots: set[str] = set()
        others = False
        for node in nodes:
            if node is None:
                continue
            for n, where in scoped_paths(node, scope):
                try:
                    r = resolve_path(n, where)
                except ExpressionError:
                    others = True
                    continue
                if r.kind == "param" and r.root == param:
                    # The record's own key ($customer_id in a count's where: the customer's
                    # open damage charges) is the record too.
                    roots.add(param)
                    continue
                if (r.kind == "param" or r.root != param) and r.root != "@row":
                    others = True
                roots.add(r.root)
        if not others and param in roots:
            out.append(c)
    return out


# ----- targets of effects ------------------------------------------------------------------------


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


def subject_of(bp: BlueprintDraft, op: Operation, path: Path, *, effect: bool = False) -> Subject:
    """The parameter or record field a path names; ExpressionError saying why not (a path that
    names a record's key, not a field, is no subject)."""
    r = resolve_path(path, op_scope(bp, op, effect=effect))
    if r.kind == "param":
        text = op.params.get(r.root, "str")
        return ParamRef(
            r.root,
            FieldType.parse(text) if r.root not in record_params(bp, op) else FieldType(base="str"),
        )
    if r.field is None:
        raise ExpressionError(f"{path.text!r} names a record's key, not a field")
    ftype = bp.entity(r.table).field_types()[r.field]
    return Target(r.root, r.hops, r.field, r.tables, ftype)


def resolve(bp: BlueprintDraft, op: Operation, text: str, *, effect: bool = False) -> Subject:
    """The parameter or record field ``text`` names in ``op``; ValueError saying why not."""
    try:
        node = path_node(text)
        if effect and node.dollar:
            raise ValueError(f"{text!r}: a parameter cannot be set")
        if node.parts[0] == "new" and not effect:
            raise ValueError(f"{text!r}: 'new' is the record a create operation adds, in its sets")
        subject = subject_of(bp, op, node, effect=effect)
    except ExpressionError as exc:
        raise ValueError(str(exc)) from None
    if isinstance(subject, Target) and subject.field == bp.entity(subject.table).key:
        raise ValueError(f"{text!r}: the key cannot be checked or set; name the record")
    return subject


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


def as_when(value: Any, base: str) -> date | datetime | None:
    """A stored date or datetime value as an object (the clock's own objects pass through)."""
    if isinstance(value, datetime):
        return value if base == "datetime" else value.date()
    if isinstance(value, date):
        return value if base == "date" else None
    return parse_when(value, base)


# ----- in words ----------------------------------------------------------------------------------

_WORDS = {
    "in": "is one of",
    "not_in": "is none of",
    "equals": "equals",
    "at_least": ">=",
    "at_most": "<=",
}


def _clock_gloss(node: Node, clock: datetime) -> str:
    names = {n.name for n in walk(node) if isinstance(n, Clock)}
    parts = []
    if "today" in names:
        parts.append(f"today is {clock.date().isoformat()}")
    if "now" in names:
        parts.append(f"now is {clock.isoformat(timespec='minutes')}")
    return f" ({', '.join(parts)})" if parts else ""


def check_words(bp: Blueprint, op: Operation, cond: Condition) -> str:
    """A check as the prompts show it: the expression, with the clock's dates it reads; an
    older-form check in words with its subject written out and absolute dates."""
    if cond.is_expression:
        node = condition_node(bp, op, cond)
        text = unparse(node) + _clock_gloss(node, bp.clock)
    else:
        subject = resolve(bp, op, cond.check)
        shown = cond.model_copy(update={"check": subject.text})
        text = legacy_words(shown, subject.ftype, bp.clock)
    if cond.when is not None:
        node = _cached_parse(cond.when)
        text += f", when {unparse(node)}{_clock_gloss(node, bp.clock)}"
    return text


def legacy_words(cond: Condition, ftype: FieldType, clock: datetime) -> str:
    """An older-form condition in words, with the absolute date of a clock-relative boundary."""
    from datetime import timedelta

    subject, test, value = cond.check, cond.test, cond.value
    if test == "is_null":
        return f"{subject} is null"
    if test == "not_null":
        return f"{subject} is not null"
    if test in _WORDS:
        shown = ", ".join(repr(v) for v in value) if isinstance(value, list) else repr(value)
        if isinstance(value, str) and value.startswith("$"):
            shown = value
        return f"{subject} {_WORDS[str(test)]} {shown}"
    n = int(value) if isinstance(value, int | float) else 0
    dt = ftype.base == "datetime"
    if test in HOUR_TESTS:
        edge: date | datetime = clock + timedelta(hours=n)
    else:
        days = -n if test in ("within_last_days", "older_than_days") else n
        edge = (clock if dt else clock.date()) + timedelta(days=days)
    when = edge.isoformat()
    origin = "now" if dt or test in HOUR_TESTS else "today"
    unit = "hours" if test in HOUR_TESTS else "days"
    sign = "-" if test in ("within_last_days", "older_than_days") else "+"
    span = f"{origin} {sign} {n} {unit}"
    if test in ("within_last_days", "at_least_days_ahead", "at_least_hours_ahead"):
        return f"{subject} is on or after {span} ({when} or later)"
    return f"{subject} is before {span} (earlier than {when})"
