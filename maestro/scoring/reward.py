"""The shaped RL reward: the triple metric times PROVE's adaptive efficiency penalty.

The call budget scales with the gold path: ``ceil(budget_scale * gold_calls) + budget_slack``.
Every tool call beyond it costs ``penalty / budget`` of the reward, so an extra call matters
less on a long task than on a short one. The penalty only ever multiplies the task reward by a
factor in [0, 1]: the reward never goes below 0 and a failed episode (reward 0) stays 0.

A card with a criterion still pending or in error has no reward (``None``): TRL treats that as
"no reward from this function" instead of a silent 0.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from maestro.conversation import Trajectory
from maestro.domains.models import Task
from maestro.scoring.card import ScoreCard


class EfficiencyPenalty(BaseModel):
    """How many calls a task may take before each further call lowers the reward."""

    #: Budget = ceil(budget_scale * gold calls) + budget_slack.
    budget_scale: float = Field(1.5, ge=1.0)
    budget_slack: int = Field(2, ge=0)
    #: Fraction of the reward lost when the calls over budget equal the budget itself.
    penalty: float = Field(1.0, ge=0.0)


class ShapedReward(BaseModel):
    """One episode's reward and how it was reached."""

    task_reward: float | None
    calls: int
    budget: int
    over_budget: int
    efficiency: float
    reward: float | None


def call_budget(gold_calls: int, penalty: EfficiencyPenalty) -> int:
    """The calls a task may take free of penalty; at least one."""
    return max(1, math.ceil(penalty.budget_scale * gold_calls) + penalty.budget_slack)


def efficiency_factor(calls: int, gold_calls: int, penalty: EfficiencyPenalty) -> float:
    """A factor in [0, 1]: 1 within budget, falling linearly with each call over it."""
    budget = call_budget(gold_calls, penalty)
    over = max(0, calls - budget)
    return max(0.0, 1.0 - penalty.penalty * over / budget)


def shaped_reward(
    card: ScoreCard, calls: int, gold_calls: int, penalty: EfficiencyPenalty | None = None
) -> ShapedReward:
    """The card's reward times the efficiency factor; ``None`` when the card is incomplete."""
    penalty = penalty or EfficiencyPenalty()
    if calls < 0 or gold_calls < 0:
        raise ValueError(f"call counts must be >= 0, got calls={calls}, gold_calls={gold_calls}")
    budget = call_budget(gold_calls, penalty)
    factor = efficiency_factor(calls, gold_calls, penalty)
    task_reward = card.reward if card.complete else None
    return ShapedReward(
        task_reward=task_reward,
        calls=calls,
        budget=budget,
        over_budget=max(0, calls - budget),
        efficiency=factor,
        reward=None if task_reward is None else task_reward * factor,
    )


def trajectory_reward(
    task: Task, trajectory: Trajectory, card: ScoreCard, penalty: EfficiencyPenalty | None = None
) -> ShapedReward:
    """The shaped reward of a scored trajectory: its calls against the task's gold path."""
    if card.task_id != task.id or trajectory.task_id != task.id:
        raise ValueError(
            f"card ({card.task_id!r}) and trajectory ({trajectory.task_id!r}) "
            f"must both be of task {task.id!r}"
        )
    return shaped_reward(card, len(trajectory.assistant_calls()), len(task.gold_actions), penalty)
