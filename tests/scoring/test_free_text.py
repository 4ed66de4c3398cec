"""Free text is not state to match: an argument a task's ``compare_args`` leaves out is taken
from the agent's own call when the DB check builds the expected state, and the fourth yardstick
(the gold conversation with that text reworded) must still score 1."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from maestro.cli.domains import validate_targets
from maestro.domains import Action, Domain, library_path, load_domain
from maestro.scoring import Scorer, check_task
from maestro.simulation import calls_trajectory, paraphrased_trajectory
from maestro.simulation.scripted import paraphrase


@cache
def hotel() -> Domain:
    return load_domain(library_path("hotel"))


GUEST_WORDS = "My conference in Boston got called off, so I won't need the room."


def test_a_correct_agent_writing_the_reason_in_the_guests_words_scores_one() -> None:
    """hotel_007 scored 0 with every action right: the DB check compared the stored
    cancel_reason with the gold's "conference cancelled", an argument the task does not compare."""
    domain = hotel()
    task = domain.task("hotel_007")
    calls = [(a.name, dict(a.arguments)) for a in task.gold_actions]
    assert calls[-1][0] == "cancel_reservation"
    calls[-1][1]["reason"] = GUEST_WORDS
    card = Scorer(domain).score(task, calls_trajectory(domain, task, calls, "It is cancelled."))
    assert card.criteria["DB"].status == "pass", card.criteria["DB"].details
    assert card.criteria["ACTION"].status == "pass"
    assert card.reward == 1.0 and card.pending  # NL assertions wait for a judge


def test_what_the_task_compares_still_decides_the_db_check() -> None:
    domain = hotel()
    task = domain.task("hotel_008")
    scorer = Scorer(domain)
    gold = [(a.name, dict(a.arguments)) for a in task.gold_actions]
    # An option the gold action does not list is not free text: waiving a fee the guest owes
    # shows in the state.
    waived = [(n, {**a, "waive_fee": True} if n == "cancel_reservation" else a) for n, a in gold]
    card = scorer.score(task, calls_trajectory(domain, task, waived, "Done."))
    assert card.criteria["DB"].status == "fail", card.criteria["DB"].details
    # The wrong reservation: the compared argument, so the action and the state both fail.
    wrong = [
        (n, {**a, "reservation_id": "R30148"} if n == "cancel_reservation" else a) for n, a in gold
    ]
    card = scorer.score(task, calls_trajectory(domain, task, wrong, "Done."))
    assert card.criteria["DB"].status == "fail" and card.criteria["ACTION"].status == "fail"


def test_the_paraphrased_yardstick_rewords_only_uncompared_text() -> None:
    domain = hotel()
    task = domain.task("hotel_007")
    traj = paraphrased_trajectory(domain, task)
    assert traj is not None
    [cancel] = [c for c in traj.assistant_calls() if c.name == "cancel_reservation"]
    assert cancel.arguments == {
        "reservation_id": "R30148",
        "reason": paraphrase("conference cancelled"),
    }
    assert Scorer(domain).score(task, traj).reward == 1.0
    # A task that compares every argument has nothing to reword.
    assert paraphrased_trajectory(domain, domain.task("hotel_011")) is None


def _loose_copy(tmp_path: Path) -> Path:
    """The hotel package with hotel_011's phone number left out of compare_args."""
    dest = tmp_path / "hotel"
    dest.mkdir()
    for f in library_path("hotel").iterdir():
        if f.is_file():
            (dest / f.name).write_bytes(f.read_bytes())
    lines = []
    for line in (dest / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["id"] == "hotel_011":
            task["evaluation_criteria"]["actions"][-1]["compare_args"] = ["guest_id"]
        lines.append(json.dumps(task))
    (dest / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return dest


def test_a_task_that_leaves_real_state_uncompared_fails_the_fourth_yardstick(
    tmp_path: Path,
) -> None:
    loose = _loose_copy(tmp_path)
    domain = load_domain(loose)
    task = domain.task("hotel_011")
    check = check_task(domain, task)
    assert check.gold_pass and check.null_fail and check.perturbed_fail
    assert check.paraphrased_reward == 0.0 and not check.ok
    [problem] = check.problems
    assert "uncompared text reworded scores 0" in problem and "compare it" in problem
    # `maestro domains validate` counts it and fails.
    [domain_check], totals = validate_targets([loose])
    assert totals["paraphrased_pass"] == 29 and totals["gold_pass"] == 30
    assert any("hotel_011" in p for p in totals["problems"])
    assert domain_check.summary()["paraphrased_pass"] == 29


def test_the_gold_action_lists_what_is_compared() -> None:
    a = Action(action_id="a", name="f", arguments={"x": 1, "note": "hi"}, compare_args=["x"])
    assert a.compared() == {"x": 1}
