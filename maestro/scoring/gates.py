"""The quality gates a task passes before it joins a task set (MAESTRO's filter), as pure
functions: the verdict and its reasons, the difficulty band, near-duplicate removal, the funnel.

Gates, in the order a task meets them (the first one failed is where it is rejected):

1. ``gold_replay``: every gold action succeeds on a fresh session (``ReplayResult.ok``);
2. ``gold_deterministic``: replaying the gold actions twice gives the same state hash and answers;
3. ``gold_scores_one``: the gold conversation scores 1;
4. ``paraphrased_scores_one``: the gold conversation with every uncompared string argument
   paraphrased still scores 1 (what a task does not compare is free text);
5. ``null_scores_zero``: the do-nothing conversation scores 0;
6. ``perturbed_scores_zero``: one changed gold argument (or, for a refusal, the forbidden write)
   scores 0;
7. ``simulated``: at least one episode was scored;
8. ``review``: a task no episode solved is reviewed by an LLM on its failed transcripts; a
   ``task_defect`` verdict whose evidence checks out rejects it (any other cause keeps it;
   ``unsure``, a verdict without checkable evidence, keeps it flagged);
9. ``near_duplicate``: not a near duplicate of a task kept before it.

Every input is a typed value from the check that found it (``ReplayResult.ok``, the conformance
check's rewards, the review's cause), never a search through error text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, get_args

from maestro.domains.models import Task
from maestro.domains.package import ReplayResult

GATES: tuple[str, ...] = (
    "gold_replay",
    "gold_deterministic",
    "gold_scores_one",
    "paraphrased_scores_one",
    "null_scores_zero",
    "perturbed_scores_zero",
    "simulated",
    "review",
    "near_duplicate",
)

GATE_LABELS: dict[str, str] = {
    "gold_replay": "gold replay succeeds",
    "gold_deterministic": "gold replay is deterministic",
    "gold_scores_one": "gold scores 1",
    "paraphrased_scores_one": "gold with free text reworded scores 1",
    "null_scores_zero": "doing nothing scores 0",
    "perturbed_scores_zero": "a perturbed call scores 0",
    "simulated": "simulated and scored",
    "review": "not a task defect (review)",
    "near_duplicate": "not a near duplicate",
}

#: Scenario texts (ids and numbers masked) this similar are one template: duplicates whatever the
#: gold calls. Hand-written tasks of one domain stay far below it (the library's highest pair is
#: under 0.6); copies that differ only in an id or an amount sit at 1.0.
TEXT_THRESHOLD = 0.85
#: Tasks whose gold calls, and arguments, are the same are one exercise once their wording
#: shares this much too.
SAME_ACTIONS_TEXT_THRESHOLD = 0.5

#: What the review of an unsolved task concluded: the three causes a reviewer may give (with
#: evidence that checks out), ``unsure`` (a verdict whose evidence did not check out), and the
#: two outcomes without a verdict: the review failed, or there was no endpoint to ask.
ReviewCause = Literal[
    "task_defect",
    "user_simulator_error",
    "assistant_failure",
    "unsure",
    "review_failed",
    "not_reviewed",
]
REVIEW_CAUSES: tuple[ReviewCause, ...] = get_args(ReviewCause)
#: Causes a re-run keeps instead of asking again: every review that reached a conclusion.
REVIEWED: tuple[ReviewCause, ...] = (
    "task_defect",
    "user_simulator_error",
    "assistant_failure",
    "unsure",
)


@dataclass(frozen=True)
class GateInputs:
    """What the filter found out about one task."""

    task_id: str
    gold_replay_ok: bool
    gold_deterministic: bool
    gold_scores_one: bool
    null_scores_zero: bool
    perturbed_scores_zero: bool
    trials: int
    successes: int
    paraphrased_scores_one: bool = True
    review_cause: ReviewCause | None = None
    review_reason: str | None = None
    duplicate_of: str | None = None
    #: Details behind a failed check (from the conformance check), kept in the reasons.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateVerdict:
    task_id: str
    accepted: bool
    rejected_at: str | None
    pass_rate: float
    difficulty_band: str
    reasons: list[str] = field(default_factory=list)
    #: Kept, but a person should look: the review blamed something it could not show.
    flagged: bool = False


def difficulty_band(pass_rate: float) -> str:
    """easy (>= 0.8), medium (>= 0.4), hard (> 0) or unsolved, from the pass rate over trials."""
    if pass_rate >= 0.8:
        return "easy"
    if pass_rate >= 0.4:
        return "medium"
    if pass_rate > 0:
        return "hard"
    return "unsolved"


def replay_deterministic(first: ReplayResult, second: ReplayResult) -> bool:
    """Two replays of the same calls ended in the same state with the same answers."""
    return first.session.state_hash() == second.session.state_hash() and [
        (o.status, o.content) for o in first.outcomes
    ] == [(o.status, o.content) for o in second.outcomes]


def _passed(g: GateInputs) -> dict[str, bool]:
    return {
        "gold_replay": g.gold_replay_ok,
        "gold_deterministic": g.gold_deterministic,
        "gold_scores_one": g.gold_scores_one,
        "paraphrased_scores_one": g.paraphrased_scores_one,
        "null_scores_zero": g.null_scores_zero,
        "perturbed_scores_zero": g.perturbed_scores_zero,
        "simulated": g.trials > 0,
        "review": g.review_cause != "task_defect",
        "near_duplicate": g.duplicate_of is None,
    }


def verdict(g: GateInputs) -> GateVerdict:
    """The task's verdict: accepted, or the first gate it fails, with every reason found."""
    passed = _passed(g)
    rate = g.successes / g.trials if g.trials else 0.0
    reasons = list(g.problems)
    if not g.gold_deterministic:
        reasons.append("gold replay is not deterministic: two replays differ")
    if g.trials == 0:
        reasons.append("no scored episode")
    if g.review_cause is not None:
        reasons.append(f"review: {g.review_cause}: {g.review_reason or ''}".rstrip(": "))
    if g.duplicate_of is not None:
        reasons.append(f"near duplicate of {g.duplicate_of}")
    rejected_at = next((gate for gate in GATES if not passed[gate]), None)
    return GateVerdict(
        g.task_id,
        rejected_at is None,
        rejected_at,
        rate,
        difficulty_band(rate),
        reasons,
        flagged=g.review_cause == "unsure",
    )


def funnel(rejected_at: Sequence[str | None]) -> list[dict[str, Any]]:
    """Tasks in scope, then how many pass each gate (and every gate before it), then accepted.

    ``rejected_at`` holds each task's first failed gate, None when accepted; so the counts only
    fall, and in scope minus the rejections at every gate is the accepted count.
    """
    unknown = sorted({r for r in rejected_at if r is not None and r not in GATES})
    if unknown:
        raise ValueError(f"unknown gate(s) {unknown}; gates are {list(GATES)}")
    rows: list[dict[str, Any]] = [{"stage": "tasks in scope", "tasks": len(rejected_at)}]
    left = len(rejected_at)
    for gate in GATES:
        left -= sum(1 for r in rejected_at if r == gate)
        rows.append({"stage": GATE_LABELS[gate], "tasks": left})
    rows.append({"stage": "accepted", "tasks": left})
    return rows


# ----- near duplicates ---------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


def scenario_shingles(task: Task) -> frozenset[str]:
    """Word pairs of the scenario's text, lower-cased, with every token holding a digit masked."""
    ins = task.user_scenario.instructions
    text = " ".join(
        x or ""
        for x in (ins.reason_for_call, ins.known_info, ins.unknown_info, ins.task_instructions)
    ).casefold()
    words = ["#" if any(c.isdigit() for c in w) else w for w in _WORD.findall(text)]
    if len(words) < 2:
        return frozenset(words)
    return frozenset(f"{a} {b}" for a, b in pairwise(words))


def action_signature(task: Task) -> frozenset[str]:
    """The gold calls with their compared arguments, and the forbidden calls."""
    crit = task.evaluation_criteria
    sig = {f"do {a.name} {sorted(a.compared().items())!r}" for a in task.gold_actions}
    sig |= {f"not {a.name} {sorted(a.arguments.items())!r}" for a in crit.forbidden_actions}
    return frozenset(sig)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def near_duplicates(tasks: Sequence[Task]) -> dict[str, tuple[str, float]]:
    """For each task that nearly duplicates an earlier kept one: (that task's id, text similarity).

    The first of a group is kept, so the order of ``tasks`` decides which one stays. Pairwise and
    exact: a night's tasks per domain number in the hundreds.
    """
    kept: list[tuple[Task, frozenset[str], frozenset[str]]] = []
    out: dict[str, tuple[str, float]] = {}
    for task in tasks:
        text, sig = scenario_shingles(task), action_signature(task)
        twin = None
        for other, o_text, o_sig in kept:
            sim = jaccard(text, o_text)
            same_calls = bool(sig) and sig == o_sig
            if sim >= TEXT_THRESHOLD or (same_calls and sim >= SAME_ACTIONS_TEXT_THRESHOLD):
                twin = (other.id, round(sim, 3))
                break
        if twin is None:
            kept.append((task, text, sig))
        else:
            out[task.id] = twin
    return out
