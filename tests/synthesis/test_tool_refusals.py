"""Refusals a tool enforces (issue 20, 3): the customer asks for what a tool's own check refuses
(a cancellation less than 24 hours before departure); the agent may check first or try the
call, and must say why; nothing changes. Before, only agent rules made refusals, so a desk's
"no refills left" was never tested."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from maestro.agents.codegen.guide import walk_guide
from maestro.agents.codegen.refusals import refusal_rules, tool_rules
from maestro.agents.codegen.scenario_prompts import DraftError, refusal_prompt
from maestro.agents.codegen.scenarios import (
    RefusalDraft,
    _refusal_task,
    is_tool_refusal,
    parse_draft,
    plan_walks,
    refused_operation,
    refused_state,
    unrefused,
)
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains import Domain
from maestro.domains.models import Action, Task
from maestro.scoring.conformance import check_task
from maestro.scoring.scorer import Scorer
from maestro.simulation.scripted import by_turn, summary_text, turns_trajectory
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig(max_iterations=2)


@pytest.fixture(scope="module")
def ferry() -> Iterator[Domain]:
    with team.loaded("tool-refusals", CONFIG) as domain:
        yield domain


def tool_plans(domain: Domain, seed: int = 0, n: int = 3) -> list:
    bp = team.blueprint(CONFIG)
    _, plans = plan_walks(
        domain,
        n=1,
        seed=seed,
        refusals=0,
        rules=refusal_rules(bp),
        guide=walk_guide(bp),
        tool_refusals=n,
        tool_rules=tool_rules(bp),
    )
    return [p for p in plans if p.rule is not None and p.rule.enforced]


def test_the_rules_are_the_writes_checks_limits_and_dates_first() -> None:
    rules = tool_rules(team.blueprint(CONFIG))
    assert all(r.enforced for r in rules)
    cancel = [r.rule for r in rules if r.operation == "cancel_booking"]
    assert (
        cancel[0] == "cancel_booking requires booking_id.sailing_id.departs_at >= now + hours(24)"
    )
    assert cancel[-1] == "cancel_booking requires booking_id.status = 'confirmed'"
    # Consecutive rules are of different operations, so a few refusals cover several.
    assert rules[0].operation != rules[1].operation


def test_a_tool_refusal_walk_is_refused_by_its_tool_and_changes_nothing(ferry: Domain) -> None:
    start = ferry.start_session()
    plans = tool_plans(ferry)
    assert len(plans) == 3 and len({p.rule.operation for p in plans}) == 3
    for plan in plans:
        (walk,) = plan.group
        step = walk.steps[-1]
        assert walk.refused and step is walk.writes[0] and step.name == plan.rule.operation
        assert step.content.startswith("Error"), step.content
        assert plan.rule.applies(step.arguments, start)
        assert walk.expected_state_hash == start.state_hash() and walk.changes == []
        assert walk.steps[0].name == "find_passenger"  # the identity check still comes first


def answer(walk, phrase: str) -> str:
    body = json.loads(team.refusal(walk))
    body["communicate_info"] = [phrase]
    return json.dumps(body)


def test_its_task_keeps_the_yardsticks_and_lets_the_agent_try_the_call(ferry: Domain) -> None:
    plan = next(p for p in tool_plans(ferry) if p.rule.operation == "cancel_booking")
    (walk,) = plan.group
    text = refusal_prompt(ferry, plan.group, plan.rule.rule)
    assert f"the tool answers: {walk.writes[0].content[:40]}" in text
    assert "the desk's tool refuses it" in text
    draft = parse_draft(answer(walk, "24 hours before departure"), RefusalDraft)
    task = _refusal_task(ferry, plan.group, draft, plan)
    assert is_tool_refusal(task) and task.category == "refusal"
    crit = task.evaluation_criteria
    # The booking is the customer's: the agent identifies them to see it. The refused call
    # is no gold.
    assert plan.rule.decides == ("booking_id", "bookings")
    assert [a.name for a in crit.actions] == ["find_passenger"]
    assert crit.forbidden_actions == [] and crit.communicate_info == ["24 hours before departure"]
    check = check_task(ferry, task)
    assert check.ok, check.problems
    # An agent that tries the call, is refused by the tool, and says why, still scores 1.
    tried = Action(action_id="t1", name=walk.writes[0].name, arguments=walk.writes[0].arguments)
    trajectory = turns_trajectory(
        ferry, task, by_turn(task, [*crit.actions, tried]), summary_text(task)
    )
    scorer = Scorer(ferry)
    assert scorer.score(task, trajectory, None).reward == 1
    # A fact the policy does not state goes back to the writer.
    bad = parse_draft(answer(walk, "a 90-minute grace period"), RefusalDraft)
    with pytest.raises(DraftError, match="not found in the policy"):
        _refusal_task(ferry, plan.group, bad)


def test_the_refusal_writer_is_told_not_to_assert_the_identity_check(ferry: Domain) -> None:
    """A careful agent refused a schedule IV refill from the drug's record alone, never
    identifying the caller, and scored 0 on the writer's assertion that it verified identity
    (pharmacy, 2026-12-03)."""
    plan = tool_plans(ferry)[0]
    text = refusal_prompt(ferry, plan.group, plan.rule.rule)
    assert "not that it verifies the customer's identity" in text


def test_a_refusal_prompt_shows_the_records_that_refer_to_the_request(ferry: Domain) -> None:
    """A pharmacy's refusal writer saw the rule "a pending refill cannot be requested twice"
    but not the pending refill: records referring to what the write names are shown too."""
    from maestro.agents.codegen.scenario_prompts import records_text
    from maestro.domains.walks import Walk, WalkStep

    session = ferry.start_session()
    refund_key, refund = next((k, session.require("refunds", k)) for k in session.keys("refunds"))
    booking = refund["booking_id"]
    step = WalkStep("cancel_booking", "write", {"booking_id": booking}, ("booking_id",), "Error")
    walk = Walk([step], [("bookings", booking)], {}, session.state_hash(), refused=True)
    assert f"refunds/{refund_key}:" not in records_text(ferry, [walk])
    assert f"refunds/{refund_key}:" in records_text(ferry, [walk], referring=True)
    assert f"refunds/{refund_key}:" in refusal_prompt(ferry, [walk], None)


def test_a_check_whose_failure_leaves_another_write_open_makes_no_refusal(ferry: Domain) -> None:
    """A late cancellation is refused by cancel_booking, but when the line cancelled the
    sailing the agent claims its refund instead (both end with the booking cancelled): no
    customer meets that refusal, so the booking is no candidate (car rental run 10's paid late
    cancellation refused only because the free one applied)."""
    bp = team.blueprint(CONFIG)
    (late,) = [
        r
        for r in tool_rules(bp)
        if r.rule == "cancel_booking requires booking_id.sailing_id.departs_at >= now + hours(24)"
    ]
    session = ferry.start_session()
    anchors = [key for _, key in late.anchors(session)]
    assert anchors, late.explain(session)
    yesterday = (bp.clock - timedelta(days=1)).isoformat()
    booking = session.require("bookings", anchors[0])
    session.update("sailings", booking["sailing_id"], status="cancelled", departs_at=yesterday)
    assert anchors[0] not in [key for _, key in late.anchors(session)]
    for key in anchors[1:]:
        sailing_id = session.require("bookings", key)["sailing_id"]
        session.update("sailings", sailing_id, status="cancelled", departs_at=yesterday)
    assert late.anchors(session) == []
    assert late.explain(session).endswith(
        "and claim_cancelled_sailing_refund takes each of them instead (a customer would "
        "never meet this refusal)"
    )
    # A check both writes make still refuses: nothing cancels an unconfirmed booking.
    (status,) = [
        r
        for r in tool_rules(bp)
        if r.rule == "cancel_booking requires booking_id.status = 'confirmed'"
    ]
    assert status.anchors(session)


def test_a_refusal_decided_by_nobodys_record_asks_for_no_identity_check(ferry: Domain) -> None:
    """A careful agent refused a booking on a flight leaving within 24 hours from the flight
    alone, never identifying the caller, and scored 0 on the gold's identity lookup (airline,
    2026-12-03). A check that a shared record decides (a sailing) asks for no call; the wrong
    conversation the yardsticks build is the booking made on another sailing, which the tool
    accepts."""
    plans = [p for p in tool_plans(ferry, n=12) if p.rule.decides == ("sailing_id", "sailings")]
    assert plans, [p.rule.rule for p in tool_plans(ferry, n=12)]
    plan = plans[0]
    (walk,) = plan.group
    step = walk.writes[0]
    assert walk.steps[0].name == "find_passenger"  # the walk still identified the passenger
    fact = {
        "book_sailing requires sailing_id.status in ['scheduled']": "scheduled",
        "book_sailing requires sailing_id.seats_left at_least 1": "seats left",
    }.get(plan.rule.rule, "2 hours before departure")
    task = _refusal_task(ferry, plan.group, parse_draft(answer(walk, fact), RefusalDraft), plan)
    crit = task.evaluation_criteria
    assert crit.actions == [] and "action" not in [b.value for b in crit.reward_basis]
    (instead,) = crit.forbidden_actions
    assert (
        instead.name == step.name
        and instead.arguments["sailing_id"] != step.arguments["sailing_id"]
    )
    assert {k: v for k, v in instead.arguments.items() if k != "sailing_id"} == {
        k: v for k, v in step.arguments.items() if k != "sailing_id"
    }
    check = check_task(ferry, task)
    assert check.ok and check.perturbed_reward == 0, check.problems
    scorer = Scorer(ferry)
    # Refusing from the sailing alone, no identity lookup, scores 1 ...
    read = Action(
        action_id="s1", name="get_sailing", arguments={"sailing_id": step.arguments["sailing_id"]}
    )
    alone = turns_trajectory(ferry, task, by_turn(task, [read]), summary_text(task))
    assert scorer.score(task, alone, None).reward == 1
    # ... and booking another sailing instead scores 0.
    other = turns_trajectory(ferry, task, by_turn(task, [read, instead]), summary_text(task))
    assert scorer.score(task, other, None).reward == 0
    # The reviewer reads the refused call and the one the agent must not make instead.
    from maestro.agents.codegen.stages import task_line

    line = task_line(task)
    assert f"the tool refuses {step.name}(" in line and "must not do instead [" in line
    assert "must refuse" not in line


def test_a_refusal_for_a_records_status_asks_for_the_state_it_is_in(ferry: Domain) -> None:
    """A careful agent said a card "already shows as active" and scored 0: the task asked for
    the policy's "not yet activated" (bank, 2026-12-03). A tool refusal for a record's status
    names the state the record is in; the prompt says so, and a draft without it goes back."""
    every = tool_plans(ferry, n=12)
    plans = [p for p in every if p.rule.rule.endswith("booking_id.status = 'confirmed'")]
    assert plans, [p.rule.rule for p in every]
    plan = plans[0]
    assert plan.rule.state_field == "status"
    (walk,) = plan.group
    state = refused_state(ferry, plan)
    assert state is not None and state.field == "status" and state.value != "confirmed"
    text = refusal_prompt(ferry, plan.group, plan.rule.rule, None, state)
    assert f"one fact of communicate_info is {state.value!r}" in text
    # The policy's words for the state the rule needs alone go back, with the state named.
    bad = parse_draft(answer(walk, "confirmed booking"), RefusalDraft)
    with pytest.raises(DraftError, match=f"must name the state the record is in, '{state.value}'"):
        _refusal_task(ferry, plan.group, bad, plan)
    needs = parse_draft(answer(walk, "not yet confirmed"), RefusalDraft)
    with pytest.raises(DraftError, match="say the state the rule needs, in the policy's words"):
        _refusal_task(ferry, plan.group, needs, plan)
    # Written to the rule, it passes the yardsticks, and an agent that names the state in its
    # own words scores 1.
    body = json.loads(answer(walk, "confirmed booking"))
    body["communicate_info"] = ["confirmed booking", state.value]
    task = _refusal_task(ferry, plan.group, parse_draft(json.dumps(body), RefusalDraft), plan)
    check = check_task(ferry, task)
    assert check.ok, check.problems
    own_words = (
        f"I'm sorry, I can't do that: your booking is already {state.value.upper()}, and only "
        "a Confirmed booking can be changed."
    )
    trajectory = turns_trajectory(ferry, task, by_turn(task, task.gold_actions), own_words)
    assert Scorer(ferry).score(task, trajectory, None).reward == 1


def test_refusals_beyond_the_agent_rules_go_to_tool_rules_before_a_rule_repeats(
    ferry: Domain,
) -> None:
    """One domain of the 2026-12-03 check refused the same agent rule twice while tool rules
    went unrefused: the refusals asked for outnumbered its rules."""
    bp = team.blueprint(CONFIG)
    agent = refusal_rules(bp)[:2]
    tools = tool_rules(bp)
    assert len({r.operation for r in agent}) == 2 and len(tools) >= 3

    def planned(tool_rules_given: list) -> tuple[list[str], list[str]]:
        _, plans = plan_walks(
            ferry,
            n=1,
            seed=0,
            refusals=3,
            rules=agent,
            guide=walk_guide(bp),
            tool_refusals=1,
            tool_rules=tool_rules_given,
        )
        ruled = [p.rule.operation for p in plans if p.rule and not p.rule.enforced and p.group]
        enforced = [p.rule.rule for p in plans if p.rule and p.rule.enforced and p.group]
        return ruled, enforced

    ruled, enforced = planned(tools)
    assert sorted(ruled) == sorted(r.operation for r in agent)  # each agent rule once
    assert len(enforced) == 2 and len(set(enforced)) == 2  # the third refusal: a tool rule
    # With no tool rule to take it, the third refusal repeats an agent rule (another customer).
    ruled, enforced = planned([])
    assert len(ruled) == 3 and len(set(ruled)) == 2 and enforced == []


def test_a_retry_refuses_the_rules_no_kept_refusal_refuses() -> None:
    bp = team.blueprint(CONFIG)
    agent, tools = refusal_rules(bp), tool_rules(bp)

    def refusal(purpose: str) -> Task:
        return Task.model_validate(
            {
                "id": "t",
                "category": "refusal",
                "description": {"purpose": purpose},
                "user_scenario": {
                    "instructions": {
                        "domain": "ferry",
                        "reason_for_call": "x",
                        "task_instructions": "x",
                    }
                },
                "evaluation_criteria": {},
            }
        )

    kept = [
        refusal(f"Synthesized refusal: {agent[0].operation} is forbidden here"),
        refusal(f"Synthesized refusal: the tool refuses {tools[0].operation} here"),
    ]
    assert [refused_operation(t) for t in kept] == [agent[0].operation, tools[0].operation]
    assert unrefused(agent, kept) == [r for r in agent if r.operation != agent[0].operation]
    assert unrefused(tools, kept) == [r for r in tools if r.operation != tools[0].operation]
    assert unrefused(agent[:1], kept) == agent[:1]  # every rule refused: all of them again
