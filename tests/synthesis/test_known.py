"""What a customer knows (issue 20, 2): keys only the desk sees are reached through reads, the
walks plan those reads, and a scenario never has the customer say such a key. A capable model's
car rental once had customers give ``car_class_id="CC1008"`` and ``return_branch_id="BR1002"``."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from maestro.agents.codegen.blueprint import BlueprintError
from maestro.agents.codegen.guide import walk_guide
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.scenario_prompts import ScenarioDraft, parse_draft, walk_prompt
from maestro.agents.codegen.scenarios import _walk_task, plan_walks, told_problems
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains import Domain
from maestro.domains.walks import Walk
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig(max_iterations=2)


@pytest.fixture(scope="module")
def ferry() -> Iterator[Domain]:
    with team.loaded("known", CONFIG) as domain:
        yield domain


def without(op_name: str) -> dict[str, Any]:
    raw = copy.deepcopy(team.BLUEPRINT)
    raw["operations"] = [op for op in raw["operations"] if op["name"] != op_name]
    return raw


def test_a_key_no_customer_knows_needs_a_read_that_shows_it() -> None:
    bp = parse_blueprint(copy.deepcopy(team.BLUEPRINT), clock=CONFIG.clock)
    assert bp.desk_keys() == {"sailings", "memberships"}  # marked, and a catalog by default
    # Without the search by route, nothing shows a sailing's key to the agent.
    with pytest.raises(BlueprintError, match="sailing_id is a key of sailings, which a customer"):
        parse_blueprint(without("find_sailings"), clock=CONFIG.clock)
    # A passenger's record shows their own membership; another one needs a list of them.
    with pytest.raises(
        BlueprintError, match=r"new_membership_id is a key of memberships.*no list or lookup"
    ):
        parse_blueprint(without("list_memberships"), clock=CONFIG.clock)
    # A key the customer knows needs no read.
    raw = without("find_sailings")
    next(e for e in raw["entities"] if e["table"] == "sailings")["key_known"] = True
    assert "sailings" not in parse_blueprint(raw, clock=CONFIG.clock).desk_keys()


def flat(values: dict[str, Any]) -> set[str]:
    return {str(x) for v in values.values() for x in (v if isinstance(v, list) else [v])}


def sampled(domain: Domain, guide_desk: bool) -> list[Walk]:
    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    if not guide_desk:
        guide = replace(guide, desk_keys=frozenset())
    walks: list[Walk] = []
    for seed in range(3):
        got, plans = plan_walks(domain, n=12, seed=seed, refusals=2, guide=guide, asks=2)
        walks += got + [w for p in plans for w in p.group]
    return walks


def test_walks_find_each_desk_key_with_a_read_and_the_customer_never_gives_it(
    ferry: Domain,
) -> None:
    sailing_keys = set(ferry.start_session().keys("sailings"))
    # Before: the customer had to give the sailing's key for a booking or a transfer.
    before = sampled(ferry, guide_desk=False)
    assert any(flat(w.user_values) & sailing_keys for w in before)
    walks = sampled(ferry, guide_desk=True)
    booked = [
        w for w in walks if any(s.name in ("book_sailing", "request_transfer") for s in w.steps)
    ]
    assert booked, "the operations that take a sailing are still walked"
    assert any(w.hidden for w in walks)
    for w in walks:
        assert not flat(w.user_values) & set(w.hidden), (w.user_values, w.hidden)
        assert not flat(w.user_values) & sailing_keys, w.user_values
        for key in w.hidden:
            first_use = next(i for i, s in enumerate(w.steps) if key in flat(s.arguments))
            shown = " ".join(s.content for s in w.steps[:first_use])
            assert key in shown, f"{key} is used by step {first_use} before a read shows it"
    # The customer names the sailing by its route (the search's parameter).
    assert any("route" in w.user_values for w in booked)


def test_the_scenario_prompt_says_which_keys_the_customer_cannot_know_and_its_lint_refuses_them(
    ferry: Domain,
) -> None:
    walks = [w for w in sampled(ferry, guide_desk=True) if w.hidden and not w.asks and w.writes]
    walk = walks[0]
    text = walk_prompt(ferry, walk)
    assert "Only the desk sees these keys: " + ", ".join(walk.hidden) in text
    assert "never says them" in text
    good = json.loads(team.scenario(walk, 0))
    task = _walk_task(ferry, walk, parse_draft(json.dumps(good), ScenarioDraft))
    assert told_problems(task, [walk]) == []  # written to the rule: passes
    key = walk.hidden[0]
    bad = {**good, "known_info": good["known_info"] + f" The sailing is {key.lower()}."}
    task = _walk_task(ferry, walk, parse_draft(json.dumps(bad), ScenarioDraft))
    (problem,) = told_problems(task, [walk])
    assert f"the customer cannot know {key}" in problem and "the agent finds the keys" in problem
    # A longer key that only starts with it (SL10091) is another value, not the key.
    longer = {**good, "known_info": good["known_info"] + f" Ref {key}1."}
    task = _walk_task(ferry, walk, parse_draft(json.dumps(longer), ScenarioDraft))
    assert told_problems(task, [walk]) == []


def test_the_blueprint_prompt_states_the_rule_and_shows_it_in_its_example() -> None:
    from maestro.agents.codegen.prompts import blueprint_messages

    text = blueprint_messages(team.BRIEF, "transport", CONFIG.clock, None, None)[-1]["content"]
    assert '"key_known": false marks a table whose keys no customer knows' in text
    example = text.split("complete example")[1].split("The language:")[0]
    assert '"key_known": false' in example  # the example marks its sailings
    assert '"name": "find_sailings"' in example  # and searches them by route


def test_a_rule_without_candidates_says_why_in_counts(ferry: Domain) -> None:
    from maestro.agents.codegen.refusals import refusal_rules

    bp = team.blueprint(CONFIG)
    (rule,) = [r for r in refusal_rules(bp) if r.operation == "request_transfer"]
    assert rule.explain is not None
    session = ferry.start_session()
    bookings = session.keys("bookings")
    confirmed = [k for k in bookings if session.require("bookings", k)["status"] == "confirmed"]
    for key in bookings:
        session.update("bookings", key, transfer_sailing_id=None)
    said = rule.explain(session)
    assert said == (
        f"of {len(bookings)} bookings (booking_id), {len(confirmed)} meet request_transfer's "
        "checks, 0 the rule, 0 both"
    )
    # One booking that has a transfer and is confirmed: the rule can be met, and it is named.
    session.update("bookings", confirmed[0], transfer_sailing_id="SL1001")
    said = rule.explain(session)
    assert f"1 the rule, 1 both ({confirmed[0]})" in said and "no walk from them" in said
