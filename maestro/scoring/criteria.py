"""The criteria of the triple metric, each a small factory returning a check.

A check takes a :class:`ScoringContext` (the task, the trajectory, and the replays of the gold
actions and of the trajectory's calls) and returns a :class:`CriterionScore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from maestro.conversation import ToolCall, Trajectory
from maestro.domains.facts import (
    DETERMINERS,
    MAX_FACTS,
    UNORDERED_WORDS,
    fact_tokens,
    states_tokens,
)
from maestro.domains.models import RewardType, Task
from maestro.domains.package import Domain, ReplayResult, replay_calls, replay_gold
from maestro.domains.store import compare_sessions
from maestro.scoring.card import CheckItem, CriterionScore
from maestro.scoring.matching import match_actions, matches


@dataclass
class ScoringContext:
    """What the checks share; the replays are computed once, on first use."""

    domain: Domain
    task: Task
    trajectory: Trajectory
    _gold: ReplayResult | None = None
    _predicted: ReplayResult | None = field(default=None, repr=False)
    _expected: ReplayResult | None = field(default=None, repr=False)

    @property
    def gold(self) -> ReplayResult:
        if self._gold is None:
            self._gold = replay_gold(self.domain, self.task)
        return self._gold

    @property
    def predicted(self) -> ReplayResult:
        """The trajectory's assistant calls replayed on a fresh session of the task."""
        if self._predicted is None:
            calls = [(c.name, c.arguments) for c in self.trajectory.assistant_calls()]
            self._predicted = replay_calls(self.domain, self.task, calls)
        return self._predicted

    def successful_calls(self) -> list[ToolCall]:
        calls = self.trajectory.assistant_calls()
        return [c for c, out in zip(calls, self.predicted.outcomes, strict=True) if out.ok]

    @property
    def expected(self) -> ReplayResult:
        """The state the DB check compares with: the gold actions replayed, each with the
        arguments its ``compare_args`` leaves out taken from the successful call matched to it.

        What the task does not compare cannot decide the DB check: a cancellation reason the
        agent wrote in the guest's own words is stored as written, in both states. Arguments
        the gold action does not list at all keep their defaults, so an unrequested option the
        agent added still shows as a difference.
        """
        if self._expected is None:
            adapted = own_words(self.task, self.successful_calls())
            same = all(
                a.arguments == args
                for a, (_, args) in zip(self.task.gold_actions, adapted, strict=True)
            )
            self._expected = self.gold if same else replay_calls(self.domain, self.task, adapted)
        return self._expected


def own_words(task: Task, calls: Sequence[ToolCall]) -> list[tuple[str, dict[str, Any]]]:
    """Each gold action as (name, arguments), the arguments it does not compare taken from the
    call matched to it (left out where that call omits them); unmatched actions as written."""
    gold = task.gold_actions
    assigned = match_actions(gold, calls, task.evaluation_criteria.ordered_actions)
    out: list[tuple[str, dict[str, Any]]] = []
    for action, j in zip(gold, assigned, strict=True):
        args = dict(action.arguments)
        got = calls[j].arguments if j is not None else None
        if isinstance(got, dict):
            compared = action.compared()
            for name in action.arguments:
                if name in compared:
                    continue
                if name in got:
                    args[name] = got[name]
                else:
                    del args[name]
        out.append((action.name, args))
    return out


Check = Callable[[ScoringContext], CriterionScore]


def db_check() -> Check:
    """The final state equals the expected state (the gold replay, uncompared arguments in the
    agent's own words: see :attr:`ScoringContext.expected`); when not, a readable diff."""

    def check(ctx: ScoringContext) -> CriterionScore:
        gold, got = ctx.expected.session, ctx.predicted.session
        if gold.state_hash() == got.state_hash():
            return CriterionScore(
                criterion=RewardType.DB, status="pass", reward=1.0, details="final state matches"
            )
        diff = compare_sessions(gold, got)
        return CriterionScore(
            criterion=RewardType.DB,
            status="fail",
            reward=0.0,
            details=f"final state differs from the expected state in {len(diff)} record(s):\n"
            + diff.render("expected", "got"),
        )

    return check


def action_check() -> Check:
    """Every gold action matched by a successful call; no forbidden action performed."""

    def check(ctx: ScoringContext) -> CriterionScore:
        crit = ctx.task.evaluation_criteria
        calls = ctx.successful_calls()
        gold = ctx.task.gold_actions
        assigned = match_actions(gold, calls, crit.ordered_actions)
        items = [
            CheckItem(
                subject=f"{a.action_id} {a.name}({a.compared()})",
                passed=j is not None,
                reason="matched" if j is not None else "no successful call with these arguments",
            )
            for a, j in zip(gold, assigned, strict=True)
        ]
        for f in crit.forbidden_actions:
            done = any(matches(f, c) for c in calls)
            items.append(
                CheckItem(
                    subject=f"forbidden {f.action_id} {f.name}({f.compared()})",
                    passed=not done,
                    reason="performed" if done else "not performed",
                )
            )
        ok = all(i.passed for i in items)
        missing = [i.subject for i in items if not i.passed]
        return CriterionScore(
            criterion=RewardType.ACTION,
            status="pass" if ok else "fail",
            reward=1.0 if ok else 0.0,
            details="all actions matched" if ok else "unmatched: " + "; ".join(missing),
            items=items,
        )

    return check


def communicate_check() -> Check:
    """Every ``communicate_info`` fact is stated in some assistant message (tau2's rule, with
    case, punctuation and number formatting set aside: :func:`maestro.domains.facts.states_fact`)."""

    def check(ctx: ScoringContext) -> CriterionScore:
        infos = ctx.task.evaluation_criteria.communicate_info
        stated = stated_facts(ctx.trajectory.assistant_texts(), infos)
        items = [
            CheckItem(subject=info, passed=hit, reason="said" if hit else "never said")
            for info, hit in zip(infos, stated, strict=True)
        ]
        ok = all(i.passed for i in items)
        return CriterionScore(
            criterion=RewardType.COMMUNICATE,
            status="pass" if ok else "fail",
            reward=1.0 if ok else 0.0,
            details="all information communicated"
            if ok
            else "not communicated: " + "; ".join(i.subject for i in items if not i.passed),
            items=items,
        )

    return check


def _canon(token: str) -> str:
    # One determiner stands for another inside a fact (facts.py's rule).
    return "\x00" if token in DETERMINERS else token


def stated_facts(texts: Sequence[str], facts: Sequence[str]) -> list[bool]:
    """For each fact, whether some text states it: :func:`maestro.domains.facts.states_fact`
    on every (text, fact) pair, at the cost of one pass over each text per distinct fact
    length (50k facts slid one by one over every message took 23 s: issue 23)."""
    wanted: list[tuple[str, ...]] = []
    in_order: dict[int, set[tuple[str, ...]]] = {}
    any_order: dict[int, set[tuple[str, ...]]] = {}
    for fact in facts:
        tokens = fact_tokens(fact)
        want = tuple(map(_canon, tokens))
        wanted.append(want)
        if not want:
            continue
        in_order.setdefault(len(want), set()).add(want)
        if 2 <= len(want) <= UNORDERED_WORDS and not any(c.isdigit() for w in tokens for c in w):
            any_order.setdefault(len(want), set()).add(tuple(sorted(want)))
    found: set[tuple[str, ...]] = set()
    found_bags: set[tuple[str, ...]] = set()
    tokenized = [fact_tokens(text) for text in texts]
    for tokens in tokenized:
        have = [_canon(t) for t in tokens]
        for n, grams in in_order.items():
            found.update(
                g for i in range(len(have) - n + 1) if (g := tuple(have[i : i + n])) in grams
            )
        for n, bags in any_order.items():
            found_bags.update(
                b for i in range(len(have) - n + 1) if (b := tuple(sorted(have[i : i + n]))) in bags
            )
    # What the exact n-grams miss is read with every rule of states_fact (connectors before a
    # number, a plural, a count of times), for the first MAX_FACTS such facts: a loaded task
    # has no more, and a hand-built one of 50k facts stays one pass per fact length.
    out = []
    slow = MAX_FACTS
    for fact, want in zip(facts, wanted, strict=True):
        hit = bool(want) and (want in found or tuple(sorted(want)) in found_bags)
        if want and not hit and slow > 0:
            slow -= 1
            hit = any(states_tokens(tokens, fact) for tokens in tokenized)
        out.append(hit)
    return out
