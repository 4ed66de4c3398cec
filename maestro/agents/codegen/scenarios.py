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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from maestro.agents.client import ChatClient, Endpoints, ProviderError
from maestro.agents.codegen.answers import response_format
from maestro.agents.codegen.known import hidden_key_problems
from maestro.agents.codegen.scenario_prompts import (
    DraftError,
    InfoDraft,
    RefusalDraft,
    ScenarioDraft,
    grounding_problems,
    info_prompt,
    parse_draft,
    refusal_prompt,
    walk_prompt,
)
from maestro.agents.settings import LLMSettings
from maestro.agents.structured import StructuredAnswerError, ask_structured
from maestro.conversation import Completion
from maestro.domains.facts import MAX_FACT_WORDS, fact_problem, fact_tokens, states_fact
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
from maestro.domains.store import Session
from maestro.domains.toolgraph import Scope, ToolGraph, WalkGuide, build_tool_graph
from maestro.domains.walks import Walk, WalkStep, sample_walks, without_rules
from maestro.scoring.conformance import check_task
from maestro.scoring.scenario import volunteered_known_facts

#: How often a malformed or ungrounded answer is sent back before the walk is rejected.
DEFAULT_ATTEMPTS = 3
#: Refusal candidates shown to the model in one request when no rule says which are forbidden
#: (the model picks one the policy forbids); a rule's refusal shows the one it forbids.
CANDIDATES_PER_REFUSAL = 4


@dataclass(frozen=True)
class RefusalRule:
    """A rule the agent upholds and the tools do not: refuse ``operation`` when ``applies``
    holds of its arguments on the state the task starts from. ``anchors`` lists the records it
    may apply to (walks start there; None: it looks at no record, any will do); ``aimed``
    gives values of parameters that make it apply."""

    operation: str
    rule: str
    applies: Callable[[dict[str, Any], Session], bool]
    anchors: Callable[[Session], list[tuple[str, str]] | None]
    aimed: dict[str, list[Any]] = field(default_factory=dict)
    #: Why the data offers no candidate, on a state (how many records meet the operation's
    #: checks, the rule, both); None: nothing to say beyond "no candidate".
    explain: Callable[[Session], str] | None = None
    #: A check the tool itself makes (``refusals.tool_rules``): the customer's request is
    #: refused by the tool, and the agent explains why; the rule is the check, for reports.
    enforced: bool = False
    #: For an enforced rule, the parameter whose record the check reads and that record's
    #: table: a check decided by a record that is nobody's (a flight leaving within 24 hours)
    #: is one a careful agent may refuse before it identifies the customer.
    decides: tuple[str, str] | None = None
    #: For an enforced check that only asks for a status of the deciding record (a card must
    #: be 'issued'), that field: the refusal's fact is the state the record is in.
    state_field: str | None = None


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
    #: The write operations in no task's gold, each ``"<name>: <why>"`` (:func:`not_covered`).
    not_covered: list[str] = field(default_factory=list)


@dataclass
class RefusalPlan:
    """The candidates of one refusal request, and the rule that forbids them (None: the model
    judges from the policy alone)."""

    group: list[Walk]
    rule: RefusalRule | None = None
    #: The tables of people the walks were planned with (``ToolGraph.people``): who owns a
    #: record.
    people: frozenset[str] | None = None


def plan_walks(
    domain: Domain,
    *,
    n: int,
    seed: int = 0,
    refusals: int = 0,
    rules: list[RefusalRule] | None = None,
    guide: WalkGuide | None = None,
    exclude: Sequence[str] = (),
    asks: int = 0,
    tool_refusals: int = 0,
    tool_rules: list[RefusalRule] | None = None,
) -> tuple[list[Walk], list[RefusalPlan]]:
    """The walks ``synthesize_tasks`` dresses for this seed, and its refusal requests. No model
    call. ``exclude`` holds signatures no walk may take (tasks a reviewer dropped). Up to
    ``asks`` of the ``n`` walks are information requests (``Walk.asks``: a read the customer
    asks about, nothing written), after the others.

    With ``rules``, each refusal takes its turn of the rules and has one candidate: a single
    write of the rule's operation, started from a record the rule applies to, its parameters
    drawn from the values the rule names, kept only when the rule holds of its arguments.
    Without, each gets ``CANDIDATES_PER_REFUSAL`` random single writes and the model judges them
    against the policy. With a ``guide`` (a synthesized domain's), walks follow it: the identity
    lookup first, parameters from their own fields, nothing an agent rule forbids.

    ``tool_refusals`` more refusals come from ``tool_rules`` (checks the tools make): each a
    request the tool refuses for that one check, from a record that fails it; the rules are
    taken in turn from the seed's, skipping those no walk meets."""
    graph = build_tool_graph(domain, seed=seed, guide=guide)
    existing = [task_signature(domain, t) for t in domain.tasks] + list(exclude)
    questions = sample_walks(
        domain, graph, min(asks, n), seed=seed + 104729, exclude=existing, guide=guide, asks=True
    )
    walks = sample_walks(
        domain, graph, n - len(questions), seed=seed, exclude=existing, guide=guide
    )
    walks += questions
    taken = existing + [w.signature() for w in walks]
    plans: list[RefusalPlan] = []
    if rules:
        start = domain.start_session()
        owners: set[Any] = set()  # the customers refusals have gone to: spread them

        def refuse(j: int) -> None:
            rule = rules[j % len(rules)]
            applies = _applies(rule, start)

            def elsewhere(w: Walk, applies: Callable[[Walk], bool] = applies) -> bool:
                return applies(w) and w.owner not in owners

            group: list[Walk] = []
            for fresh in (True, False):  # another customer when the data has one
                keep = elsewhere if fresh else applies
                group = _rule_walk(
                    domain, graph, rule, rule.anchors(start), keep, seed + 7919 + j, taken, guide
                )
                if group:
                    break
            taken.extend(w.signature() for w in group)
            owners.update(w.owner for w in group if w.owner is not None)
            plans.append(RefusalPlan(group, rule))

        # Each agent rule once; refusals beyond the rules go to tool rules not yet refused, and
        # a rule is refused twice only when no other rule is left to refuse.
        once = min(refusals, len(rules))
        for j in range(once):
            refuse(j)
        spare = refusals - once
        tools = _tool_refusals(
            domain, graph, tool_refusals + spare, tool_rules or [], seed, taken, guide
        )
        plans += tools
        for j in range(once, once + spare - max(0, len(tools) - tool_refusals)):
            refuse(j)
        return walks, plans
    pool = sample_walks(
        domain,
        graph,
        refusals * CANDIDATES_PER_REFUSAL,
        seed=seed + 7919,  # a different stream from the walks above
        max_reads=0,
        max_writes=1,
        optional_rate=0.6,
        exclude=existing,
        guide=without_rules(guide),
    )
    for j in range(refusals):
        plans.append(
            RefusalPlan(pool[j * CANDIDATES_PER_REFUSAL : (j + 1) * CANDIDATES_PER_REFUSAL])
        )
    plans += _tool_refusals(domain, graph, tool_refusals, tool_rules or [], seed, taken, guide)
    return walks, plans


def _rule_walk(
    domain: Domain,
    graph: ToolGraph,
    rule: RefusalRule,
    anchors: list[tuple[str, str]] | None,
    keep: Callable[[Walk], bool],
    seed: int,
    taken: list[str],
    guide: WalkGuide | None,
) -> list[Walk]:
    """One candidate of a rule's refusal: a single write of its operation from ``anchors``,
    its parameters aimed at the rule; refused by its tool when the rule is ``enforced``."""
    return sample_walks(
        domain,
        graph,
        1,
        seed=seed,
        max_writes=1,
        optional_rate=0.6,
        exclude=taken,
        tools=[rule.operation],
        anchors=anchors,
        keep=keep,
        guide=without_rules(guide),
        pinned=rule.aimed,
        refused=rule.enforced,
    )


def _tool_refusals(
    domain: Domain,
    graph: ToolGraph,
    n: int,
    rules: list[RefusalRule],
    seed: int,
    taken: list[str],
    guide: WalkGuide | None,
) -> list[RefusalPlan]:
    """Up to ``n`` refusals the tools enforce, one per rule, the rules taken in turn from
    ``seed``; a rule no walk meets is passed over (each rule is tried once)."""
    start = domain.start_session()
    plans: list[RefusalPlan] = []
    if not rules or n <= 0:
        return plans
    for i in range(len(rules)):
        if len(plans) >= n:
            break
        rule = rules[(seed + i) % len(rules)]
        anchors = rule.anchors(start)
        if anchors == []:
            continue
        group = _rule_walk(
            domain, graph, rule, anchors, _applies(rule, start), seed + 15485863 + i, taken, guide
        )
        if group:
            taken += [w.signature() for w in group]
            plans.append(RefusalPlan(group, rule, graph.people))
    return plans


def _applies(rule: RefusalRule, start: Session) -> Callable[[Walk], bool]:
    """Whether a candidate walk's write is one the rule forbids, on the task's starting state."""

    def keep(walk: Walk) -> bool:
        return rule.applies(walk.writes[0].arguments, start)

    return keep


def not_covered(
    domain: Domain,
    walks: Sequence[Walk],
    tasks: Sequence[Task],
    asked: int,
    seed: int,
    guide: WalkGuide | None,
) -> list[str]:
    """The write operations in no new task's gold nor the domain's own, each
    ``"<name>: <why>"``: fewer walks asked for than writes, none grounded from it (each
    walk starts with the write that has the fewest so far, so a write left out had its turns and
    found nothing), or its walks' tasks rejected."""
    names = sorted(w.name for w in build_tool_graph(domain, seed=seed, guide=guide).writes())
    in_gold = {a.name for t in [*domain.tasks, *tasks] for a in t.gold_actions}
    walked = {s.name for w in walks for s in w.writes}
    out = []
    for name in names:
        if name in in_gold:
            continue
        if name in walked:
            why = "its walks' tasks were rejected (see their reasons)"
        elif asked < len(names):
            why = f"{asked} write walks were asked for and the domain has {len(names)} writes"
        else:
            why = (
                "no walk from it was grounded (no record its checks accept that a customer "
                "can reach, or each request drawn was made already)"
            )
        out.append(f"{name}: {why}")
    return out


async def synthesize_tasks(
    domain: Domain,
    client: ChatClient,
    *,
    n: int,
    seed: int = 0,
    refusals: int = 0,
    attempts: int = DEFAULT_ATTEMPTS,
    concurrency: int = 4,
    rules: list[RefusalRule] | None = None,
    guide: WalkGuide | None = None,
    exclude: Sequence[str] = (),
    notes: str | None = None,
    asks: int = 0,
    tool_refusals: int = 0,
    tool_rules: list[RefusalRule] | None = None,
) -> TaskSynthesis:
    """Up to ``n`` walk tasks and ``refusals`` refusal tasks for a domain, all ``synthesized``.

    Every task passes the loader's task checks and the conformance yardsticks (gold scores 1,
    doing nothing scores 0, the perturbed or forbidden call scores 0); its ids never collide
    with the domain's own. Works on library domains ("more tasks for them") and generated ones
    (whose agent rules come as ``rules``, and what the blueprint says of the walks as
    ``guide``); ``notes`` (a reviewer's finding on earlier tasks) go into every prompt, and
    ``exclude`` names walk signatures not to take again. Model calls go out with the episode name
    ``synthesis/<domain>/walk-<i>`` or ``.../refusal-<j>`` on the ``codegen`` role, with the
    answer's JSON Schema as ``response_format``. The same seed samples the same walks.
    """
    out = TaskSynthesis()
    walks, plans = plan_walks(
        domain,
        n=n,
        seed=seed,
        refusals=refusals,
        rules=rules,
        guide=guide,
        exclude=exclude,
        asks=asks,
        tool_refusals=tool_refusals,
        tool_rules=tool_rules,
    )
    out.walks = len(walks)
    if len(walks) < n:
        out.rejected.append(("no_walk", f"only {len(walks)} of {n} walks could be grounded"))
    gate = asyncio.Semaphore(concurrency)
    ids = {t.id for t in domain.tasks}
    stamp = datetime.now(UTC).date().isoformat()

    async def one(kind: str, i: int, plan: RefusalPlan) -> Task | None:
        async with gate:
            return await _synthesize_one(domain, client, kind, i, plan, out, attempts, notes)

    writes = [w for w in walks if not w.asks]
    jobs = [one("walk", i, RefusalPlan([w])) for i, w in enumerate(writes)]
    jobs += [one("info", i, RefusalPlan([w])) for i, w in enumerate(w for w in walks if w.asks)]
    start = domain.start_session()
    for j, plan in enumerate(plans):
        if plan.group:
            jobs.append(one("refusal", j, plan))
        else:
            what = (
                f"the rule {plan.rule.rule!r}" if plan.rule else "no write succeeds on live state"
            )
            why = plan.rule.explain(start) if plan.rule and plan.rule.explain else ""
            out.rejected.append(
                ("no_walk", f"refusal {j}: no candidate for {what}" + (f": {why}" if why else ""))
            )
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
    out.not_covered = not_covered(domain, walks, out.tasks, n - min(asks, n), seed, guide)
    return out


_SCENARIO_FORMAT = response_format("scenario", ScenarioDraft)
_REFUSAL_FORMAT = response_format("refusal", RefusalDraft)
_INFO_FORMAT = response_format("information", InfoDraft)


async def _synthesize_one(
    domain: Domain,
    client: ChatClient,
    kind: str,
    index: int,
    plan: RefusalPlan,
    out: TaskSynthesis,
    attempts: int,
    notes: str | None = None,
) -> Task | None:
    episode = f"synthesis/{domain.id}/{kind}-{index}"
    refusal = kind == "refusal"
    group = plan.group
    if refusal:
        prompt = refusal_prompt(
            domain, group, plan.rule.rule if plan.rule else None, notes, refused_state(domain, plan)
        )
        fmt = _REFUSAL_FORMAT
    elif kind == "info":
        prompt, fmt = info_prompt(domain, group[0], notes), _INFO_FORMAT
    else:
        prompt, fmt = walk_prompt(domain, group[0], notes), _SCENARIO_FORMAT
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]

    def parse(text: str | None) -> Task:
        if refusal:
            task = _refusal_task(domain, group, parse_draft(text, RefusalDraft), plan)
            if plan.rule is not None and not plan.rule.enforced and task.description:
                # The rule the refusal was aimed at, in its own words: coverage counts rules
                # by their sentence (a writer's rewording made "0 of 3 rules refused").
                described = task.description.model_copy(
                    update={"relevant_policies": plan.rule.rule}
                )
                task = task.model_copy(update={"description": described})
        elif kind == "info":
            info = parse_draft(text, InfoDraft)
            found = grounding_problems(info.scenario(), group[0].user_values)
            if found:
                raise DraftError("; ".join(found))
            task = _info_task(domain, group[0], info)
        else:
            draft = parse_draft(text, ScenarioDraft)
            found = grounding_problems(draft, group[0].user_values)
            if found:
                raise DraftError("; ".join(found))
            task = _walk_task(domain, group[0], draft)
        # The scenario's own rules, checked here so that a refusal goes back to its writer
        # (checked after the answer, the capable model never saw why its tasks were dropped).
        problems = told_problems(task, group)
        if problems:
            raise DraftError("; ".join(problems))
        return task

    def explain(problem: str, done: Completion) -> str:
        # A small model's answer often stops at its token cap: say so, or it repeats itself.
        capped = done.completion_tokens >= client.settings.max_tokens
        if done.finish_reason == "length" or capped:
            problem += " (it was cut off at the length limit: write less)"
        return problem

    def retry(problem: str, done: Completion) -> str:
        return f"That answer cannot be used: {problem}. Answer again with the JSON object only."

    def count(done: Completion) -> None:
        out.usage.calls += 1
        out.usage.prompt_tokens += done.prompt_tokens
        out.usage.completion_tokens += done.completion_tokens

    try:
        asked = await ask_structured(
            client,
            messages,
            parse,
            response_format=fmt,
            episode=episode,
            attempts=attempts,
            history="all",
            retry=retry,
            explain=explain,
            on_completion=count,
        )
    except ProviderError as exc:
        out.usage.calls += 1
        out.usage.failed_calls += 1
        out.rejected.append(("provider_error", f"{episode}: {exc}"))
        return None
    except _NoForbidden as exc:
        out.rejected.append(("no_forbidden_write", f"{episode}: {exc}"))
        return None
    except StructuredAnswerError as exc:
        out.rejected.append(("malformed_output", f"{episode}: " + "; ".join(exc.problems)))
        return None
    return asked.value


def told_problems(task: Task, group: list[Walk]) -> list[str]:
    """What the customer is told that they cannot know or must not volunteer: a key only the
    desk sees (a branch's BR1002), a known fact given before the agent asks."""
    said = task.user_scenario.instructions
    hidden = tuple(k for w in group for k in w.hidden)
    texts = [said.known_info, said.reason_for_call, said.task_instructions]
    return hidden_key_problems(texts, hidden) + volunteered_known_facts(task)


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
        # The identity lookup the policy asks for first, then the writes.
        for i, s in enumerate(walk.required, start=1)
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
        category="single_write" if len(walk.writes) == 1 else "multi_write",
    )


def _info_task(domain: Domain, walk: Walk, draft: InfoDraft) -> Task:
    """An information request: the reads that answer it (the last one's grounded arguments
    compared), nothing changed, and the facts of its answer the agent must tell."""
    answer = walk.steps[-1].content
    problems = [p for p in map(fact_problem, draft.communicate_info) if p]
    told = " ".join([draft.known_info, draft.reason_for_call, draft.task_instructions])
    for fact in draft.communicate_info:
        if not states_fact(answer, fact):
            problems.append(
                f"communicate_info {fact!r} is not a value of the last answer "
                f"({walk.steps[-1].name}'s): copy the values it shows"
            )
        elif states_fact(told, fact):
            problems.append(
                f"communicate_info {fact!r} is what the customer calls to learn: it cannot be in "
                "known_info, reason_for_call or task_instructions"
            )
    if problems:
        raise DraftError("; ".join(problems))
    task = _walk_task(domain, walk, draft.scenario())
    crit = task.evaluation_criteria
    path = " -> ".join(s.name for s in walk.steps)
    asked = walk.steps[-1]
    # The gold is the identity check: the facts may come from any read that shows them (a
    # careful agent read a dispute's status from the account's list of disputes and scored 0
    # when the gold required get_dispute). Without an identity check, the read is the gold.
    actions = crit.actions[:1] if walk.identified and len(crit.actions) > 1 else crit.actions
    return task.model_copy(
        update={
            "description": TaskDescription(
                purpose=f"Synthesized information request: {path}",
                notes=f"expected state hash {walk.expected_state_hash}; answered by "
                f"{asked.name}({json.dumps(asked.arguments, default=str)})",
            ),
            "evaluation_criteria": crit.model_copy(
                update={
                    "actions": actions,
                    "communicate_info": list(draft.communicate_info),
                    "reward_basis": [
                        RewardType.DB,
                        RewardType.ACTION,
                        RewardType.COMMUNICATE,
                        RewardType.NL_ASSERTION,
                    ],
                }
            ),
            "category": "read",
        }
    )


def answered_by(task: Task) -> Action | None:
    """The read an information request's walk ended in (kept in its notes: the gold is the
    identity check alone), or None."""
    notes = (task.description.notes if task.description else None) or ""
    found = re.search(r"answered by (\w+)\((.*)\)$", notes)
    if task.category != "read" or found is None:
        return None
    return Action(action_id="asked", name=found.group(1), arguments=json.loads(found.group(2)))


def _refusal_task(
    domain: Domain, group: list[Walk], draft: RefusalDraft, plan: RefusalPlan | None = None
) -> Task:
    if draft.candidate is None:
        raise _NoForbidden(f"the model found no forbidden candidate ({draft.rule or 'no rule'})")
    if not 1 <= draft.candidate <= len(group):
        raise DraftError(f"candidate must be 1..{len(group)} or null, not {draft.candidate}")
    phrases = list(draft.communicate_info or [])
    policy = domain.policy.casefold()
    sentences = [p for p in map(fact_problem, phrases) if p]
    if sentences:
        raise DraftError("; ".join(sentences))
    state = refused_state(domain, plan) if plan is not None else None
    seen = state.value.casefold() if state else ""
    needed = [c for c in phrases if _NEEDS.intersection(c.casefold().split())]
    if state is not None and needed:
        raise DraftError(
            f"communicate_info {needed} say the state the rule needs, in the policy's words: "
            f"name the state the record is in instead, {state.value!r} ({state}), as a careful "
            "agent who reads the record does"
        )
    unquoted = [c for c in phrases if not states_fact(policy, c) and not states_fact(seen, c)]
    if unquoted:
        raise DraftError(
            f"communicate_info facts not found in the policy text: {unquoted}; each is a run "
            f"of at most {MAX_FACT_WORDS} words the policy itself says (a long rule's limit "
            "alone: 'within 60 days of the transaction date', not the rule)"
            + "".join(_nearest_rule(domain.policy, c) for c in unquoted)
        )
    if state is not None and not any(states_fact(seen, c) for c in phrases):
        raise DraftError(
            f"communicate_info must name the state the record is in, {state.value!r} ({state}): "
            "a careful agent tells the customer what it sees, not the policy's words for the "
            f"state the rule needs; {phrases} do not say {state.value!r}"
        )
    walk = group[draft.candidate - 1]
    scenario = draft.scenario()
    missing = grounding_problems(scenario, walk.user_values)
    if missing:
        raise DraftError("; ".join(missing))
    step = walk.writes[0]
    if walk.refused:
        return _tool_refusal_task(domain, walk, draft, scenario, phrases, plan)
    return Task(
        id="pending",
        description=TaskDescription(
            purpose=f"{RULE_REFUSAL}{step.name} is forbidden here",
            relevant_policies=draft.rule,
        ),
        user_scenario=_scenario(domain, scenario),
        evaluation_criteria=EvaluationCriteria(
            communicate_info=phrases,
            nl_assertions=scenario.nl_assertions,
            reward_basis=[RewardType.DB, RewardType.COMMUNICATE, RewardType.NL_ASSERTION],
            forbidden_actions=[Action(action_id="f1", name=step.name, arguments=step.arguments)],
        ),
        category="refusal",
    )


def _nearest_rule(policy: str, fact: str) -> str:
    """The policy line sharing most words with a fact it does not state, to copy from."""
    want = set(fact_tokens(fact))
    best, score = "", 0
    for line in policy.splitlines():
        shared = len(want & set(fact_tokens(line)))
        if shared > score:
            best, score = line.strip(), shared
    return f"; the policy says, nearest to {fact!r}: {best[:300]!r}" if best else ""


def is_tool_refusal(task: Task) -> bool:
    """Whether a task is a refusal its tool enforces (:func:`_tool_refusal_task`)."""
    purpose = task.description.purpose if task.description else None
    return task.category == "refusal" and (purpose or "").startswith(TOOL_REFUSAL)


#: How a refusal the tool enforces begins its purpose.
TOOL_REFUSAL = "Synthesized refusal: the tool refuses "
#: How a refusal by agent rule begins its purpose.
RULE_REFUSAL = "Synthesized refusal: "


def refused_operation(task: Task) -> str | None:
    """The operation a synthesized refusal refuses (from its purpose), None for other tasks."""
    purpose = (task.description.purpose if task.description else None) or ""
    if task.category != "refusal" or not purpose.endswith(" here"):
        return None
    if purpose.startswith(TOOL_REFUSAL):
        return purpose[len(TOOL_REFUSAL) : -len(" here")] or None
    if purpose.startswith(RULE_REFUSAL) and purpose.endswith(" is forbidden here"):
        return purpose[len(RULE_REFUSAL) : -len(" is forbidden here")] or None
    return None


def unrefused(rules: list[RefusalRule], kept: Sequence[Task]) -> list[RefusalRule]:
    """The rules whose operation no kept refusal of their kind refuses yet, in their order;
    all of them when every one has been refused (a retry adds refusals of other rules first)."""
    done = {(refused_operation(t), is_tool_refusal(t)) for t in kept if refused_operation(t)}
    fresh = [r for r in rules if (r.operation, r.enforced) not in done]
    return fresh or rules


def _tool_refusal_task(
    domain: Domain,
    walk: Walk,
    draft: RefusalDraft,
    scenario: ScenarioDraft,
    phrases: list[str],
    plan: RefusalPlan | None = None,
) -> Task:
    """A refusal the tool enforces: nothing changes, and the agent says the rule's facts.

    When the refused record is the customer's (a card, a prescription), the identity lookup is
    the gold: the agent must identify them to see it, and may then try the call, which its tool
    refuses. When it is nobody's (a flight leaving within 2 hours, the plan's rule's
    ``decides``), a careful agent may refuse from that record before it identifies anyone, so
    nothing is asked of its calls; the wrong conversation the yardsticks build is then the
    request carried out on another record the tool accepts (another flight), listed as the
    forbidden action."""
    step = walk.writes[0]
    lead = [walk.steps[0]] if walk.identified and walk.steps[0] is not step else []
    forbidden: list[Action] = []
    decides = plan.rule.decides if plan is not None and plan.rule is not None else None
    people = plan.people if plan is not None else None
    nobodys = bool(lead) and _nobodys(domain, step, decides, people)
    instead = _instead(domain, step, decides) if nobodys else None
    if instead is not None:
        lead, forbidden = [], [instead]
    actions = [
        Action(action_id=f"a{i}", name=s.name, arguments=s.arguments, compare_args=list(s.grounded))
        for i, s in enumerate(lead, start=1)
    ]
    basis = [RewardType.DB, RewardType.COMMUNICATE, RewardType.NL_ASSERTION]
    return Task(
        id="pending",
        description=TaskDescription(
            purpose=f"{TOOL_REFUSAL}{step.name} here",
            relevant_policies=draft.rule,
            notes=f"{step.name}({json.dumps(step.arguments, default=str)}) -> {step.content[:300]}",
        ),
        user_scenario=_scenario(domain, scenario),
        evaluation_criteria=EvaluationCriteria(
            actions=actions,
            communicate_info=phrases,
            nl_assertions=scenario.nl_assertions,
            reward_basis=[*basis[:1], RewardType.ACTION, *basis[1:]] if actions else basis,
            forbidden_actions=forbidden,
        ),
        category="refusal",
    )


#: Words of a fact that names the state a rule needs rather than the one a record is in
#: ("not yet activated").
_NEEDS = frozenset({"not", "yet", "never", "unless", "only"})


@dataclass(frozen=True)
class RefusedState:
    """The state a tool refusal's record is in, when its check only asks for a status: a
    card ``CD1032`` whose ``status`` is ``'active'`` when activation needs ``'issued'``."""

    table: str
    key: str
    field: str
    value: str

    def __str__(self) -> str:
        return f"{self.table} {self.key} has {self.field} {self.value!r}"


def refused_state(domain: Domain, plan: RefusalPlan) -> RefusedState | None:
    """What :class:`RefusedState` a tool refusal's one candidate is refused for, or None."""
    rule = plan.rule
    if rule is None or rule.decides is None or rule.state_field is None or len(plan.group) != 1:
        return None
    param, table = rule.decides
    key = plan.group[0].writes[0].arguments.get(param)
    if not isinstance(key, str):
        return None
    value = (domain.start_session().get(table, key) or {}).get(rule.state_field)
    if not isinstance(value, str) or not value.strip():
        return None
    return RefusedState(table, key, rule.state_field, value)


#: Records tried for a tool refusal's "instead" call (:func:`_instead`).
_INSTEAD_TRIES = 200


def _nobodys(
    domain: Domain,
    step: WalkStep,
    decides: tuple[str, str] | None,
    people: frozenset[str] | None = None,
) -> bool:
    """Whether the record the refused call's check reads belongs to no person (of ``people``,
    else the tables with contact fields)."""
    if decides is None or not isinstance(step.arguments.get(decides[0]), str):
        return False
    scope = Scope.of(domain, domain.start_session(), people)
    return not scope.owners(decides[1], step.arguments[decides[0]])


def _instead(domain: Domain, step: WalkStep, decides: tuple[str, str] | None) -> Action | None:
    """The refused call on another record of the deciding table that its tool accepts (and
    that changes the state), or None when none of the first ``_INSTEAD_TRIES`` does."""
    if decides is None:
        return None
    param, table = decides
    start = domain.start_session()
    before = start.state_hash()
    for key in sorted(start.keys(table))[:_INSTEAD_TRIES]:
        if key == step.arguments.get(param):
            continue
        args = {**step.arguments, param: key}
        trial = start.fork()
        if domain.toolkit.call(trial, step.name, args).ok and trial.state_hash() != before:
            return Action(
                action_id="f1", name=step.name, arguments=args, compare_args=list(step.grounded)
            )
    return None


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
    prefix = {"refusal": "r", "read": "q"}.get(task.category or "", "w")
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


def task_signature(domain: Domain, task: Task) -> str:
    """The signature a walk of this task's gold writes would have (see Walk.signature)."""
    specs = domain.toolkit.specs
    writes = [a for a in task.gold_actions if a.name in specs and specs[a.name].kind == "write"]
    if not writes and task.category == "read" and task.gold_actions:
        writes = task.gold_actions[-1:]  # an information request: the read it asks for
    return json.dumps([[a.name, a.compared()] for a in writes], sort_keys=True, default=str)


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
