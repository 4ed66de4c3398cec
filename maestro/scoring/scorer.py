"""The composite scorer: reward = product over a task's ``reward_basis`` (MAESTRO's triple).

Deterministic criteria (DB, ACTION, COMMUNICATE) are scored synchronously; NL assertions need
a judge, injected by the caller. Without one they stay ``pending``, never a free pass.
"""

from __future__ import annotations

from maestro.conversation import Trajectory
from maestro.domains.models import RewardType, Task
from maestro.domains.package import Domain, ReplayResult
from maestro.scoring.card import CheckItem, CriterionScore, ScoreCard
from maestro.scoring.criteria import (
    Check,
    ScoringContext,
    action_check,
    communicate_check,
    db_check,
)
from maestro.scoring.judge import Judge, JudgeError

DETERMINISTIC: dict[RewardType, Check] = {
    RewardType.DB: db_check(),
    RewardType.ACTION: action_check(),
    RewardType.COMMUNICATE: communicate_check(),
}


class Scorer:
    """Scores trajectories of one domain's tasks."""

    def __init__(self, domain: Domain, judge: Judge | None = None) -> None:
        self.domain = domain
        self.judge = judge

    def context(
        self, task: Task, trajectory: Trajectory, gold: ReplayResult | None = None
    ) -> ScoringContext:
        if trajectory.task_id != task.id:
            raise ValueError(f"trajectory is of task {trajectory.task_id!r}, not {task.id!r}")
        return ScoringContext(self.domain, task, trajectory, _gold=gold)

    def score(
        self, task: Task, trajectory: Trajectory, gold: ReplayResult | None = None
    ) -> ScoreCard:
        """The deterministic criteria; NL assertions are left ``pending``."""
        ctx = self.context(task, trajectory, gold)
        criteria: dict[str, CriterionScore] = {}
        for c in task.evaluation_criteria.reward_basis:
            if c in DETERMINISTIC:
                criteria[c.value] = DETERMINISTIC[c](ctx)
            else:
                criteria[c.value] = CriterionScore(
                    criterion=c,
                    status="pending",
                    reward=None,
                    details="not yet judged",
                    items=[
                        CheckItem(subject=a, passed=None)
                        for a in task.evaluation_criteria.nl_assertions
                    ],
                )
        return combine(task, criteria)

    async def ascore(
        self, task: Task, trajectory: Trajectory, gold: ReplayResult | None = None
    ) -> ScoreCard:
        """Every criterion, NL assertions judged by the injected judge."""
        card = self.score(task, trajectory, gold)
        key = RewardType.NL_ASSERTION.value
        if key not in card.criteria:
            return card
        if self.judge is None:
            raise JudgeError("this scorer has no judge: NL assertions cannot be judged")
        criteria = dict(card.criteria)
        criteria[key] = await judge_assertions(self.judge, task, trajectory)
        return combine(task, criteria)


async def judge_assertions(judge: Judge, task: Task, trajectory: Trajectory) -> CriterionScore:
    """The NL_ASSERTION criterion; a judge failure is recorded as ``error``, not pass or fail."""
    assertions = task.evaluation_criteria.nl_assertions
    try:
        verdicts = await judge.judge(task, trajectory, assertions)
        if [v.assertion for v in verdicts] != list(assertions):
            raise JudgeError(
                "the judge's verdicts do not answer the assertions one by one, in order"
            )
    except JudgeError as exc:
        return CriterionScore(
            criterion=RewardType.NL_ASSERTION,
            status="error",
            reward=None,
            details=f"judge error: {exc}",
            items=[CheckItem(subject=a, passed=None) for a in assertions],
        )
    items = [CheckItem(subject=v.assertion, passed=v.met, reason=v.reason) for v in verdicts]
    ok = all(v.met for v in verdicts)
    return CriterionScore(
        criterion=RewardType.NL_ASSERTION,
        status="pass" if ok else "fail",
        reward=1.0 if ok else 0.0,
        details="all assertions met"
        if ok
        else "not met: " + "; ".join(v.assertion for v in verdicts if not v.met),
        items=items,
    )


def combine(task: Task, criteria: dict[str, CriterionScore]) -> ScoreCard:
    """The card: product of the rewards that have a verdict; the rest listed as pending/error."""
    reward = 1.0
    pending, errors = [], []
    for c in task.evaluation_criteria.reward_basis:
        score = criteria[c.value]
        if score.status == "pending":
            pending.append(c)
        elif score.status == "error":
            errors.append(c)
        else:
            assert score.reward is not None
            reward *= score.reward
    return ScoreCard(
        task_id=task.id,
        reward_basis=list(task.evaluation_criteria.reward_basis),
        criteria=criteria,
        reward=reward,
        pending=pending,
        errors=errors,
    )
