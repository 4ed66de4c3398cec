"""The shaped reward on hand-made trajectories of the toy domain, scored by the real scorer."""

from __future__ import annotations

import pytest

from maestro.domains import Domain
from maestro.scoring import Scorer
from maestro.scoring.reward import (
    EfficiencyPenalty,
    call_budget,
    shaped_reward,
    trajectory_reward,
)
from maestro.simulation.scripted import calls_trajectory, gold_trajectory, null_trajectory


def test_budget_scales_with_the_gold_path() -> None:
    p = EfficiencyPenalty(budget_scale=1.5, budget_slack=2)
    assert call_budget(0, p) == 2
    assert call_budget(1, p) == 4
    assert call_budget(4, p) == 8
    assert call_budget(0, EfficiencyPenalty(budget_slack=0)) == 1


def test_gold_path_within_budget_scores_one(toy: Domain) -> None:
    task = toy.task("toy_status")
    traj = gold_trajectory(toy, task)
    r = trajectory_reward(task, traj, Scorer(toy).score(task, traj))
    assert (r.task_reward, r.efficiency, r.reward, r.calls, r.budget) == (1.0, 1.0, 1.0, 1, 4)


def test_calls_over_budget_lower_the_reward_and_never_below_zero(toy: Domain) -> None:
    task = toy.task("toy_status")
    scorer = Scorer(toy)
    gold = ("get_order", {"order_id": "O2"})
    rewards = []
    for extra in (3, 4, 5, 6, 12):
        traj = calls_trajectory(toy, task, [gold] * (1 + extra), "It is shipped.")
        card = scorer.score(task, traj)
        assert card.reward == 1.0  # the task itself is solved: only efficiency differs
        rewards.append(trajectory_reward(task, traj, card).reward)
    # budget 4: 4 calls free, then 1/4 per extra call, floored at 0.
    assert rewards == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_penalty_never_raises_a_failed_episode(toy: Domain) -> None:
    task = toy.task("toy_cancel")
    scorer = Scorer(toy)
    for traj in (
        null_trajectory(toy, task),
        calls_trajectory(toy, task, [("get_order", {"order_id": "O1"})] * 9, "Done."),
    ):
        r = trajectory_reward(task, traj, scorer.score(task, traj))
        assert r.task_reward == 0.0
        assert r.reward == 0.0


def test_a_card_with_a_pending_criterion_has_no_reward(toy: Domain) -> None:
    task = toy.task("toy_refuse")  # NL_ASSERTION needs a judge
    traj = gold_trajectory(toy, task)
    r = trajectory_reward(task, traj, Scorer(toy).score(task, traj))
    assert r.task_reward is None and r.reward is None


def test_mismatched_inputs_are_refused(toy: Domain) -> None:
    task, other = toy.task("toy_status"), toy.task("toy_cancel")
    traj = gold_trajectory(toy, task)
    with pytest.raises(ValueError, match="toy_cancel"):
        trajectory_reward(other, traj, Scorer(toy).score(task, traj))
    with pytest.raises(ValueError, match="call counts"):
        shaped_reward(Scorer(toy).score(task, traj), -1, 1)
