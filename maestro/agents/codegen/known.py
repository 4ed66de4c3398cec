"""What a customer knows: the keys only the desk knows, and how the agent reaches them.

A customer knows their booking code (it is in their email) but not a car class's ``CC1008``, a
branch's ``BR1002`` or a charge's internal id: they say "a full-size SUV", "the downtown
branch", "the Wayfair charge of December 3". A blueprint marks such tables (``key_known:
false``, or a catalog by default); every operation that takes one of their keys needs a read
that shows it to the agent, reached from what the customer can say: a list or lookup of that
table by a name or a city, or a read of a record that refers to it. The walks then plan that
read as a gold step (:attr:`maestro.domains.toolgraph.WalkGuide.desk_keys`), and a scenario
that has the customer state such a key is sent back (:func:`hidden_key_problems`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from maestro.agents.codegen.conditions import record_params

if TYPE_CHECKING:
    from maestro.agents.codegen.blueprint import BlueprintDraft

#: The reads whose answers are records (a quote answers computed values).
_RECORD_READS = ("read", "lookup", "list")


def reachable_tables(bp: BlueprintDraft) -> tuple[set[str], set[str]]:
    """The tables whose keys the agent can learn, and of them those it can search (pick any
    record of, not only the one a customer's record refers to).

    A customer knows some tables' keys; a read whose every key is learnable shows its table's
    records and the keys they refer to; a list or lookup of a table searches it."""
    desk = bp.desk_keys()
    refs = {
        e.table: {t.ref for t in e.field_types().values() if t.ref is not None} for e in bp.entities
    }
    reachable = {e.table for e in bp.entities if e.table not in desk}
    searched = set(reachable)
    grew = True
    while grew:
        grew = False
        for op in bp.operations:
            if op.kind not in _RECORD_READS:
                continue
            if not set(record_params(bp, op).values()) <= reachable:
                continue
            shown = {op.table, *refs.get(op.table, set())}
            found = {op.table} if op.kind in ("list", "lookup") else set()
            if not shown <= reachable or not found <= searched:
                reachable |= shown
                searched |= found
                grew = True
    return reachable, searched


def desk_key_problems(bp: BlueprintDraft) -> list[str]:
    """Operations that take a key no customer knows and no read shows: the record's own key
    (``sailing_id``) needs a read that shows it, another one (``new_sailing_id``) a list or
    lookup of its table."""
    desk = bp.desk_keys()
    if not desk:
        return []
    reachable, searched = reachable_tables(bp)
    keys = {e.table: e.key for e in bp.entities}
    problems: list[str] = []
    for op in bp.operations:
        for param, table in record_params(bp, op).items():
            if table not in desk:
                continue
            other = param != keys[table]
            if table in (searched if other else reachable):
                continue
            entity = bp.entity(table)
            problems.append(
                f"operation {op.name}: {param} is a key of {table}, which a customer does not "
                f"know ({entity.name} is a catalog or has key_known false) and "
                + ("no list or lookup of it finds: " if other else "no read shows: ")
                + f"add a list or lookup of {table} by what a customer knows of one (its name, "
                "its city, its route and date)"
                + ("" if other else ", or a read whose answer shows it")
            )
    return problems


def hidden_key_problems(texts: list[str | None], hidden: tuple[str, ...]) -> list[str]:
    """Keys only the desk knows that a scenario has the customer say."""
    said = " ".join(t for t in texts if t)
    stated = [
        k for k in hidden if re.search(rf"(?<![A-Za-z0-9]){re.escape(k)}(?![0-9])", said, re.I)
    ]
    if not stated:
        return []
    return [
        f"the customer cannot know {', '.join(stated)} (keys only the desk sees): take them out "
        "of known_info, reason_for_call and task_instructions, and have the customer name "
        "those records by what they know of them (a name, a city, a date, an amount); the "
        "agent finds the keys with its tools"
    ]
