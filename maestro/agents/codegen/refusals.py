"""Refusal rules for the task synthesis, from a blueprint's agent rules.

An agent rule says when the agent must refuse an operation the tool would accept. The host
evaluates it on live state (``conditions.py``), so every refusal task's forbidden condition
holds at the clock by construction: the walks are anchored on records the rule applies to, and a
candidate is kept only when the rule holds of its arguments on the state the task starts from.
"""

from __future__ import annotations

from typing import Any

from maestro.agents.codegen.blueprint import Blueprint
from maestro.agents.codegen.conditions import all_hold, record_params, rooted_at
from maestro.agents.codegen.scenarios import RefusalRule
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
            return all_hold(bp, _op, list(_c), args, session.get, bp.clock)

        def anchors(
            session: Session, _op: Any = op, _all: Any = conditions, _r: Any = rule.refuse_when
        ) -> list[tuple[str, str]]:
            return _anchors(bp, _op, _all, _r, session)

        out.append(RefusalRule(rule.operation, rule.rule, applies, anchors))
    return out


def _anchors(
    bp: Blueprint, op: Any, conditions: list[Any], refuse_when: list[Any], session: Session
) -> list[tuple[str, str]]:
    """Records of the parameter the rule looks at that meet the operation's checks and the rule
    (conditions comparing with other parameters are left to the candidate filter)."""
    found: list[tuple[str, str]] = []
    for param, table in record_params(bp, op).items():
        own = rooted_at(bp, op, conditions, param)
        if not any(c in own for c in refuse_when):
            continue
        for key in session.keys(table):
            if all_hold(bp, op, own, {param: key}, session.get, bp.clock):
                found.append((table, key))
    return found
