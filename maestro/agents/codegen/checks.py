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

from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import (
    Adjust,
    Blueprint,
    Computed,
    Condition,
    FieldType,
    Operation,
    Restore,
)
from maestro.agents.codegen.conditions import (
    Target,
    View,
    all_hold,
    blueprint_laws,
    cond_holds,
    condition_node,
    env,
    paths_of,
    record_params,
    resolve,
    shapes,
)
from maestro.agents.codegen.data import Database, JSONRecord
from maestro.agents.codegen.fixtures import (
    Fixture,
    FixtureError,
    base_fixture,
    break_check,
    lift_when,
    meet,
    samples,
)
from maestro.domains.expressions import ExpressionError, evaluate, parse, stored, unparse
from maestro.domains.laws import check_laws, mapping_view, near
from maestro.domains.store import match_key

__all__ = ["FixtureError", "TestDerivationError", "ToolTest", "operation_tests", "untestable"]


class TestDerivationError(RuntimeError):
    """The derived tests contradict the operation's own checks: a fault of this module, not of
    the blueprint or the model's code, found before any code is asked for."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Expect:
    """A field a record must hold after a successful call (``key`` None: a record the call
    adds, ``new`` naming which)."""

    table: str
    key: str | None
    field: str
    value: Any
    base: str
    new: str = "new"


@dataclass(frozen=True)
class Added:
    """A record a successful create must add: its name in the effects, table and key prefix."""

    name: str
    table: str
    prefix: str


@dataclass(frozen=True)
class Returned:
    """A value a quote must answer, under its name."""

    name: str
    value: Any
    base: str


@dataclass(frozen=True)
class ToolTest:
    """One call of one tool on prepared records, and what must come of it."""

    name: str
    operation: str
    arguments: dict[str, Any]
    #: Fields written onto records before the call: ``(table, key, fields)`` (a record the
    #: test adds holds its key field too).
    setup: tuple[tuple[str, str, dict[str, Any]], ...]
    expect_ok: bool
    expect: tuple[Expect, ...] = ()
    #: Text the answer must contain (the record's key; a list's keys).
    shows: tuple[str, ...] = ()
    #: The records a successful create must add, one in each table named.
    creates: tuple[Added, ...] = ()
    #: What a quote must answer.
    returns: tuple[Returned, ...] = ()
    #: Checks that must hold on the prepared records besides the operation's own (an agent
    #: rule's ``refuse_when``), for a call expected to succeed.
    applies: tuple[Condition, ...] = ()
    #: The check a call expected to fail breaks.
    breaks: Condition | None = None
    #: The check whose ``when`` does not hold here (so the call succeeds though it fails).
    lifted: Condition | None = None
    #: Whether the blueprint's own effects keep every law on these prepared records: only then
    #: is a law broken after the call the tool's fault (a prepared record may be a state no law
    #: allows, such as a dispute opened without its hold).
    keeps_laws: bool = True


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
    if op.kind == "quote":
        return _quote_tests(bp, op, db)
    return _write_tests(bp, op, db)


def _quote_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    """A quote: the computed values come back when every check passes; each broken check is a
    ToolError; an unknown key is one too."""
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
        if not any(
            all(match_key(r.get(k)) == match_key(pv) for k, pv in probe.items())
            for r in rows.values()
        ):
            return v
    return None


def _list_tests(bp: Blueprint, op: Operation, db: Database) -> list[ToolTest]:
    rows = db[op.table]
    entity = bp.entity(op.table)
    found = [k for k in sorted(rows) if all(rows[k].get(f) is not None for f in op.by)]
    if not found:
        raise FixtureError(f"{op.name}: no {op.table} record has every field of {op.by}")
    args = {f: rows[found[0]][f] for f in op.by}
    matching = sorted(
        k
        for k, r in rows.items()
        if all(match_key(r.get(f)) == match_key(v) for f, v in args.items())
    )
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
    base = meet(base_fixture(bp, op, db), op.requires)
    tests = [
        _success(bp, op, base, f"{op.name}: succeeds when every check passes (at its boundary)")
    ]
    for cond in op.requires:
        others = [c for c in op.requires if c is not cond]
        broken = break_check(base, cond, others)
        if broken is not None:
            fx = broken.fixture
            tests.append(
                ToolTest(
                    f"{op.name}: refuses when {broken.pivot} is {_shown(broken.value)} "
                    f"({broken.atom} fails)",
                    op.name,
                    fx.args,
                    fx.setup_tuple(),
                    False,
                    breaks=cond,
                )
            )
        lifted = lift_when(base, cond, others)
        if lifted is not None:
            tests.append(
                _success(
                    bp,
                    op,
                    lifted.fixture,
                    f"{op.name}: succeeds when {lifted.pivot} is {_shown(lifted.value)}, so "
                    f"{cond.when!r} does not hold and its check does not apply",
                    lifted=cond,
                )
            )
    tests += _unknown_key_tests(bp, op, base)
    for rule in bp.agent_rules_of(op.name):
        met = _rule_fixture(bp, op, db, op.requires + rule.refuse_when)
        if met is None:
            raise FixtureError(
                f"{op.name}: the agent rule {rule.rule!r} can never apply to a call the tool "
                "accepts (its refuse_when contradicts the requires)"
            )
        fx = met
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
    return [
        t if not t.expect_ok or _laws_kept(bp, db, t) else replace(t, keeps_laws=False)
        for t in tests
    ]


def _laws_kept(bp: Blueprint, db: Database, t: ToolTest) -> bool:
    """Whether the call, done as the blueprint says on the test's prepared records, breaks no
    law that held before it."""
    return not _new_breaches(bp, db, t)


def _new_breaches(bp: Blueprint, db: Database, t: ToolTest) -> list[str]:
    if not bp.laws:
        return []
    tables = shapes(bp)
    laws = blueprint_laws(bp)
    before = _applied(db, t.setup)
    after, touched = _effects_done(bp, before, t)
    get, rows = mapping_view(after)
    # One neighbourhood for both states (the new records' own exist only after): a law
    # the prepared records broke already is not the call's.
    around = near(tables, rows, touched)
    check = check_laws(laws, tables, get, rows, bp.clock, only=around)
    bget, brows = mapping_view(before)
    old = check_laws(laws, tables, bget, brows, bp.clock, only=around).keys()
    return check.lines(only=check.keys() - old)


def _shown(value: Any) -> str:
    return repr(value)


def contradictions(bp: Blueprint, op: Operation, db: Database, tests: list[ToolTest]) -> list[str]:
    """Derived tests whose prepared records do not mean what the test says, under the
    blueprint's own evaluation (``conditions.py``): a call expected to succeed where a listed
    check fails, or a "refuses when" call where the check it breaks holds."""
    out = []
    for t in tests:
        view = prepared(db, t.setup)
        e = env(bp, op, t.arguments, view, bp.clock)
        if t.expect_ok:
            for cond in [*op.requires, *t.applies]:
                if not cond_holds(bp, op, cond, e):
                    out.append(
                        f"{t.name!r} expects success but {_check_text(bp, op, cond)} does not "
                        f"hold ({_read_values(bp, op, cond, e)})"
                    )
        elif t.breaks is not None and cond_holds(bp, op, t.breaks, e):
            out.append(
                f"{t.name!r} expects a refusal but {_check_text(bp, op, t.breaks)} holds "
                f"({_read_values(bp, op, t.breaks, e)})"
            )
    return out


def _check_text(bp: Blueprint, op: Operation, cond: Condition) -> str:
    return unparse(condition_node(bp, op, cond))


def _read_values(bp: Blueprint, op: Operation, cond: Condition, e: Any) -> str:
    """The values a check reads on a state, as ``path = value`` pairs."""
    shown = []
    for p in paths_of(condition_node(bp, op, cond)):
        try:
            shown.append(f"{p.text} = {stored(evaluate(p, e))!r}")
        except ExpressionError:
            continue
    return ", ".join(dict.fromkeys(shown))


def prepared(db: Database, setup: tuple[tuple[str, str, dict[str, Any]], ...]) -> View:
    """The records as a test prepares them, to evaluate checks on."""
    changed = {(table, key): fields for table, key, fields in setup}

    def get(table: str, key: str) -> JSONRecord | None:
        rec = db.get(table, {}).get(key)
        extra = changed.get((table, key))
        if rec is None and extra is None:
            return None
        return {**(rec or {}), **(extra or {})}

    def rows(table: str) -> Any:
        keys = sorted({*db.get(table, {}), *(k for t, k in changed if t == table)})
        for key in keys:
            rec = get(table, key)
            if rec is not None:
                yield key, rec

    return View(get, rows)


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
    bp: Blueprint,
    op: Operation,
    fx: Fixture,
    name: str,
    applies: tuple[Condition, ...] = (),
    lifted: Condition | None = None,
) -> ToolTest:
    entity = bp.entity(op.table)
    expect: list[Expect] = []
    adds = op.new_records()
    for target_text, value in op.sets.items():
        target = resolve(bp, op, target_text, effect=True)
        assert isinstance(target, Target)
        want = _effect_value(fx, target, value)
        if target.root in adds and not target.hops:
            expect.append(
                Expect(adds[target.root], None, target.field, want, target.ftype.base, target.root)
            )
        else:
            where = fx.address(target)
            expect.append(Expect(where.table, where.key, where.field, want, target.ftype.base))
    shows = (fx.args[entity.key],) if op.kind == "update" else ()
    created = tuple(Added(n, t, bp.entity(t).prefix) for n, t in adds.items())
    returns = tuple(
        Returned(n, _expression_value(fx, text), _result_base(fx, text))
        for n, text in op.returns.items()
    )
    return ToolTest(
        name,
        op.name,
        dict(fx.args),
        fx.setup_tuple(),
        True,
        tuple(expect),
        shows=shows,
        creates=created,
        returns=returns,
        applies=applies,
        lifted=lifted,
    )


def _expression_value(fx: Fixture, text: str) -> Any:
    """An expression's value on the prepared state, as a record stores it."""
    try:
        return stored(evaluate(parse(text), fx.env()))
    except ExpressionError as exc:
        raise FixtureError(f"{fx.op.name}: {exc}") from None


def _result_base(fx: Fixture, text: str) -> str:
    from maestro.agents.codegen.conditions import op_scope
    from maestro.domains.expressions import infer

    try:
        return infer(parse(text), op_scope(fx.bp, fx.op)).base
    except ExpressionError:
        return "str"


def _effect_value(fx: Fixture, target: Target, value: Any) -> Any:
    clock = fx.bp.clock
    if isinstance(value, Adjust):
        before = fx.value(target) if target.root not in fx.op.new_records() else 0
        amount = value.amount
        if isinstance(amount, str):
            amount = _expression_value(fx, amount)
        return round((before or 0) + value.sign * amount, 6)
    if isinstance(value, Computed):
        return _expression_value(fx, value.expr)
    if isinstance(value, Restore):
        return fx.value(resolve(fx.bp, fx.op, value.restore))
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


def effect_law_problems(bp: Blueprint, db: Database) -> list[str]:
    """Operations whose own effects break a law: each call the operation accepts on the world's
    records (up to 30), done as the blueprint says (its effects put on those records), checked
    against every law on the records it touches. A law broken only after the call is the
    blueprint's to fix (a missing check, or an effect that forgets a field)."""
    if not bp.laws:
        return []
    out: list[str] = []
    for op in bp.operations:
        if op.tool_kind != "write":
            continue
        # On the world's own records only: a derived test's prepared records may be a state no
        # law allows (a reserved booking with a finished trip), and what a call does there is
        # no evidence against the blueprint.
        for t in _calls_on_the_data(bp, op, db):
            lines = _new_breaches(bp, db, t)
            if lines:
                call = f"{op.name}({', '.join(f'{k}={v!r}' for k, v in t.arguments.items())})"
                out.append(
                    f"operation {op.name}: done as the blueprint says ({call}), it leaves "
                    + "; ".join(lines)
                    + ": add the check that keeps the law, or the effect it needs"
                )
                break
    return out


def _calls_on_the_data(
    bp: Blueprint, op: Operation, db: Database, most: int = 30
) -> list[ToolTest]:
    """Calls the operation accepts on the world as it is: each record parameter set to the
    records its checks allow (the others as the base fixture has them), kept when every check
    holds."""
    try:
        base = base_fixture(bp, op, db)
    except FixtureError:
        return []
    out = []
    for param, table in record_params(bp, op).items():
        for key in sorted(db.get(table, {}))[: most * 4]:
            args = {**base.args, param: key}
            if not all_hold(bp, op, list(op.requires), args, db, bp.clock):
                continue
            fx = Fixture(bp, op, db, args)
            try:
                out.append(_success(bp, op, fx, f"{op.name} on {table}/{key}"))
            except FixtureError:
                continue
            if len(out) >= most:
                return out
    return out


def _applied(db: Database, setup: tuple[tuple[str, str, dict[str, Any]], ...]) -> Database:
    out = {t: dict(rows) for t, rows in db.items()}
    for table, key, fields in setup:
        out.setdefault(table, {})[key] = {**out.get(table, {}).get(key, {}), **fields}
    return out


def _effects_done(
    bp: Blueprint, db: Database, t: ToolTest
) -> tuple[Database, set[tuple[str, str]]]:
    """The database after a success test's call, made from its expected effects."""
    out = {table: dict(rows) for table, rows in db.items()}
    touched: set[tuple[str, str]] = set()
    new_keys: dict[str, str] = {}
    for added in t.creates:
        entity = bp.entity(added.table)
        key = f"{added.prefix}{9000 + len(new_keys)}"
        new_keys[added.name] = key
        out.setdefault(added.table, {})[key] = {
            entity.key: key,
            **{f: None for f in entity.fields},
        }
        touched.add((added.table, key))
    for e in t.expect:
        found = e.key if e.key is not None else new_keys.get(e.new)
        if found is None:
            continue
        key = found
        record = dict(out.get(e.table, {}).get(key, {}))
        record[e.field] = e.value
        out.setdefault(e.table, {})[key] = record
        touched.add((e.table, key))
    return out, touched


def fixture_problems(bp: Blueprint) -> list[str]:
    """Operations whose preconditions no record could meet (found before any code is written)."""
    return untestable(bp, sample_database(bp))


#: Records tried for a rule's call before it is called one that never applies.
RULE_TRIES = 25


def _rule_fixture(
    bp: Blueprint, op: Operation, db: Database, conds: list[Condition]
) -> Fixture | None:
    """A call that meets every condition, started from the first records and then from others
    (an open damage charge of the customer's is met only from a customer who has a rental);
    None when none of ``RULE_TRIES`` starts does."""
    sizes = [len(db.get(t, {})) for t in record_params(bp, op).values()]
    for offset in range(min(RULE_TRIES, max(sizes, default=1))):
        try:
            return meet(base_fixture(bp, op, db, offset), conds, boundary=False)
        except FixtureError:
            continue
    return None


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
