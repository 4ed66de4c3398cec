from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from maestro.domains import Action, Domain, RewardType, Task
from maestro.scoring import (
    AssertionVerdict,
    JudgeError,
    RuleJudge,
    Scorer,
    calls,
    match_actions,
    says,
)
from maestro.simulation import (
    Message,
    ToolCall,
    Trajectory,
    calls_trajectory,
    gold_trajectory,
    null_trajectory,
)


def test_gold_scores_one_and_doing_nothing_scores_zero(toy: Domain) -> None:
    scorer = Scorer(toy)
    task = toy.task("toy_cancel")
    assert scorer.score(task, gold_trajectory(toy, task)).reward == 1.0
    card = scorer.score(task, null_trajectory(toy, task))
    assert card.reward == 0.0
    assert card.criteria["DB"].status == "fail"
    assert card.criteria["ACTION"].status == "fail"


def test_db_failure_explains_the_difference(toy: Domain) -> None:
    task = toy.task("toy_cancel")
    traj = calls_trajectory(
        toy, task, [("place_order", {"customer_id": "C1", "skus": ["P1"]})], "Done."
    )
    card = Scorer(toy).score(task, traj)
    details = card.criteria["DB"].details
    assert "differs from the expected state in 3 record(s)" in details
    assert 'orders/O1.status: expected "cancelled", got "pending"' in details
    assert "orders/O3: only in got" in details
    assert "products/P1.stock: expected 4, got 2" in details


def test_a_failed_call_does_not_match_a_gold_action(toy: Domain) -> None:
    task = toy.task("toy_cancel")
    # The same call made twice: the second fails (already cancelled) but the first matched.
    traj = calls_trajectory(toy, task, [("cancel_order", {"order_id": "O1"})] * 2, "Done.")
    assert Scorer(toy).score(task, traj).reward == 1.0
    # A call that errors never counts, even with the right name and arguments.
    shipped = toy.task("toy_status").model_copy(deep=True)
    shipped.evaluation_criteria.actions = [
        Action(action_id="a", name="get_order", arguments={"order_id": "O9"})
    ]
    traj = calls_trajectory(toy, shipped, [("get_order", {"order_id": "O9"})], "shipped")
    card = Scorer(toy).score(shipped, traj)
    assert card.criteria["ACTION"].status == "fail"


def test_compare_args_limit_what_must_match(toy: Domain) -> None:
    task = toy.task("toy_cancel")  # compares order_id only
    traj = calls_trajectory(
        toy, task, [("cancel_order", {"order_id": "O1", "reason": "other words"})], "ok"
    )
    assert Scorer(toy).score(task, traj).criteria["ACTION"].status == "pass"


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(id="x", name=name, arguments=dict(args))


def test_action_matching_is_order_insensitive_and_one_to_one() -> None:
    a = Action(action_id="a", name="f", arguments={"x": 1, "y": 2}, compare_args=["x"])
    b = Action(action_id="b", name="f", arguments={"x": 1, "y": 3})
    # A greedy matcher would give call 0 to `a` and leave `b` without a match.
    assigned = match_actions([a, b], [_call("f", x=1, y=3), _call("f", x=1, y=9)], ordered=False)
    assert assigned == [1, 0]
    # Two identical gold actions need two calls.
    assert match_actions([b, b], [_call("f", x=1, y=3)], ordered=False) == [0, None]
    # Ordered matching wants a subsequence.
    assert match_actions([a, b], [_call("f", x=1, y=3), _call("f", x=1, y=2)], ordered=True) == [
        0,
        None,
    ]
    # Numbers compare by value, booleans do not pass as numbers.
    assert match_actions(
        [Action(action_id="c", name="g", arguments={"n": 2})], [_call("g", n=2.0)], False
    ) == [0]
    assert match_actions(
        [Action(action_id="c", name="g", arguments={"n": 1})], [_call("g", n=True)], False
    ) == [None]


def test_ordered_actions_are_enforced_when_the_task_says_so(toy: Domain) -> None:
    task = toy.task("toy_cancel").model_copy(deep=True)
    task.evaluation_criteria.actions.insert(
        0, Action(action_id="a0", name="get_order", arguments={"order_id": "O1"})
    )
    backwards = [("cancel_order", {"order_id": "O1"}), ("get_order", {"order_id": "O1"})]
    traj = calls_trajectory(toy, task, backwards, "ok")
    assert Scorer(toy).score(task, traj).reward == 1.0
    task.evaluation_criteria.ordered_actions = True
    assert Scorer(toy).score(task, traj).reward == 0.0


def test_forbidden_action_fails_the_action_criterion(toy: Domain) -> None:
    task = toy.task("toy_refuse").model_copy(deep=True)
    task.evaluation_criteria.actions = [
        Action(action_id="a", name="get_order", arguments={"order_id": "O1"})
    ]
    task.evaluation_criteria.reward_basis = [RewardType.ACTION]
    traj = calls_trajectory(
        toy, task, [("get_order", {"order_id": "O1"}), ("cancel_order", {"order_id": "O1"})], None
    )
    card = Scorer(toy).score(task, traj)
    assert card.reward == 0.0
    assert "forbidden f1 cancel_order" in card.criteria["ACTION"].details


def test_communicate_ignores_case_and_thousands_separators(toy: Domain) -> None:
    task = toy.task("toy_status").model_copy(deep=True)
    task.evaluation_criteria.communicate_info = ["SHIPPED", "1250.00"]
    traj = calls_trajectory(
        toy, task, [("get_order", {"order_id": "O2"})], "It shipped; the total is $1,250.00."
    )
    assert Scorer(toy).score(task, traj).criteria["COMMUNICATE"].status == "pass"
    traj = calls_trajectory(toy, task, [("get_order", {"order_id": "O2"})], "It shipped.")
    card = Scorer(toy).score(task, traj)
    assert card.criteria["COMMUNICATE"].details == "not communicated: 1250.00"
    # What the user says does not count.
    traj.messages.append(Message(role="user", content="so 1250.00 then"))
    assert Scorer(toy).score(task, traj).criteria["COMMUNICATE"].status == "fail"


def test_nl_assertions_stay_pending_without_a_judge(toy: Domain) -> None:
    task = toy.task("toy_refuse")
    card = Scorer(toy).score(task, gold_trajectory(toy, task))
    assert card.pending == [RewardType.NL_ASSERTION]
    assert not card.complete
    assert card.reward == 1.0  # over the criteria judged so far
    with pytest.raises(JudgeError, match="no judge"):
        asyncio.run(Scorer(toy).ascore(task, gold_trajectory(toy, task)))


def test_the_judge_decides_nl_assertions(toy: Domain) -> None:
    task = toy.task("toy_refuse")
    [assertion] = task.evaluation_criteria.nl_assertions
    judge = RuleJudge({assertion: says("cannot cancel")})
    traj = gold_trajectory(toy, task)
    card = asyncio.run(Scorer(toy, judge).ascore(task, traj))
    assert card.criteria["NL_ASSERTION"].status == "fail"
    assert card.reward == 0.0 and card.complete
    traj.messages.append(
        Message(role="assistant", content="I cannot cancel an order that is not yours.")
    )
    card = asyncio.run(Scorer(toy, judge).ascore(task, traj))
    assert card.reward == 1.0 and card.complete
    assert card.criteria["NL_ASSERTION"].items[0].reason == "the assistant said 'cannot cancel'"
    assert judge.calls == 2


class _BrokenJudge:
    def __init__(self, verdicts: list[AssertionVerdict] | None) -> None:
        self.verdicts = verdicts

    async def judge(
        self, task: Task, trajectory: Trajectory, assertions: Sequence[str]
    ) -> list[AssertionVerdict]:
        if self.verdicts is None:
            raise JudgeError("malformed judge output after 3 attempts")
        return self.verdicts


@pytest.mark.parametrize(
    "judge",
    [
        _BrokenJudge(None),
        _BrokenJudge([]),  # answers no assertion
        _BrokenJudge([AssertionVerdict(assertion="something else", met=True, reason="")]),
        RuleJudge({}),  # no rule for the assertion
    ],
)
def test_a_judge_failure_is_an_error_never_a_pass_or_fail(toy: Domain, judge: object) -> None:
    task = toy.task("toy_refuse")
    card = asyncio.run(Scorer(toy, judge).ascore(task, gold_trajectory(toy, task)))  # type: ignore[arg-type]
    nl = card.criteria["NL_ASSERTION"]
    assert nl.status == "error" and nl.reward is None
    assert card.errors == [RewardType.NL_ASSERTION]
    assert not card.complete


def test_reward_is_the_product_over_the_basis_only(toy: Domain) -> None:
    task = toy.task("toy_cancel").model_copy(deep=True)
    traj = gold_trajectory(toy, task)
    task.evaluation_criteria.reward_basis = [RewardType.ACTION]
    traj2 = calls_trajectory(
        toy,
        task,
        [
            ("cancel_order", {"order_id": "O1"}),
            ("place_order", {"customer_id": "C1", "skus": ["P1"]}),
        ],
        "x",
    )
    card = Scorer(toy).score(task, traj2)
    assert card.reward == 1.0 and list(card.criteria) == [
        "ACTION"
    ]  # DB differs but is not in the basis
    task.evaluation_criteria.reward_basis = [RewardType.DB, RewardType.ACTION]
    assert Scorer(toy).score(task, traj2).reward == 0.0
    assert Scorer(toy).score(task, traj).reward == 1.0


def test_rule_helpers() -> None:
    traj = Trajectory(
        domain_id="d",
        task_id="t",
        messages=[
            Message(
                role="assistant",
                content="Let me check.",
                tool_calls=[_call("get_order", order_id="O1")],
            )
        ],
    )
    assert calls("get_order")(traj)[0] is True
    assert calls("cancel_order")(traj)[0] is False
    assert says("CHECK")(traj)[0] is True


def test_malformed_arguments_in_a_trajectory_are_scored_not_raised(toy: Domain) -> None:
    task = toy.task("toy_cancel")
    traj = Trajectory(
        domain_id="toy",
        task_id=task.id,
        messages=[
            Message(
                role="assistant",
                tool_calls=[ToolCall(id="1", name="cancel_order", arguments='{"order_id": ')],
            )
        ],
    )
    card = Scorer(toy).score(task, traj)
    assert card.reward == 0.0


def test_scoring_the_wrong_task_is_refused(toy: Domain) -> None:
    with pytest.raises(ValueError, match="trajectory is of task"):
        Scorer(toy).score(toy.task("toy_cancel"), gold_trajectory(toy, toy.task("toy_status")))
