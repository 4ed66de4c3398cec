"""The task synthesis's prompts: a walk's customer scenario, and a refusal.

Both show the clock (the conversation happens "now", at the domain's clock), the policy, the
calls, and every record involved, the customer's own record included (the policy's identity
details come from it). Each states its answer's shape as a JSON example that its parser accepts
(the contract tests parse them).
"""

from __future__ import annotations

import json
from typing import Any

from maestro.domains.package import Domain
from maestro.domains.toolgraph import Walk, related_records

_POLICY_CHARS = 6000
_RESULT_CHARS = 700
_RECORDS = 14

SCENARIO_SHAPE = {
    "persona": "...",
    "reason_for_call": "...",
    "known_info": "...",
    "unknown_info": None,
    "task_instructions": "...",
    "nl_assertions": ["..."],
}

REFUSAL_SHAPE = {"candidate": 1, "rule": "...", "communicate_info": ["..."], **SCENARIO_SHAPE}

#: The answer when no candidate is forbidden: the other keys may be left out or null.
REFUSAL_NONE = {"candidate": None}

SCENARIO_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}
{clock}

# The agent's policy
{policy}

# What must happen
A correct conversation makes these tool calls, in this order (results shown):
{calls}

# Records involved (from the live database)
{records}

# Your job
Write the customer's side: who they are, why they call, what they know, and how to behave, so
that a simulated customer can play it. The customer is one person, the one these records belong
to, calling about their own records today. The customer must know, and state in known_info, each
of these exact values: {user_values}. Include in known_info what the policy needs to verify the
customer's identity, copied from their record above (such as their name, email or date of
birth). Do not tell the customer the tool names. Then write 1 to 5 assertions a judge can check
in the transcript (what the agent must say or do).

Be brief: every text value is one or two sentences, all of them strings (no nested objects);
unknown_info is a string or null.
Answer with one JSON object only, no other text, with exactly these keys:
{shape}"""

REFUSAL_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}
{clock}

# The agent's policy
{policy}

# Candidate requests
Each is a change the system would technically accept right now:
{candidates}
{rule}
# Records involved (from the live database)
{records}

# Your job
Pick the one candidate that the policy FORBIDS in this situation (the agent must refuse it), and
write a customer who asks for it, today. The customer is one person, the owner of the records of
that candidate. If the policy forbids none of them, answer with {none} (the other keys may be
left out or null). "rule" names the policy rule; "communicate_info" lists 1 to 3 short phrases
copied exactly from the policy text that the agent must say when refusing; "nl_assertions" say
what the agent must and must not do. The customer's known_info must hold the exact values the chosen
candidate says the customer gives and the details the policy needs to verify their identity,
copied from their record above.

Be brief: every text value is one or two sentences, all of them strings (no nested objects);
unknown_info is a string or null.
Answer with one JSON object only, no other text, with exactly these keys:
{shape}"""


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


def clock_text(domain: Domain) -> str:
    clock = domain.manifest.clock
    if clock is None:
        return ""
    return (
        f"Today is {clock.strftime('%A')} {clock.date().isoformat()}, {clock.strftime('%H:%M')}: "
        "the conversation happens now, and every date is relative to this day."
    )


def records_text(domain: Domain, walks: list[Walk]) -> str:
    session = domain.start_session()
    entities = [e for w in walks for e in w.entities]
    shown = related_records(domain, session, entities, hops=2)[:_RECORDS]
    lines = [
        f"- {t}/{k}: {clip(json.dumps(session.get(t, k), default=str), _RESULT_CHARS)}"
        for t, k in shown
    ]
    return "\n".join(lines) or "(none)"


def _description(domain: Domain) -> str:
    return f"{domain.manifest.name}: {domain.manifest.description}"


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in values.items()) or "(none)"


def walk_prompt(domain: Domain, walk: Walk) -> str:
    calls = "\n".join(
        f"{i}. {s.name}({json.dumps(s.arguments, default=str)}) -> {clip(s.content, _RESULT_CHARS)}"
        for i, s in enumerate(walk.steps, start=1)
    )
    return SCENARIO_PROMPT.format(
        description=_description(domain),
        clock=clock_text(domain),
        policy=clip(domain.policy, _POLICY_CHARS),
        calls=calls,
        records=records_text(domain, [walk]),
        user_values=_values(walk.user_values),
        shape=json.dumps(SCENARIO_SHAPE),
    )


def refusal_prompt(domain: Domain, group: list[Walk], rule: str | None) -> str:
    candidates = "\n".join(
        f"{i}. {w.writes[0].name}({json.dumps(w.writes[0].arguments, default=str)}); the "
        f"customer gives {_values(w.user_values)}"
        for i, w in enumerate(group, start=1)
    )
    hint = f"\nThe policy's rule that applies to them: {rule}\n" if rule is not None else ""
    return REFUSAL_PROMPT.format(
        description=_description(domain),
        clock=clock_text(domain),
        policy=clip(domain.policy, _POLICY_CHARS),
        candidates=candidates,
        rule=hint,
        records=records_text(domain, group),
        none=json.dumps(REFUSAL_NONE),
        shape=json.dumps(REFUSAL_SHAPE),
    )
