"""What a blueprint tells the task walks (``domains/walks.py``) that tool signatures cannot.

- **columns**: where each parameter's values come from: a lookup's or list's ``by`` field, the
  field an effect writes it into (``dispute_bill``'s ``reason`` is a bill's ``dispute_reason``,
  never a SIM order's ``reason`` enum), or the field a check compares it with;
- **identify**: the lookup by natural identifiers the policy's identity check uses; its table
  holds the people, and every walk starts by finding its customer with it;
- **forbids**: the agent rules, evaluated on the state a call runs on (``conditions.py``): an
  ordinary task never asks for what an agent rule forbids; only refusal tasks aim at it;
- **pointless**: an update that writes what already holds (a delivery address "changed" to the
  order's own address, a plan change to the plan the customer is on, another field of the same
  record naming the same plan);
- **fresh**: the parameters an effect writes over a record's field, which the walks draw from
  values the customer's records do not hold there.
"""

from __future__ import annotations

from typing import Any

from maestro.agents.codegen.blueprint import Blueprint, Operation
from maestro.agents.codegen.conditions import (
    Target,
    condition_node,
    locate,
    record_params,
    resolve,
    subject_of,
)
from maestro.agents.codegen.refusals import refusal_rules
from maestro.domains.expressions import Compare, ExpressionError, Member, Path, walk
from maestro.domains.store import Session
from maestro.domains.toolgraph import WalkGuide

#: Identifier fields a customer knows, most telling first.
_NATURAL = ("email", "birth", "phone", "name")


def walk_guide(bp: Blueprint) -> WalkGuide:
    """The guide of a synthesized domain's walks."""
    identify = identity_lookup(bp)
    rules = refusal_rules(bp)
    ops = {op.name: op for op in bp.operations}

    def forbids(name: str, args: dict[str, Any], session: Session) -> bool:
        return any(r.applies(args, session) for r in rules if r.operation == name)

    def pointless(name: str, args: dict[str, Any], session: Session) -> bool:
        op = ops.get(name)
        return op is not None and writes_what_holds(bp, op, args, session)

    return WalkGuide(
        columns={op.name: parameter_fields(bp, op) for op in bp.operations},
        identify=identify.name if identify else None,
        people=frozenset({identify.table}) if identify else None,
        forbids=forbids,
        pointless=pointless,
        fresh={op.name: overwritten(bp, op) for op in bp.operations},
        desk_keys=bp.desk_keys(),
        flows={op.name: tuple(op.then) for op in bp.operations if op.tool_kind == "write"},
    )


def identity_lookup(bp: Blueprint) -> Operation | None:
    """The lookup a customer is identified with: by the most natural identifiers (an email
    or a date of birth before an order number)."""
    lookups = [op for op in bp.operations if op.kind == "lookup"]

    def rank(op: Operation) -> int:
        hits = [i for i, w in enumerate(_NATURAL) for f in op.by if w in f]
        return min(hits, default=len(_NATURAL))

    return min(lookups, key=rank, default=None)


def parameter_fields(bp: Blueprint, op: Operation) -> dict[str, tuple[str, str]]:
    """``parameter -> (table, field)`` for the parameters that do not name a record."""
    named = record_params(bp, op)
    out: dict[str, tuple[str, str]] = {}
    if op.kind in ("lookup", "list"):
        out.update({p: (op.table, p) for p in op.by if p in op.params and p not in named})
    pairs: list[tuple[str, Any, bool]] = [(t, v, True) for t, v in op.sets.items()]
    pairs += [(c.check, c.value, False) for c in op.requires if not c.is_expression]
    for path, value, effect in pairs:
        param = param_named(op, value)
        if param is None or param in named or param in out or path.startswith("$"):
            continue
        subject = resolve(bp, op, path, effect=effect)
        if isinstance(subject, Target):
            out[param] = (subject.table, subject.field)
    # An expression check comparing a parameter with a field: the parameter is of that field.
    for c in op.requires:
        if not c.is_expression:
            continue
        for n in walk(condition_node(bp, op, c)):
            if not isinstance(n, Compare | Member):
                continue
            sides = [n.left, n.right] if isinstance(n, Compare) else [n.operand, n.options]
            params = [s for s in sides if isinstance(s, Path) and s.dollar and len(s.parts) == 1]
            fields = [s for s in sides if isinstance(s, Path) and s not in params]
            for p in params:
                name = p.parts[0]
                if name in named or name in out or not fields:
                    continue
                try:
                    subject = subject_of(bp, op, fields[0])
                except ExpressionError:
                    continue
                if isinstance(subject, Target):
                    out[name] = (subject.table, subject.field)
    return out


def overwritten(bp: Blueprint, op: Operation) -> frozenset[str]:
    """Parameters an effect writes over an existing record's field (``delivery_address =
    $new_address``), not into a new record (a new order's address may well be the usual one)."""
    named = record_params(bp, op)
    out = set()
    for target, value in op.sets.items():
        param = param_named(op, value)
        if param is None or param in named:
            continue
        subject = resolve(bp, op, target, effect=True)
        if isinstance(subject, Target) and subject.root != "new":
            out.add(param)
    return frozenset(out)


def param_named(op: Operation, value: Any) -> str | None:
    """The parameter a ``"$param"`` value names (not ``$today``, not ``$param.field``)."""
    if isinstance(value, str) and value.startswith("$") and value[1:] in op.params:
        return value[1:]
    return None


def writes_what_holds(bp: Blueprint, op: Operation, args: dict[str, Any], session: Session) -> bool:
    """Whether an effect ``field = $param`` writes what the field already holds (a delivery
    address "changed" to the address the order has: the write still changes the state when
    another effect does, but asks for nothing), or what another field of the same kind holds
    (``next_plan_id = $new_plan_id`` while ``plan_id`` is it)."""
    for target, value in op.sets.items():
        param = param_named(op, value)
        subject = resolve(bp, op, target, effect=True) if param else None
        if param is None or not isinstance(subject, Target):
            continue
        where = locate(subject, args, session.get)
        record = session.get(where.table, where.key) if where else None
        if record is not None and record.get(subject.field) == args.get(param):
            return True
        if record is None or subject.ftype.base != "ref":
            continue
        same_kind = [
            f
            for f, t in bp.entity(subject.table).field_types().items()
            if t.base == "ref" and t.ref == subject.ftype.ref
        ]
        if any(record.get(f) == args.get(param) for f in same_kind):
            return True
    return False
