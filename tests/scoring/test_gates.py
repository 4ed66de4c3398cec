"""The quality gates as pure functions: the first failed gate, the funnel, near duplicates,
deterministic gold replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from maestro.domains import Domain, Task, library_ids, library_path, load_domain, replay_gold
from maestro.scoring.gates import (
    GATES,
    REVIEW_CAUSES,
    GateInputs,
    difficulty_band,
    funnel,
    near_duplicates,
    replay_deterministic,
    verdict,
)


def inputs(**kw: object) -> GateInputs:
    base: dict[str, object] = {
        "task_id": "t",
        "gold_replay_ok": True,
        "gold_deterministic": True,
        "gold_scores_one": True,
        "null_scores_zero": True,
        "perturbed_scores_zero": True,
        "trials": 4,
        "successes": 2,
    }
    base.update(kw)
    return GateInputs(**base)  # type: ignore[arg-type]


def test_a_task_through_every_gate_is_accepted_with_its_band() -> None:
    v = verdict(inputs())
    assert v.accepted and v.rejected_at is None and v.reasons == []
    assert (v.pass_rate, v.difficulty_band) == (0.5, "medium")


@pytest.mark.parametrize(
    ("kw", "gate", "reason"),
    [
        ({"gold_replay_ok": False, "gold_scores_one": False}, "gold_replay", None),
        ({"gold_deterministic": False}, "gold_deterministic", "not deterministic"),
        ({"paraphrased_scores_one": False}, "paraphrased_scores_one", None),
        ({"null_scores_zero": False}, "null_scores_zero", None),
        ({"perturbed_scores_zero": False}, "perturbed_scores_zero", None),
        ({"trials": 0, "successes": 0}, "simulated", "no scored episode"),
        (
            {"successes": 0, "review_cause": "task_defect", "review_reason": "needs a pet id"},
            "review",
            "review: task_defect: needs a pet id",
        ),
        ({"duplicate_of": "t0"}, "near_duplicate", "near duplicate of t0"),
    ],
)
def test_the_first_failed_gate_rejects_with_its_reason(
    kw: dict[str, object], gate: str, reason: str | None
) -> None:
    v = verdict(inputs(**kw))
    assert not v.accepted and v.rejected_at == gate
    if reason:
        assert any(reason in r for r in v.reasons), v.reasons


def test_reviews_other_than_task_defect_keep_the_task() -> None:
    kept = ("assistant_failure", "user_simulator_error", "unsure", "review_failed", "not_reviewed")
    assert set(kept) | {"task_defect"} == set(REVIEW_CAUSES)
    for cause in kept:
        v = verdict(inputs(successes=0, review_cause=cause, review_reason="why"))
        assert v.accepted and v.difficulty_band == "unsolved"
        assert f"review: {cause}: why" in v.reasons
        # Only a verdict that could not show its evidence asks a person to look.
        assert v.flagged == (cause == "unsure")


def test_difficulty_bands() -> None:
    assert [difficulty_band(r) for r in (1.0, 0.8, 0.79, 0.4, 0.39, 0.01, 0.0)] == [
        "easy",
        "easy",
        "medium",
        "medium",
        "hard",
        "hard",
        "unsolved",
    ]


def test_funnel_counts_add_up() -> None:
    rejected = [
        None,
        "review",
        "gold_replay",
        None,
        "near_duplicate",
        "review",
        "simulated",
        "paraphrased_scores_one",
    ]
    rows = funnel(rejected)
    counts = [r["tasks"] for r in rows]
    assert rows[0] == {"stage": "tasks in scope", "tasks": 8}
    assert rows[-1] == {"stage": "accepted", "tasks": 2}
    assert counts == sorted(counts, reverse=True)
    drops = {
        GATES[i]: counts[i] - counts[i + 1] for i in range(len(GATES))
    }  # rows[i + 1] is gate i
    assert drops == {
        "gold_replay": 1,
        "gold_deterministic": 0,
        "gold_scores_one": 0,
        "paraphrased_scores_one": 1,
        "null_scores_zero": 0,
        "perturbed_scores_zero": 0,
        "simulated": 1,
        "review": 2,
        "near_duplicate": 1,
    }
    assert counts[0] - sum(drops.values()) == counts[-1]
    with pytest.raises(ValueError, match="unknown gate"):
        funnel(["reviw"])


def _clone(task: Task, task_id: str, **instructions: str) -> Task:
    ins = task.user_scenario.instructions.model_copy(update=instructions)
    scenario = task.user_scenario.model_copy(update={"instructions": ins})
    return task.model_copy(update={"id": task_id, "user_scenario": scenario})


def test_near_duplicates_are_found_and_the_first_is_kept(toy: Domain) -> None:
    cancel = toy.task("toy_cancel")
    reworded_id = _clone(
        cancel, "copy_other_id", reason_for_call="You want to cancel order O7."
    )  # same template, another id: a clone
    same_calls = _clone(
        cancel,
        "same_calls",
        task_instructions="Answer the assistant's questions politely and briefly.",
    )  # same gold calls, much of the wording
    tasks = [cancel, toy.task("toy_status"), reworded_id, same_calls, toy.task("toy_refuse")]
    dups = near_duplicates(tasks)
    assert set(dups) == {"copy_other_id", "same_calls"}
    assert dups["copy_other_id"] == ("toy_cancel", 1.0)
    assert dups["same_calls"][0] == "toy_cancel" and 0.5 <= dups["same_calls"][1] < 1.0
    # Order decides which one stays.
    assert set(near_duplicates([reworded_id, cancel])) == {"toy_cancel"}


def test_different_tasks_with_the_same_wording_style_are_kept(toy: Domain) -> None:
    cancel = toy.task("toy_cancel")
    other = _clone(
        cancel,
        "other",
        reason_for_call="You want to know which products are in stock and their prices.",
        known_info="You have no order yet.",
        task_instructions="Ask for a list and then end the call.",
    )
    assert near_duplicates([cancel, other]) == {}


def test_no_library_task_is_a_near_duplicate_of_another() -> None:
    for domain_id in library_ids():
        domain = load_domain(library_path(domain_id), check_gold=False)
        assert near_duplicates(domain.tasks) == {}, domain_id


NONDETERMINISTIC_TOOL = '''

import random


@tool("write")
def lucky_coupon(db: Database, customer_id: str) -> dict:
    """Give a customer a coupon of a random value.

    Args:
        customer_id: The customer's id.
    """
    db.require("customers", customer_id)
    return db.update("customers", customer_id, email=f"coupon-{random.random()}@example.com")
'''


def test_gold_replay_determinism(toy: Domain, toy_copy: Path) -> None:
    task = toy.task("toy_cancel")
    assert replay_deterministic(replay_gold(toy, task), replay_gold(toy, task))
    with (toy_copy / "tools.py").open("a") as f:
        f.write(NONDETERMINISTIC_TOOL)
    line = (
        '{"id": "toy_coupon", "user_scenario": {"instructions": {"domain": "toy",'
        ' "reason_for_call": "I want a coupon.", "task_instructions": "Ask for it."}},'
        ' "evaluation_criteria": {"actions": [{"action_id": "a1", "name": "lucky_coupon",'
        ' "arguments": {"customer_id": "C1"}}], "reward_basis": ["DB", "ACTION"]}}\n'
    )
    with (toy_copy / "tasks.jsonl").open("a") as f:
        f.write(line)
    flaky = load_domain(toy_copy, trusted=True)
    coupon = flaky.task("toy_coupon")
    assert not replay_deterministic(replay_gold(flaky, coupon), replay_gold(flaky, coupon))
