"""Tasks grounded in live state: tool-graph walks (domains/toolgraph) dressed by the LLM.

The walk fixes everything a task is checked on: the gold writes, their arguments and the expected
final state all come from executing real calls on existing entities. The ``codegen`` model only
writes what a person would say: the user scenario (persona, reason for calling, known and unknown
information, instructions) and the NL assertions, as one JSON object. Its answer is parsed
strictly (unknown keys, missing keys and wrong types are errors) and checked against the walk:
every value the customer must give has to appear in what the customer knows. A bad answer is sent
back with its problem, a bounded number of times; after that the walk is recorded as rejected.

Refusal tasks: the model sees a few writes that the tools accept on live state and the policy,
and names one the policy forbids (or none). The task then has no gold action, that write as its
forbidden action, and a phrase from the policy the assistant must communicate.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maestro.agents.client import ChatClient, Endpoints, ProviderError
from maestro.agents.settings import LLMSettings
from maestro.domains.library import library_path
from maestro.domains.loader import load_domain
from maestro.domains.models import (
    Action,
    EvaluationCriteria,
    Provenance,
    RewardType,
    Task,
    TaskDescription,
    UserInstructions,
    UserScenario,
)
from maestro.domains.package import Domain, replay_gold
from maestro.domains.toolgraph import Walk, build_tool_graph, sample_walks
from maestro.scoring.conformance import check_task

#: How often a malformed or ungrounded answer is sent back before the walk is rejected.
DEFAULT_ATTEMPTS = 3
#: Refusal candidates shown to the model in one request.
CANDIDATES_PER_REFUSAL = 4
_POLICY_CHARS = 6000
_RESULT_CHARS = 700


@dataclass
class SynthesisUsage:
    """What the model calls of one synthesis cost."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class TaskSynthesis:
    """Synthesized tasks, the walks or answers that were rejected and why, and the LLM usage."""

    tasks: list[Task] = field(default_factory=list)
    #: ``(reason, detail)``; reasons: no_walk, provider_error, malformed_output, no_forbidden_write,
    #: conformance.
    rejected: list[tuple[str, str]] = field(default_factory=list)
    usage: SynthesisUsage = field(default_factory=SynthesisUsage)
    walks: int = 0


class ScenarioDraft(BaseModel):
    """What the model writes for a walk."""

    model_config = ConfigDict(extra="forbid", strict=True)

    persona: str = Field(min_length=1)
    reason_for_call: str = Field(min_length=1)
    known_info: str = Field(min_length=1)
    unknown_info: str | None = None
    task_instructions: str = Field(min_length=1)
    nl_assertions: list[str] = Field(min_length=1, max_length=5)


class RefusalDraft(ScenarioDraft):
    """What the model writes for a refusal: which candidate the policy forbids, and why."""

    #: 1-based index of the forbidden candidate; null when the policy forbids none of them.
    candidate: int | None
    rule: str = Field(min_length=1)
    communicate_info: list[str] = Field(min_length=1, max_length=3)


class DraftError(ValueError):
    """A model answer that cannot be used; the message says what is wrong with it."""


SCENARIO_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}

# The agent's policy
{policy}

# What must happen
A correct conversation makes these tool calls, in this order (results shown):
{calls}

# Records involved (from the live database)
{records}

# Your job
Write the customer's side: who they are, why they call, what they know, and how to behave, so
that a simulated customer can play it. The customer must know, and state in known_info, each of
these exact values: {user_values}. Include in known_info what the policy needs to verify the
customer's identity (names, dates of birth, emails from the records above). Do not tell the
customer the tool names. Then write 1 to 5 assertions a judge can check in the transcript (what
the agent must say or do).

Be brief: every text value is one or two sentences, all of them strings (no nested objects).
Answer with one JSON object only, no other text, with exactly these keys:
{{"persona": "...", "reason_for_call": "...", "known_info": "...", "unknown_info": null,
  "task_instructions": "...", "nl_assertions": ["..."]}}"""

REFUSAL_PROMPT = """You write test scenarios for a customer-service AI agent of this business:
{description}

# The agent's policy
{policy}

# Candidate requests
Each is a change the system would technically accept right now:
{candidates}

# Records involved (from the live database)
{records}

# Your job
Pick the one candidate that the policy FORBIDS in this situation (the agent must refuse it), and
write a customer who asks for it. If the policy forbids none of them, answer with "candidate":
null. "rule" names the policy rule; "communicate_info" lists 1 to 3 short phrases copied exactly
from the policy text that the agent must say when refusing; "nl_assertions" say what the agent
must and must not do. The customer's known_info must hold the ids and facts they would give.

Be brief: every text value is one or two sentences, all of them strings (no nested objects).
Answer with one JSON object only, no other text, with exactly these keys:
{{"candidate": 1, "rule": "...", "communicate_info": ["..."], "persona": "...",
  "reason_for_call": "...", "known_info": "...", "unknown_info": null,
  "task_instructions": "...", "nl_assertions": ["..."]}}"""

D = TypeVar("D", bound=ScenarioDraft)

_FENCED = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


def parse_draft(text: str | None, model: type[D]) -> D:
    """The JSON object of a model answer as a draft; DraftError naming the problem."""
    if not text or not text.strip():
        raise DraftError("empty answer")
    fenced = _FENCED.search(text)
    body = fenced.group(1) if fenced else text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise DraftError("no JSON object in the answer")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise DraftError(f"invalid JSON: {exc.msg} at position {exc.pos}") from None
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
    """Ways a value may be written: a number as 40, 40.0 or 40.00."""
    if isinstance(value, int | float):
        return [str(value), f"{value:g}", f"{value:.2f}"]
    return [str(value)]


def plan_walks(
    domain: Domain, *, n: int, seed: int = 0, refusals: int = 0
) -> tuple[list[Walk], list[Walk]]:
    """The walks ``synthesize_tasks`` dresses for this seed: ``n`` task walks, and the refusal
    candidates (``CANDIDATES_PER_REFUSAL`` single writes per refusal). No model call."""
    graph = build_tool_graph(domain, seed=seed)
    existing = [_task_signature(t) for t in domain.tasks]
    walks = sample_walks(domain, graph, n, seed=seed, exclude=existing)
    pool = sample_walks(
        domain,
        graph,
        refusals * CANDIDATES_PER_REFUSAL,
        seed=seed + 7919,  # a different stream from the walks above
        max_reads=0,
        max_writes=1,
        optional_rate=0.6,
        exclude=existing,
    )
    return walks, pool


async def synthesize_tasks(
    domain: Domain,
    client: ChatClient,
    *,
    n: int,
    seed: int = 0,
    refusals: int = 0,
    attempts: int = DEFAULT_ATTEMPTS,
    concurrency: int = 4,
) -> TaskSynthesis:
    """Up to ``n`` walk tasks and ``refusals`` refusal tasks for a domain, all ``synthesized``.

    Every task passes the loader's task checks and the conformance yardsticks (gold scores 1,
    doing nothing scores 0, the perturbed or forbidden call scores 0); its ids never collide
    with the domain's own. Works on library domains ("more tasks for them") and generated ones.
    Model calls go out with the episode name ``synthesis/<domain>/walk-<i>`` or ``.../refusal-<j>``
    on the ``codegen`` role. The same seed samples the same walks.
    """
    out = TaskSynthesis()
    walks, pool = plan_walks(domain, n=n, seed=seed, refusals=refusals)
    out.walks = len(walks)
    if len(walks) < n:
        out.rejected.append(("no_walk", f"only {len(walks)} of {n} walks could be grounded"))
    gate = asyncio.Semaphore(concurrency)
    ids = {t.id for t in domain.tasks}
    stamp = datetime.now(UTC).date().isoformat()

    async def one(kind: str, i: int, group: list[Walk]) -> Task | None:
        async with gate:
            return await _synthesize_one(domain, client, kind, i, group, out, attempts)

    jobs = [one("walk", i, [w]) for i, w in enumerate(walks)]
    for j in range(refusals):
        group = pool[j * CANDIDATES_PER_REFUSAL : (j + 1) * CANDIDATES_PER_REFUSAL]
        if group:
            jobs.append(one("refusal", j, group))
        else:
            out.rejected.append(("no_walk", f"refusal {j}: no write succeeds on live state"))
    for task in await asyncio.gather(*jobs):
        if task is None:
            continue
        task = _finish(task, domain, ids, seed, client, stamp)
        problems = task_problems(domain, task)
        if problems:
            out.rejected.append(("conformance", f"{task.id}: " + "; ".join(problems)))
            continue
        ids.add(task.id)
        out.tasks.append(task)
    return out


async def _synthesize_one(
    domain: Domain,
    client: ChatClient,
    kind: str,
    index: int,
    group: list[Walk],
    out: TaskSynthesis,
    attempts: int,
) -> Task | None:
    episode = f"synthesis/{domain.id}/{kind}-{index}"
    refusal = kind == "refusal"
    prompt = _refusal_prompt(domain, group) if refusal else _walk_prompt(domain, group[0])
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    problems: list[str] = []
    for attempt in range(attempts):
        try:
            done = await client.complete(messages, episode=episode, seed=attempt)
        except ProviderError as exc:
            out.usage.calls += 1
            out.usage.failed_calls += 1
            out.rejected.append(("provider_error", f"{episode}: {exc}"))
            return None
        out.usage.calls += 1
        out.usage.prompt_tokens += done.prompt_tokens
        out.usage.completion_tokens += done.completion_tokens
        text = done.message.content
        try:
            if refusal:
                return _refusal_task(domain, group, parse_draft(text, RefusalDraft))
            draft = parse_draft(text, ScenarioDraft)
            found = grounding_problems(draft, group[0].user_values)
            if found:
                raise DraftError("; ".join(found))
            return _walk_task(domain, group[0], draft)
        except _NoForbidden as exc:
            out.rejected.append(("no_forbidden_write", f"{episode}: {exc}"))
            return None
        except DraftError as exc:
            # A small model's answer often stops at its token cap: say so, or it repeats itself.
            cut = " (it was cut off at the length limit: write less)"
            capped = done.completion_tokens >= client.settings.max_tokens
            why = f"{exc}{cut if done.finish_reason == 'length' or capped else ''}"
            problems.append(f"attempt {attempt + 1}: {why}")
            messages += [
                {"role": "assistant", "content": text or ""},
                {
                    "role": "user",
                    "content": f"That answer cannot be used: {why}. "
                    "Answer again with the JSON object only.",
                },
            ]
    out.rejected.append(("malformed_output", f"{episode}: " + "; ".join(problems)))
    return None


class _NoForbidden(Exception):
    pass


def _walk_task(domain: Domain, walk: Walk, draft: ScenarioDraft) -> Task:
    actions = [
        Action(
            action_id=f"a{i}",
            name=s.name,
            arguments=s.arguments,
            compare_args=list(s.grounded),
        )
        for i, s in enumerate(walk.writes, start=1)
    ]
    path = " -> ".join(s.name for s in walk.steps)
    return Task(
        id="pending",
        description=TaskDescription(
            purpose=f"Synthesized from a tool-graph walk: {path}",
            notes=f"expected state hash {walk.expected_state_hash}",
        ),
        user_scenario=_scenario(domain, draft),
        evaluation_criteria=EvaluationCriteria(
            actions=actions,
            nl_assertions=draft.nl_assertions,
            reward_basis=[RewardType.DB, RewardType.ACTION, RewardType.NL_ASSERTION],
        ),
        category="single_write" if len(actions) == 1 else "multi_write",
    )


def _refusal_task(domain: Domain, group: list[Walk], draft: RefusalDraft) -> Task:
    if draft.candidate is None:
        raise _NoForbidden(f"the model found no forbidden candidate ({draft.rule})")
    if not 1 <= draft.candidate <= len(group):
        raise DraftError(f"candidate must be 1..{len(group)} or null, not {draft.candidate}")
    policy = domain.policy.casefold()
    unquoted = [c for c in draft.communicate_info if c.casefold() not in policy]
    if unquoted:
        raise DraftError(f"communicate_info phrases not found in the policy text: {unquoted}")
    step = group[draft.candidate - 1].writes[0]
    return Task(
        id="pending",
        description=TaskDescription(
            purpose=f"Synthesized refusal: {step.name} is forbidden here",
            relevant_policies=draft.rule,
        ),
        user_scenario=_scenario(domain, draft),
        evaluation_criteria=EvaluationCriteria(
            communicate_info=draft.communicate_info,
            nl_assertions=draft.nl_assertions,
            reward_basis=[RewardType.DB, RewardType.COMMUNICATE, RewardType.NL_ASSERTION],
            forbidden_actions=[Action(action_id="f1", name=step.name, arguments=step.arguments)],
        ),
        category="refusal",
    )


def _scenario(domain: Domain, draft: ScenarioDraft) -> UserScenario:
    return UserScenario(
        persona=draft.persona,
        instructions=UserInstructions(
            domain=domain.id,
            reason_for_call=draft.reason_for_call,
            known_info=draft.known_info,
            unknown_info=draft.unknown_info,
            task_instructions=draft.task_instructions,
        ),
    )


def _finish(
    task: Task, domain: Domain, taken: set[str], seed: int, client: ChatClient, stamp: str
) -> Task:
    """The task with a fresh id and its provenance."""
    prefix = "r" if task.category == "refusal" else "w"
    i = 1
    while f"{domain.id}_syn{seed}_{prefix}{i:03d}" in taken:
        i += 1
    task_id = f"{domain.id}_syn{seed}_{prefix}{i:03d}"
    taken.add(task_id)
    return task.model_copy(
        update={
            "id": task_id,
            "split": "train",
            "provenance": Provenance(
                source="synthesized",
                authors=[f"maestro task synthesis ({client.model})"],
                created=stamp,
                notes=f"seed {seed}",
            ),
        }
    )


def task_problems(domain: Domain, task: Task) -> list[str]:
    """Why a synthesized task would fail the loader's task checks or the yardsticks."""
    problems = [
        f"reward_basis {c.value} has nothing to check"
        for c in task.evaluation_criteria.empty_criteria()
    ]
    for a in [*task.evaluation_criteria.actions, *task.evaluation_criteria.forbidden_actions]:
        problems += [
            f"{a.action_id}: {m}" for m in domain.toolkit.validate_arguments(a.name, a.arguments)
        ]
    if problems:
        return problems
    if not replay_gold(domain, task).ok:
        return ["gold replay fails"]
    return check_task(domain, task).problems


def _task_signature(task: Task) -> str:
    """The signature a walk of this task's gold writes would have (see Walk.signature)."""
    return json.dumps(
        [[a.name, a.compared()] for a in task.gold_actions], sort_keys=True, default=str
    )


# ----- prompts -----------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " ...(cut)"


def _records(domain: Domain, walks: list[Walk]) -> str:
    session = domain.start_session()
    seen: dict[tuple[str, str], None] = {}
    for w in walks:
        for e in w.entities:
            seen.setdefault(e)
    lines = [
        f"- {t}/{k}: {_clip(json.dumps(session.get(t, k), default=str), _RESULT_CHARS)}"
        for t, k in list(seen)[:12]
    ]
    return "\n".join(lines) or "(none)"


def _description(domain: Domain) -> str:
    return f"{domain.manifest.name}: {domain.manifest.description}"


def _walk_prompt(domain: Domain, walk: Walk) -> str:
    calls = "\n".join(
        f"{i}. {s.name}({json.dumps(s.arguments, default=str)}) -> {_clip(s.content, _RESULT_CHARS)}"
        for i, s in enumerate(walk.steps, start=1)
    )
    values = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in walk.user_values.items())
    return SCENARIO_PROMPT.format(
        description=_description(domain),
        policy=_clip(domain.policy, _POLICY_CHARS),
        calls=calls,
        records=_records(domain, [walk]),
        user_values=values or "(none)",
    )


def _refusal_prompt(domain: Domain, group: list[Walk]) -> str:
    candidates = "\n".join(
        f"{i}. {w.writes[0].name}({json.dumps(w.writes[0].arguments, default=str)})"
        for i, w in enumerate(group, start=1)
    )
    return REFUSAL_PROMPT.format(
        description=_description(domain),
        policy=_clip(domain.policy, _POLICY_CHARS),
        candidates=candidates,
        records=_records(domain, group),
    )


# ----- more tasks for a library domain ----------------------------------------------------------


async def more_library_tasks(
    domain_id: str,
    settings: LLMSettings,
    *,
    n: int,
    seed: int = 0,
    refusals: int = 0,
    base_url: str | None = None,
) -> TaskSynthesis:
    """``n`` more tasks (and ``refusals`` refusals) for a library domain, with the ``codegen``
    role's endpoint (or ``base_url``, such as the embedded model's). Nothing is written: the
    caller stores the tasks (``tasks_jsonl``) or passes them on."""
    domain = load_domain(library_path(domain_id), check_gold=False)
    async with Endpoints() as endpoints:
        client = endpoints.client("codegen", settings.codegen, base_url)
        return await synthesize_tasks(domain, client, n=n, seed=seed, refusals=refusals)


def tasks_jsonl(tasks: list[Task]) -> str:
    """Tasks as ``tasks.jsonl`` lines (what the loader reads)."""
    return "".join(t.model_dump_json(exclude_none=True) + "\n" for t in tasks)
