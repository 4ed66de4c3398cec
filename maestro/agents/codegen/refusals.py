"""Refusal rules for the task synthesis, from a blueprint's agent rules.

An agent rule says when the agent must refuse an operation the tool would accept. The host
evaluates it on live state (``conditions.py``), so every refusal task's forbidden condition
holds at the clock by construction: the walks are anchored on records the rule applies to (any
record, when the rule looks only at what the customer asks: a stolen phone's SIM), their
parameters drawn from the values the rule names, and a candidate is kept only when the rule
holds of its arguments on the state the task starts from.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Condition, Operation
from maestro.agents.codegen.conditions import (
    all_hold,
    condition_node,
    op_scope,
    record_params,
    rooted_at,
    scoped_paths,
)
from maestro.agents.codegen.scenarios import RefusalRule
from maestro.domains.expressions import (
    Aggregate,
    Arith,
    Clock,
    Compare,
    Env,
    EvaluationError,
    ExpressionError,
    ListLit,
    Lit,
    Member,
    Node,
    Path,
    Scope,
    conjuncts,
    evaluate,
    parse,
    resolve_path,
    walk,
)
from maestro.domains.laws import mapping_view
from maestro.domains.store import Session


def refusal_rules(bp: Blueprint) -> list[RefusalRule]:
    """One :class:`RefusalRule` per agent rule."""
    out = []
    for rule in bp.agent_rules:
        op = bp.operation(rule.operation)
        conditions = list(op.requires) + list(rule.refuse_when)

        def applies(
            args: dict[str, Any], session: Session, _op: Any = op, _c: Any = rule.refuse_when
        ) -> bool:
            return all_hold(bp, _op, list(_c), args, session, bp.clock)

        def anchors(
            session: Session, _op: Any = op, _all: Any = conditions, _r: Any = rule.refuse_when
        ) -> list[tuple[str, str]] | None:
            return _anchors(bp, _op, _all, _r, session)

        def explain(
            session: Session, _op: Any = op, _all: Any = conditions, _r: Any = rule.refuse_when
        ) -> str:
            return _no_candidate(bp, _op, _all, _r, session)

        out.append(
            RefusalRule(
                rule.operation,
                rule.rule,
                applies,
                anchors,
                _aimed(op, list(rule.refuse_when), bp.clock),
                explain,
            )
        )
    return out


def tool_rules(bp: Blueprint) -> list[RefusalRule]:
    """One :class:`RefusalRule` (``enforced``) per check of a write that one record of the
    customer's decides (no refills left, a booking not confirmed): the tool refuses the call
    when that check fails and the operation's other checks hold, so the refusal has one reason.
    Ordered so that consecutive rules are of different operations."""
    by_op: list[list[RefusalRule]] = []
    for op in bp.operations:
        if op.tool_kind != "write":
            continue
        mine: list[RefusalRule] = []
        for param, _table in record_params(bp, op).items():
            own = rooted_at(bp, op, list(op.requires), param)
            # A limit, a date, a count before a status the record is not in: the rules a
            # policy states (no refills left) come first, "it is cancelled already" after.
            for check in sorted(own, key=lambda c: _plain(bp, op, c)):
                mine.append(_tool_rule(bp, op, param, check, own, _alternatives(bp, op, _table)))
        if mine:
            by_op.append(mine)
    out: list[RefusalRule] = []
    for i in range(max((len(m) for m in by_op), default=0)):
        out += [m[i] for m in by_op if i < len(m)]
    return out


def _alternatives(bp: Blueprint, op: Operation, table: str) -> list[tuple[Operation, str]]:
    """The other writes that end where ``op`` does (they set one field of a table to the same
    constant: a free and a paid cancellation both set the booking's ``status`` to
    ``'cancelled'``) and take a record of ``table``, each with the parameter that names it. When
    ``op`` refuses a record that one of them takes, a customer never meets that refusal: the
    agent uses the other write."""
    ends = _ends(bp, op)
    out = []
    for other in bp.operations:
        if other is op or other.tool_kind != "write" or not ends & _ends(bp, other):
            continue
        for param, t in record_params(bp, other).items():
            if t == table:
                out.append((other, param))
                break
    return out


def _ends(bp: Blueprint, op: Operation) -> set[tuple[str, str, str]]:
    """Each constant effect of ``op`` as (table, field, value): its paths' heads (``new``, a
    record parameter, the own record) replaced by the table they stand for."""
    params = record_params(bp, op)
    out = set()
    for path, value in op.sets.items():
        if not _literal(value):
            continue
        head, _, rest = path.rpartition(".")
        if not head:
            table = op.table
        elif head == "new":
            table = f"new {op.table}"
        elif head in params:
            table = params[head]
        else:
            continue  # a record two steps away: left out rather than guessed
        out.add((table, rest, repr(value)))
    return out


def _literal(value: Any) -> bool:
    """A constant effect (not ``$param``, ``$today``, an adjustment or an expression)."""
    if isinstance(value, str):
        return not value.startswith("$")
    return isinstance(value, int | float | bool)


def _plain(bp: Blueprint, op: Operation, check: Condition) -> bool:
    """Whether a check only asks for a status (``booking_id.status = 'confirmed'``)."""
    try:
        node = condition_node(bp, op, check)
    except ExpressionError:
        return True
    nodes = list(walk(node))
    if any(isinstance(n, Aggregate | Arith | Clock) for n in nodes):
        return False
    paths = [n for n in nodes if isinstance(n, Path)]
    return all(n.parts[-1] == "status" for n in paths if not n.dollar)


def _tool_rule(
    bp: Blueprint,
    op: Operation,
    param: str,
    check: Condition,
    own: list[Condition],
    alternatives: list[tuple[Operation, str]],
) -> RefusalRule:
    others = [c for c in op.requires if c is not check]
    rest = [c for c in own if c is not check]
    table = record_params(bp, op)[param]
    # What each alternative's record alone decides: when it all holds, that write is open.
    open_when = [(alt, p, rooted_at(bp, alt, list(alt.requires), p)) for alt, p in alternatives]

    def served(key: str, session: Session) -> bool:
        return any(
            all_hold(bp, alt, checks, {p: key}, session, bp.clock) for alt, p, checks in open_when
        )

    def refused_only_here(session: Session) -> list[str]:
        return [
            key
            for key in session.keys(table)
            if not all_hold(bp, op, [check], {param: key}, session, bp.clock)
            and all_hold(bp, op, rest, {param: key}, session, bp.clock)
        ]

    def applies(args: dict[str, Any], session: Session) -> bool:
        return not all_hold(bp, op, [check], args, session, bp.clock) and all_hold(
            bp, op, others, args, session, bp.clock
        )

    def anchors(session: Session) -> list[tuple[str, str]]:
        return [(table, key) for key in refused_only_here(session) if not served(key, session)]

    def explain(session: Session) -> str:
        n, refused = len(session.keys(table)), refused_only_here(session)
        if not refused:
            return f"of {n} {table} ({param}), none fails only this check of {op.name}"
        names = ", ".join(alt.name for alt, _, _ in open_when)
        return (
            f"of {n} {table} ({param}), {len(refused)} fail only this check of {op.name}, and "
            f"{names} takes each of them instead (a customer would never meet this refusal)"
        )

    what = check.check if check.is_expression else f"{check.check} {check.test} {check.value}"
    what += f" (when {check.when})" if check.when else ""
    return RefusalRule(
        op.name,
        f"{op.name} requires {what}",
        applies,
        anchors,
        {},
        explain,
        True,
        (param, table),
        _state_field(bp, op, check, param),
    )


def _state_field(bp: Blueprint, op: Operation, check: Condition, param: str) -> str | None:
    """The field of ``param``'s record a check reads when it only asks for that record's status
    (``card_id.status = 'issued'``, or ``status = 'issued'`` of the own record), else None."""
    if check.when or not _plain(bp, op, check):
        return None
    try:
        node = condition_node(bp, op, check)
        read = [resolve_path(n, where) for n, where in scoped_paths(node, op_scope(bp, op))]
    except ExpressionError:
        return None
    fields = {(r.root, r.hops, r.field) for r in read}
    if len(fields) != 1:
        return None
    ((root, hops, field),) = fields
    return field if root == param and not hops else None


def _no_candidate(
    bp: Blueprint, op: Any, conditions: list[Any], refuse_when: list[Any], session: Session
) -> str:
    """Why no candidate was found, in counts: of the records the rule looks at, how many meet
    the operation's checks, how many the rule, how many both (a rule the data can meet but no
    walk reached says so too)."""
    parts: list[str] = []
    for param, table in record_params(bp, op).items():
        own = rooted_at(bp, op, conditions, param)
        rule = [c for c in own if c in refuse_when]
        if not rule:
            continue
        checks = [c for c in own if c not in refuse_when]
        keys = session.keys(table)
        meet = [k for k in keys if all_hold(bp, op, checks, {param: k}, session, bp.clock)]
        ruled = [k for k in keys if all_hold(bp, op, rule, {param: k}, session, bp.clock)]
        both = sorted(set(meet) & set(ruled))
        line = (
            f"of {len(keys)} {table} ({param}), {len(meet)} meet {op.name}'s checks, "
            f"{len(ruled)} the rule, {len(both)} both"
        )
        if both:
            line += (
                f" ({', '.join(both[:3])}{' ...' if len(both) > 3 else ''}), and no walk from "
                "them succeeded (the call was refused or changed nothing, the rule did not hold "
                "of the arguments drawn, or the owner could not be identified)"
            )
        parts.append(line)
    if not parts:
        aimed = _aimed(op, list(refuse_when), bp.clock)
        return "it looks at no record; the values tried were " + (
            ", ".join(f"{k} in {v}" for k, v in aimed.items()) or "drawn at random"
        )
    return "; ".join(parts)


def _anchors(
    bp: Blueprint, op: Any, conditions: list[Any], refuse_when: list[Any], session: Session
) -> list[tuple[str, str]] | None:
    """Records of the parameter the rule looks at that meet the operation's checks and the rule
    (conditions comparing with other parameters are left to the candidate filter); None when
    the rule looks at no record."""
    found: list[tuple[str, str]] = []
    looked_at = False
    for param, table in record_params(bp, op).items():
        own = rooted_at(bp, op, conditions, param)
        if not any(c in own for c in refuse_when):
            continue
        looked_at = True
        for key in session.keys(table):
            if all_hold(bp, op, own, {param: key}, session, bp.clock):
                found.append((table, key))
    return found if looked_at else None


def _aimed(
    op: Operation, refuse_when: list[Condition], clock: datetime | None = None
) -> dict[str, list[Any]]:
    """Values of the parameters a rule tests that make it apply (``$reason in ['stolen']``: the
    customer asks for a SIM for a stolen phone; ``$amount >= 200``: they ask for 200)."""
    out: dict[str, list[Any]] = {}
    for c in refuse_when:
        if c.is_expression:
            try:
                node = parse(c.check)
            except ExpressionError:
                continue
            for part in conjuncts(node):
                found = _aimed_part(op, part, clock)
                if found is not None:
                    out[found[0]] = found[1]
            continue
        name = c.check[1:] if c.check.startswith("$") else None
        if name not in op.params:
            continue
        constant = not (isinstance(c.value, str) and c.value.startswith("$"))
        if c.test == "in" and isinstance(c.value, list):
            out[str(name)] = list(c.value)
        elif c.test in ("equals", "at_least", "at_most") and constant and c.value is not None:
            out[str(name)] = [c.value]
    return out


def _aimed_part(
    op: Operation, part: Node, clock: datetime | None = None
) -> tuple[str, list[Any]] | None:
    """``$param`` compared with constants, or with the clock (``$pickup_at < now + hours(2)``):
    the values that make the comparison hold."""
    if isinstance(part, Compare) and part.op in ("<", ">", "<=", ">=") and clock is not None:
        sides = ((part.left, part.right, part.op), (part.right, part.left, _FLIP[part.op]))
        for mine, other, op_ in sides:
            if not (
                isinstance(mine, Path)
                and mine.dollar
                and len(mine.parts) == 1
                and mine.parts[0] in op.params
            ) or any(isinstance(n, Path) for n in walk(other)):
                continue
            try:
                bound = evaluate(other, Env(Scope({}), *mapping_view({}), clock))
            except (ExpressionError, EvaluationError):
                continue
            values = _inside(bound, op_)
            if values:
                return mine.parts[0], values
    if isinstance(part, Member) and not part.negated:
        subject, options = part.operand, part.options
        if (
            isinstance(subject, Path)
            and subject.dollar
            and len(subject.parts) == 1
            and subject.parts[0] in op.params
            and isinstance(options, ListLit)
            and all(isinstance(i, Lit) for i in options.items)
        ):
            return subject.parts[0], [i.value for i in options.items if isinstance(i, Lit)]
    if isinstance(part, Compare) and part.op in ("=", ">=", "<="):
        for mine, other in ((part.left, part.right), (part.right, part.left)):
            if (
                isinstance(mine, Path)
                and mine.dollar
                and len(mine.parts) == 1
                and mine.parts[0] in op.params
                and isinstance(other, Lit)
                and other.value is not None
            ):
                return mine.parts[0], [other.value]
    return None


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _inside(bound: Any, op: str) -> list[Any]:
    """Values that are ``op`` ``bound``: just inside it, and a little further (a pickup 30, 60
    and 90 minutes before a limit two hours away)."""
    sign = -1 if op in ("<", "<=") else 1
    if isinstance(bound, datetime):
        return [
            (bound + sign * timedelta(minutes=m)).isoformat(timespec="seconds")
            for m in (30, 60, 90)
        ]
    if isinstance(bound, date):
        return [(bound + sign * timedelta(days=d)).isoformat() for d in (1, 2)]
    if isinstance(bound, bool) or not isinstance(bound, int | float):
        return []
    steps = (1, 5) if isinstance(bound, int) else (0.01, 1.0)
    return [bound + sign * step for step in steps] + ([bound] if "=" in op else [])
