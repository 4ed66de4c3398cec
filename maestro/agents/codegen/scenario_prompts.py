"""The task synthesis's prompts, a walk's customer scenario and a refusal, and their parser.

Both show the clock (the conversation happens "now", at the domain's clock), the policy, the
calls, and every record involved, the customer's own record included (the policy's identity
details come from it). Each states its answer's shape as a JSON example that its parser
(:func:`parse_draft` with :class:`ScenarioDraft` or :class:`RefusalDraft`) accepts: a prompt and
its parser are one contract, kept in one module (the contract tests parse the shapes).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from maestro.agents.structured import AnswerRefused, json_object
from maestro.domains.package import Domain
from maestro.domains.toolgraph import reference_fields
from maestro.domains.walks import Walk, related_records

if TYPE_CHECKING:
    from maestro.agents.codegen.scenarios import RefusedState

_POLICY_CHARS = 6000
_RESULT_CHARS = 700
_RECORDS = 14
_REFERRING = 6

SCENARIO_SHAPE = {
    "persona": "...",
    "reason_for_call": "...",
    "known_info": "...",
    "unknown_info": None,
    "task_instructions": "...",
    "nl_assertions": ["..."],
}

REFUSAL_SHAPE = {"candidate": 1, "rule": "...", "communicate_info": ["..."], **SCENARIO_SHAPE}

INFO_SHAPE = {**SCENARIO_SHAPE, "communicate_info": ["..."]}

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
{notes}
# Your job
Write the customer's side: who they are, why they call, what they know, and how to behave, so
that a simulated customer can play it. The customer is one person, the one these records belong
to, calling about their own records today. The customer must know, and state in known_info, each
of these exact values: {user_values}. Include in known_info what the policy needs to verify the
customer's identity, copied from their record above (such as their name, email or date of
birth). Do not tell the customer the tool names. Then write 1 to 5 assertions a judge can check
in the transcript (what the agent must say or do).

The simulated customer gives known_info only when the agent asks for it: so reason_for_call
states what the customer opens with, and task_instructions never tell the customer to give a
value of known_info unprompted (write "when the agent asks, give ..." or leave it to known_info).
Be brief: every text value is one or two sentences, all of them strings (no nested objects);
unknown_info is a string or null.
Answer with one JSON object only, no other text, with exactly these keys:
{shape}"""

INFO_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}
{clock}

# The agent's policy
{policy}

# What the customer wants to know
A correct conversation makes these tool calls, in this order (results shown); the last answer
tells the customer what they call to learn, and nothing is changed:
{calls}

# Records involved (from the live database)
{records}
{notes}
# Your job
Write a customer who calls to learn something the last answer above tells (what a quote comes
to, the status or date of their booking, a balance, what is left), and the facts the agent must
tell them: "communicate_info" lists 1 to 3 of them, each a value as the last answer shows it
(an amount, a date, a status, a count, a name) in at most 7 words, never a sentence. The
customer does not know these facts: they are never in known_info, reason_for_call or
task_instructions. The customer is one person, the one these records belong to, calling about
their own records today. The customer must know, and state in known_info, each of these exact
values: {user_values}. Include in known_info what the policy needs to verify the customer's
identity, copied from their record above. Do not tell the customer the tool names. Then write 1
to 5 assertions a judge can check in the transcript (what the agent must say or do; the agent
changes nothing).

The simulated customer gives known_info only when the agent asks for it: so reason_for_call
states what the customer opens with, and task_instructions never tell the customer to give a
value of known_info unprompted (write "when the agent asks, give ..." or leave it to known_info).
Be brief: every text value is one or two sentences, all of them strings (no nested objects);
unknown_info is a string or null.
Answer with one JSON object only, no other text, with exactly these keys:
{shape}"""

REFUSAL_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}
{clock}

# The agent's policy
{policy}

# {heading}
{candidates}
{rule}
# Records involved (from the live database)
{records}
{notes}
# Your job
{job} The customer is one person, the owner of the records of that candidate.
"rule" names the policy rule; "communicate_info" lists 1 to 3 facts that the policy text
states, in its words, and the agent must say when refusing: each a limit, a fee, a time window,
a place or a count in at most 7 words ("2 checked bags", "$45", "60 days"), never a sentence
(the agent says the fact in its own words; case, punctuation and singular or plural do not
matter). A value of the customer's own records (their booking's date) is not in the policy, so
it is no such fact; say it in "nl_assertions" if the agent must. "nl_assertions" say what the
agent must and must not do about the request (not that it verifies the customer's identity: a
careful agent may refuse from a record that is nobody's, a flight or a drug, before it reads
any of theirs). The customer's known_info must hold the exact values the candidate says the
customer gives (among them the details the policy needs to verify their identity, from their
own record above).

The simulated customer gives known_info only when the agent asks for it: so reason_for_call
states what the customer opens with, and task_instructions never tell the customer to give a
value of known_info unprompted (write "when the agent asks, give ..." or leave it to known_info).
Be brief: every text value is one or two sentences, all of them strings (no nested objects);
unknown_info is a string or null.
Answer with one JSON object only, no other text, with exactly these keys:
{shape}"""

#: A rule's refusal: the one candidate is forbidden by construction (the rule holds of it now).
_RULE_HEADING = "The request"
_RULE_JOB = (
    "The customer asks for candidate 1 today, and the policy forbids it: the agent must refuse. "
    'Write that customer, with "candidate": 1. If you find that the policy does not forbid it '
    "after all, answer with {none} (the other keys may be left out or null)."
)
#: A refusal the tool enforces: the candidate's call is refused by its tool, whose answer is shown.
_TOOL_JOB = (
    "The customer asks for candidate 1 today, and the desk's tool refuses it (its answer is "
    "shown): the agent must tell the customer no and why, from the policy, whether it checks "
    'first or tries the call. Write that customer, with "candidate": 1, and "rule" the policy '
    "rule the tool's answer applies. If the policy states no such rule, answer with {none} "
    "(the other keys may be left out or null)."
)
#: A tool refusal for a record's status: the fact is the state the record is in.
_STATE = (
    "\nThe tool refuses it for the state its record is in: {state}. A careful agent tells the "
    "customer that state as the record shows it, so one fact of communicate_info is "
    '{value!r}, never the policy\'s words for the state the rule needs ("not yet ...").\n'
)
#: Without a rule, the candidates are writes the tools accept; the model judges the policy.
_PICK_HEADING = "Candidate requests"
_PICK_JOB = (
    "Pick one candidate that the policy FORBIDS in this situation (the agent must refuse it; "
    "when several are forbidden, pick any one of them), and write a customer who asks for it, "
    "today. If the policy forbids none of them, answer with {none} (the other keys may be left "
    "out or null)."
)

#: Where a reviewer's finding on earlier tasks goes, for the writer to avoid.
_NOTES = (
    "\n# A reviewer's finding on earlier tasks of this domain\n{notes}\nWrite this one so "
    "that it does not have that problem.\n"
)


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


def records_text(domain: Domain, walks: list[Walk], referring: bool = False) -> str:
    """The walks' records and those they refer to; with ``referring``, also up to
    ``_REFERRING`` records that refer to the records the writes name (a prescription's pending
    refill, which a rule counts: a refusal's writer saw the rule but not the refill)."""
    session = domain.start_session()
    entities = [e for w in walks for e in w.entities]
    shown = related_records(domain, session, entities, hops=2)[:_RECORDS]
    if referring:
        given = {
            v for w in walks for s in w.writes for v in s.arguments.values() if isinstance(v, str)
        }
        named = {e for e in entities if e[1] in given}
        extra: list[tuple[str, str]] = []
        for table, fields in reference_fields(domain).items():
            for key in session.keys(table):
                record = session.get(table, key) or {}
                refers = any((t, str(record.get(f))) in named for f, t in fields.items())
                if refers and (table, key) not in shown and len(extra) < _REFERRING:
                    extra.append((table, key))
        shown += extra
    lines = [
        f"- {t}/{k}: {clip(json.dumps(session.get(t, k), default=str), _RESULT_CHARS)}"
        for t, k in shown
    ]
    return "\n".join(lines) or "(none)"


def hidden_text(walks: list[Walk]) -> str:
    """The keys of a prompt's records that the customer cannot know, said after the records."""
    hidden = list(dict.fromkeys(k for w in walks for k in w.hidden))
    if not hidden:
        return ""
    return (
        f"\nOnly the desk sees these keys: {', '.join(hidden)}. The customer does not know them "
        "and never says them (not in known_info, reason_for_call or task_instructions): they "
        "name those records by what they know of them (a name, a city, a date, an amount), and "
        "the agent finds the keys with its tools."
    )


def _description(domain: Domain) -> str:
    return f"{domain.manifest.name}: {domain.manifest.description}"


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in values.items()) or "(none)"


def _notes(notes: str | None) -> str:
    return _NOTES.format(notes=notes) if notes else ""


def walk_prompt(domain: Domain, walk: Walk, notes: str | None = None) -> str:
    return _calls_prompt(SCENARIO_PROMPT, SCENARIO_SHAPE, domain, walk, notes)


def info_prompt(domain: Domain, walk: Walk, notes: str | None = None) -> str:
    """An information request: the calls that answer it, and the customer who asks."""
    return _calls_prompt(INFO_PROMPT, INFO_SHAPE, domain, walk, notes)


def _calls_prompt(
    template: str, shape: dict[str, Any], domain: Domain, walk: Walk, notes: str | None
) -> str:
    """A walk's prompt: its calls with their results, the records, the values to know."""
    calls = "\n".join(
        f"{i}. {s.name}({json.dumps(s.arguments, default=str)}) -> {clip(s.content, _RESULT_CHARS)}"
        for i, s in enumerate(walk.steps, start=1)
    )
    return template.format(
        description=_description(domain),
        clock=clock_text(domain),
        policy=clip(domain.policy, _POLICY_CHARS),
        calls=calls,
        records=records_text(domain, [walk]) + hidden_text([walk]),
        user_values=_values(walk.user_values),
        shape=json.dumps(shape),
        notes=_notes(notes),
    )


def refusal_prompt(
    domain: Domain,
    group: list[Walk],
    rule: str | None,
    notes: str | None = None,
    state: RefusedState | None = None,
) -> str:
    """One candidate forbidden by ``rule``, one its tool refuses (a ``refused`` walk), or (no
    rule) candidates to pick a forbidden one of. ``state``: the state the refused record is in,
    when the tool refuses for a status (``scenarios.RefusedState``)."""
    candidates = "\n".join(
        f"{i}. {w.writes[0].name}({json.dumps(w.writes[0].arguments, default=str)}); the "
        f"customer gives {_values(w.user_values)}"
        + (f"; the tool answers: {clip(w.writes[0].content, _RESULT_CHARS)}" if w.refused else "")
        for i, w in enumerate(group, start=1)
    )
    none = json.dumps(REFUSAL_NONE)
    if group and group[0].refused:
        heading, job, hint = _RULE_HEADING, _TOOL_JOB.format(none=none), ""
        if state is not None:
            hint = _STATE.format(state=state, value=state.value)
    elif rule is not None:
        heading, job = _RULE_HEADING, _RULE_JOB.format(none=none)
        hint = f"\nThe policy's rule that forbids it: {rule}\n"
    else:
        heading, job, hint = _PICK_HEADING, _PICK_JOB.format(none=none), ""
    return REFUSAL_PROMPT.format(
        description=_description(domain),
        clock=clock_text(domain),
        policy=clip(domain.policy, _POLICY_CHARS),
        heading=heading,
        candidates=candidates,
        rule=hint,
        records=records_text(domain, group, referring=True) + hidden_text(group),
        notes=_notes(notes),
        job=job,
        shape=json.dumps(REFUSAL_SHAPE),
    )


# ----- the answers the prompts ask for, and their parser -------------------------------------


class ScenarioDraft(BaseModel):
    """What the model writes for a walk."""

    model_config = ConfigDict(extra="forbid", strict=True)

    persona: str = Field(min_length=1)
    reason_for_call: str = Field(min_length=1)
    known_info: str = Field(min_length=1)
    unknown_info: str | None = None
    task_instructions: str = Field(min_length=1)
    nl_assertions: list[str] = Field(min_length=1, max_length=5)


class InfoDraft(ScenarioDraft):
    """What the model writes for an information request: the customer, and the facts of the
    last answer the agent must tell them."""

    communicate_info: list[str] = Field(min_length=1, max_length=3)

    def scenario(self) -> ScenarioDraft:
        return ScenarioDraft(**self.model_dump(exclude={"communicate_info"}))


class RefusalDraft(BaseModel):
    """What the model writes for a refusal: which candidate the policy forbids, why, and the
    customer who asks for it. ``{"candidate": null}`` alone says none is forbidden."""

    model_config = ConfigDict(extra="forbid", strict=True)

    #: 1-based index of the forbidden candidate; null when the policy forbids none of them.
    candidate: int | None
    rule: str | None = None
    # The lists are bounded in the schema as the checks below bound them: decoded under a
    # grammar, the embedded model once repeated one assertion until its 4,096-token cap.
    communicate_info: list[str] | None = Field(None, min_length=1, max_length=3)
    persona: str | None = None
    reason_for_call: str | None = None
    known_info: str | None = None
    unknown_info: str | None = None
    task_instructions: str | None = None
    nl_assertions: list[str] | None = Field(None, min_length=1, max_length=5)

    @model_validator(mode="after")
    def _complete(self) -> RefusalDraft:
        if self.candidate is None:
            return self
        missing = [
            name
            for name in (
                "rule",
                "communicate_info",
                "persona",
                "reason_for_call",
                "known_info",
                "task_instructions",
                "nl_assertions",
            )
            if not getattr(self, name)
        ]
        if missing:
            raise ValueError(f"a chosen candidate needs {missing} (non-empty)")
        if not 1 <= len(self.communicate_info or []) <= 3:
            raise ValueError("communicate_info holds 1 to 3 phrases")
        if not 1 <= len(self.nl_assertions or []) <= 5:
            raise ValueError("nl_assertions holds 1 to 5 assertions")
        return self

    def scenario(self) -> ScenarioDraft:
        """The customer's side, once a candidate is chosen."""
        return ScenarioDraft(
            persona=str(self.persona),
            reason_for_call=str(self.reason_for_call),
            known_info=str(self.known_info),
            unknown_info=self.unknown_info,
            task_instructions=str(self.task_instructions),
            nl_assertions=list(self.nl_assertions or []),
        )


class DraftError(ValueError):
    """A model answer that cannot be used; the message says what is wrong with it."""


D = TypeVar("D", bound=BaseModel)


def parse_draft(text: str | None, model: type[D]) -> D:
    """The JSON object of a model answer as a draft; DraftError naming the problem."""
    try:
        data = json_object(text)
    except AnswerRefused as exc:
        raise DraftError(str(exc)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()
        ]
        raise DraftError("; ".join(problems)) from None


def grounding_problems(draft: ScenarioDraft, user_values: dict[str, Any]) -> list[str]:
    """Values the customer must give that the scenario does not tell them."""
    told = " ".join([draft.reason_for_call, draft.known_info, draft.task_instructions]).casefold()
    missing = []
    for name, value in user_values.items():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, bool):
                continue  # a yes/no the customer expresses in words
            if not any(form.casefold() in told for form in _spellings(v)):
                missing.append(f"{name}={v}")
    return [f"known_info must state the exact value(s) {', '.join(missing)}"] if missing else []


def _spellings(value: Any) -> list[str]:
    """Ways a value may be written: a number as 40, 40.0 or 40.00; a code word's underscores
    and hyphens as spaces ("by debit card" gives ``debit_card``)."""
    if isinstance(value, int | float):
        return [str(value), f"{value:g}", f"{value:.2f}"]
    text = str(value)
    words = re.sub(r"(?<=[^\W\d_])[_-](?=[^\W\d_])", " ", text)
    return [text, words] if words != text else [text]
