"""The four yardstick checks every task must pass, on the deterministic criteria alone.

gold conversation → reward 1; the gold conversation with every uncompared string argument
paraphrased → 1 (what a task does not compare is free text, and free text decides nothing);
do-nothing conversation → 0; one gold argument changed (or, for refusals, the forbidden write
performed) → 0. NL assertions are reported as not yet judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from maestro.domains.errors import Problem
from maestro.domains.models import RewardType, Task
from maestro.domains.package import Domain, TaskStateError, describe_failures, replay_gold
from maestro.domains.runtime import calls_end_within, calls_ended
from maestro.scoring.card import ScoreCard
from maestro.scoring.scenario import volunteered_known_facts
from maestro.scoring.scorer import Scorer
from maestro.simulation.scripted import (
    gold_trajectory,
    null_trajectory,
    paraphrased_trajectory,
    perturbed_trajectory,
)


@dataclass
class TaskCheck:
    """The four checks of one task, and whether its gold actions replay at all."""

    task_id: str
    category: str | None
    #: Every gold action succeeded on a fresh session (``ReplayResult.ok``); False too when the
    #: task's initial state cannot be built.
    gold_replay_ok: bool = False
    gold_reward: float | None = None
    #: The gold conversation with its uncompared string arguments paraphrased (the gold
    #: conversation itself when there are none).
    paraphrased_reward: float | None = None
    null_reward: float | None = None
    perturbed_reward: float | None = None
    nl_pending: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def gold_pass(self) -> bool:
        return self.gold_reward == 1.0

    @property
    def paraphrased_pass(self) -> bool:
        return self.paraphrased_reward == 1.0

    @property
    def null_fail(self) -> bool:
        return self.null_reward == 0.0

    @property
    def perturbed_fail(self) -> bool:
        return self.perturbed_reward == 0.0

    @property
    def ok(self) -> bool:
        return (
            self.gold_replay_ok
            and self.gold_pass
            and self.paraphrased_pass
            and self.null_fail
            and self.perturbed_fail
            and not self.problems
        )


@dataclass
class DomainCheck:
    domain_id: str
    tasks: list[TaskCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Each law of the domain checked on its database (``LawCheck.report``).
    laws: list[dict[str, Any]] = field(default_factory=list)
    #: What the tasks cover (:func:`coverage`).
    coverage: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "domain": self.domain_id,
            "tasks": len(self.tasks),
            "laws": len(self.laws),
            "law_violations": sum(law["broken"] + len(law["errors"]) for law in self.laws),
            "gold_pass": sum(t.gold_pass for t in self.tasks),
            "paraphrased_pass": sum(t.paraphrased_pass for t in self.tasks),
            "null_fail": sum(t.null_fail for t in self.tasks),
            "perturbed_fail": sum(t.perturbed_fail for t in self.tasks),
            "nl_not_judged": sum(t.nl_pending for t in self.tasks),
            "coverage": self.coverage,
            "problems": [str(p) for p in self.problems]
            + [f"task {t.task_id}: {msg}" for t in self.tasks for msg in t.problems],
        }


def _why(card: ScoreCard) -> str:
    return (
        "; ".join(f"{c.criterion.value}: {c.details.splitlines()[0]}" for c in card.failures())
        or "passed"
    )


#: Seconds every tool call of one task's checks may take together (six replays of its gold
#: or less), and of one domain's: replays of package code are bounded as a whole, not only per
#: call (``domains validate --deadline-s``, ``--task-deadline-s``).
TASK_CHECK_S = 300.0
DOMAIN_CHECK_S = 1800.0


def check_task(
    domain: Domain,
    task: Task,
    scorer: Scorer | None = None,
    *,
    deadline_s: float = TASK_CHECK_S,
) -> TaskCheck:
    """Score the gold, paraphrased, do-nothing and perturbed conversations of one task, and
    check its scenario against the user simulator's rules; its tool calls together end within
    ``deadline_s`` (a call past it is not run, and the task's checks fail saying so)."""
    with calls_end_within(deadline_s):
        result = _check_task(domain, task, scorer or Scorer(domain))
        if calls_ended():
            result.problems.append(
                f"its checks ran out of time: their tool calls may take {deadline_s:g} s in all"
                " (a tool that runs until its deadline on every call?)"
            )
    return result


def _check_task(domain: Domain, task: Task, scorer: Scorer) -> TaskCheck:
    result = TaskCheck(task.id, task.category)
    result.problems += [f"user scenario: {p}" for p in volunteered_known_facts(task)]
    try:
        gold = replay_gold(domain, task)
        gold_card = scorer.score(task, gold_trajectory(domain, task), gold)
        paraphrased = paraphrased_trajectory(domain, task)
        paraphrased_card = (
            gold_card if paraphrased is None else scorer.score(task, paraphrased, gold)
        )
        null_card = scorer.score(task, null_trajectory(domain, task), gold)
        writes = {n for n, s in domain.toolkit.specs.items() if s.kind == "write"}
        perturbed = perturbed_trajectory(domain, task, writes)
    except TaskStateError as exc:
        result.problems.append(str(exc))
        return result
    result.gold_replay_ok = gold.ok
    result.problems += describe_failures(task.gold_actions, gold)
    result.gold_reward = gold_card.reward
    result.paraphrased_reward = paraphrased_card.reward
    result.null_reward = null_card.reward
    result.nl_pending = RewardType.NL_ASSERTION in gold_card.pending
    if not result.gold_pass:
        result.problems.append(
            f"gold conversation scores {gold_card.reward:g}, not 1 ({_why(gold_card)})"
        )
    elif not result.paraphrased_pass:
        result.problems.append(
            f"gold conversation with its uncompared text reworded scores "
            f"{paraphrased_card.reward:g}, not 1 ({_why(paraphrased_card)}): an argument "
            "compare_args leaves out must be free text; compare it if it matters"
        )
    if not result.null_fail:
        result.problems.append(
            "do-nothing conversation scores 1: no deterministic criterion catches it"
        )
    if perturbed is None:
        result.problems.append(
            "no perturbed conversation can be built (no gold action with arguments, no forbidden action)"
        )
    else:
        perturbed_card = scorer.score(task, perturbed, gold)
        result.perturbed_reward = perturbed_card.reward
        if not result.perturbed_fail:
            result.problems.append(
                "performing the forbidden action scores 1: it changes nothing the DB check sees"
                " (does a tool already refuse it?)"
                if not task.gold_actions
                else "perturbed conversation scores 1: changing a gold argument goes unnoticed"
            )
    return result


def check_domain(
    domain: Domain,
    load_problems: list[Problem] | None = None,
    *,
    deadline_s: float = DOMAIN_CHECK_S,
    task_deadline_s: float = TASK_CHECK_S,
) -> DomainCheck:
    """The four checks for every task of a loaded domain, their tool calls ending within
    ``deadline_s`` in all (each task's within ``task_deadline_s``); a task not reached in
    time is reported unchecked."""
    scorer = Scorer(domain)
    out = DomainCheck(domain.id, problems=list(load_problems or []))
    with calls_end_within(deadline_s):
        for i, task in enumerate(domain.tasks):
            if calls_ended():
                left = len(domain.tasks) - i
                out.problems.append(
                    Problem(
                        domain.id,
                        "",
                        f"its checks ran out of time ({deadline_s:g} s for all tool calls): "
                        f"{left} of {len(domain.tasks)} task(s) not checked, from {task.id} on",
                    )
                )
                out.tasks += [TaskCheck(t.id, t.category) for t in domain.tasks[i:]]
                break
            out.tasks.append(check_task(domain, task, scorer, deadline_s=task_deadline_s))
    out.laws = domain.check_laws().report()
    out.coverage = coverage(domain)
    return out


def coverage(domain: Domain) -> dict[str, Any]:
    """What a domain's tasks cover (:func:`tasks_coverage` over its tools)."""
    return tasks_coverage(domain.toolkit.specs, domain.tasks)


def tasks_coverage(tool_names: Iterable[str], tasks: Sequence[Task]) -> dict[str, Any]:
    """What tasks cover: each tool in some task's gold actions (or not), the tools some
    refusal forbids, the tasks by kind, and the refusals by the rule they name."""
    tools = sorted(tool_names)
    in_gold = {a.name for t in tasks for a in t.gold_actions}
    refused = {a.name for t in tasks for a in t.evaluation_criteria.forbidden_actions}
    kinds = Counter(t.category or "uncategorised" for t in tasks)
    rules = Counter(
        ((t.description.relevant_policies if t.description else None) or "(no rule named)")
        for t in tasks
        if t.category == "refusal"
    )
    return {
        "tools": len(tools),
        "tools_in_gold": sum(name in in_gold for name in tools),
        "tools_never_in_gold": [name for name in tools if name not in in_gold],
        "tools_refused": sorted(refused),
        "task_kinds": dict(sorted(kinds.items())),
        "refusals_by_rule": dict(rules.most_common()),
    }
