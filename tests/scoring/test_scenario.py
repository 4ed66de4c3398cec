"""A task's instructions must not contradict the user simulator's rule that known information
is given only when the agent asks (hotel_022 and vetclinic_027 did)."""

from __future__ import annotations

import pytest

from maestro.domains import Task, library_ids, library_path, load_domain
from maestro.scoring import check_task
from maestro.scoring.scenario import known_facts, volunteered_known_facts


def _task(reason: str, known: str, instructions: str) -> Task:
    return Task.model_validate(
        {
            "id": "t",
            "user_scenario": {
                "instructions": {
                    "domain": "hotel",
                    "reason_for_call": reason,
                    "known_info": known,
                    "task_instructions": instructions,
                }
            },
            "evaluation_criteria": {"nl_assertions": ["x"], "reward_basis": ["NL_ASSERTION"]},
        }
    )


HOTEL_022_KNOWN = (
    "Your name is Megan Lowe. Richard Stanton's reservation is R30177; his email is"
    " richard.stanton@stantongroup.com."
)
HOTEL_022_REASON = "You are Megan Lowe, assistant to Richard Stanton. He asked you to cancel it."


def test_the_old_hotel_022_and_vetclinic_027_are_caught() -> None:
    old_022 = _task(
        HOTEL_022_REASON,
        HOTEL_022_KNOWN,
        "Say you are Richard Stanton's assistant and ask to cancel reservation R30177.",
    )
    [problem] = volunteered_known_facts(old_022)
    assert "R30177 unasked" in problem and "reason_for_call" in problem
    old_027 = _task(
        "Your neighbour Linda Park asked you to cancel her dog Scout's appointment.",
        "Your name is Kevin Marsh. Linda Park's phone number is 541-555-0158.",
        "Say you are Linda's neighbour Kevin Marsh and give her phone number. Accept the refusal.",
    )
    [problem] = volunteered_known_facts(old_027)
    assert "Kevin Marsh unasked" in problem


@pytest.mark.parametrize(
    "instructions",
    [
        # Waits for the agent.
        "Ask to cancel his stay; give the reservation number R30177 when the agent asks.",
        "Do not mention R30177 unless asked.",
        "Give R30177 only if they ask for it.",
        # Says nothing of what only the agent may ask for.
        "Say you are Richard Stanton's assistant and ask to cancel his stay.",
    ],
)
def test_instructions_that_wait_for_the_agent_are_fine(instructions: str) -> None:
    assert volunteered_known_facts(_task(HOTEL_022_REASON, HOTEL_022_KNOWN, instructions)) == []


def test_a_fact_the_reason_states_may_be_said_up_front() -> None:
    reason = "You want your profile updated to your new number +1-206-555-0187."
    task = _task(
        reason, "Your new number is +1-206-555-0187.", "Ask to update it to +1-206-555-0187."
    )
    assert volunteered_known_facts(task) == []


def test_facts_are_identifiers_and_names_not_sentence_openers() -> None:
    facts = known_facts(HOTEL_022_KNOWN + " Your Visa ends in 4417.")
    assert {"R30177", "richard.stanton@stantongroup.com", "Megan Lowe", "4417"} <= facts
    assert "Richard Stanton" in facts and "Your Visa" not in facts and "Visa" not in facts


@pytest.mark.parametrize("domain_id", library_ids())
def test_no_library_task_contradicts_the_user_simulator(domain_id: str) -> None:
    domain = load_domain(library_path(domain_id), check_gold=False)
    assert {
        t.id: volunteered_known_facts(t) for t in domain.tasks if volunteered_known_facts(t)
    } == {}


def test_a_contradicting_task_fails_its_conformance_check() -> None:
    domain = load_domain(library_path("hotel"))
    task = domain.task("hotel_022")
    assert check_task(domain, task).ok
    ins = task.user_scenario.instructions.model_copy(
        update={"task_instructions": "Ask to cancel reservation R30177. Accept a refusal."}
    )
    broken = task.model_copy(
        update={"user_scenario": task.user_scenario.model_copy(update={"instructions": ins})}
    )
    check = check_task(domain, broken)
    assert not check.ok and check.gold_pass
    assert any(
        p.startswith("user scenario: task_instructions say to give R30177") for p in check.problems
    )
