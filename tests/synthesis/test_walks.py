"""Tasks a person would write, checked on the scripted ferry line's walks and on its finished
tasks: one customer per task, found first by their own identifiers; no ordinary task asks for
what an agent rule forbids or for a change to what already holds; every parameter takes values
of its own field; a refusal's customer gives their own identity. These are what a capable
model's review refused in a mobile carrier's synthesis (issue 12's relay check)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.codegen.guide import parameter_fields, walk_guide
from maestro.agents.codegen.refusals import refusal_rules
from maestro.agents.codegen.scenario_prompts import refusal_prompt
from maestro.agents.codegen.scenarios import answered_by, is_tool_refusal, plan_walks
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains import Domain
from maestro.domains.facts import states_fact
from maestro.domains.models import Action, Task
from maestro.domains.sandbox import load_sandboxed_domain
from maestro.domains.store import Session
from maestro.domains.toolgraph import Scope, build_tool_graph, fill
from maestro.domains.walks import Walk, sample_walks, walk_request
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig(max_iterations=2)


@pytest.fixture(scope="module")
def ferry() -> Iterator[Domain]:
    with team.loaded("walks", CONFIG) as domain:
        yield domain


def owner_of(domain: Domain, session: Session, calls: list[Action]) -> tuple[str, str]:
    """The one passenger every record the calls name belongs to (2: one customer per task)."""
    bp = team.blueprint(CONFIG)
    scope = Scope.of(domain, session, walk_guide(bp).people)
    owners: set[tuple[str, str]] = set()
    for a in calls:
        spec = domain.toolkit.specs[a.name]
        for name, value in a.arguments.items():
            table = next(
                (
                    t
                    for t, s in domain.tables.items()
                    if name in (s.key_field, f"new_{s.key_field}")
                ),
                None,
            )
            if table and isinstance(value, str) and spec and session.exists(table, value):
                owners |= scope.owners(table, value)
    assert len(owners) == 1, f"the calls {[(a.name, a.arguments) for a in calls]} concern {owners}"
    (owner,) = owners
    return owner


def assert_a_person_would_ask(domain: Domain, task: Task) -> None:
    """What a careful reviewer checks of one task; the numbers are the relay check's findings."""
    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    assert guide.forbids is not None
    session = domain.start_session(task)
    crit = task.evaluation_criteria
    if is_tool_refusal(task):
        # The tool refuses the request: the gold is the identity check with the customer's own
        # identifiers, which the customer knows, and nothing changes.
        (first,) = crit.actions
        assert first.name == "find_passenger", task.id
        (person,) = session.find("passengers", **first.arguments)
        known = task.user_scenario.instructions.known_info or ""
        assert all(str(v) in known for v in first.arguments.values()), (task.id, known)
        assert not crit.forbidden_actions and crit.communicate_info, task.id
        return
    asked = answered_by(task)  # an information request's read is not in its gold
    calls = crit.actions if task.category != "refusal" else crit.forbidden_actions
    calls = [*calls, asked] if asked else calls
    person = session.require(*owner_of(domain, session, calls))
    identity = {"email": person["email"], "date_of_birth": person["date_of_birth"]}
    # 6: a parameter that fills a field takes that field's values (a seat note is never a
    # refund's reason), and a lookup's the record's own.
    # An identifying field (a phone, an email) takes a new value of the customer's own shape
    # that nobody holds, never another customer's.
    from maestro.domains.toolgraph import _identifying

    for a in calls:
        fresh = guide.fresh.get(a.name, frozenset())
        for param, (table, field) in parameter_fields(bp, bp.operation(a.name)).items():
            column = [r[field] for r in session.scan(table) if r.get(field) is not None]
            if param in fresh and _identifying(column):
                assert a.arguments[param] not in set(column), (task.id, a.name, param)
                continue
            assert a.arguments[param] in set(column), (task.id, a.name, param, a.arguments[param])
    if task.category == "refusal":
        # 4: the customer gives their own identity, and the rule forbids the call right now.
        known = task.user_scenario.instructions.known_info or ""
        assert all(str(v) in known for v in identity.values()), (task.id, known, identity)
        (forbidden,) = crit.forbidden_actions
        assert guide.forbids(forbidden.name, forbidden.arguments, session), task.id
        return
    # 7: the identity check comes first, with the customer's own identifiers.
    first, *writes = crit.actions
    assert (first.name, first.arguments) == ("find_passenger", identity), task.id
    if task.category == "read":
        # An information request: one read about the customer's own records, nothing changed,
        # and its answer holds every fact the agent must tell, which the customer does not know.
        assert writes == [] and asked is not None, task.id  # the gold is the identity check
        before = session.state_hash()
        out = domain.toolkit.call(session, asked.name, asked.arguments)
        assert out.ok and out.kind == "read" and session.state_hash() == before, task.id
        known = task.user_scenario.instructions.known_info or ""
        for fact in crit.communicate_info:
            assert states_fact(out.content, fact) and not states_fact(known, fact), (task.id, fact)
        return
    for a in writes:
        # 1: no agent rule forbids it on the state it runs on; 8: it changes what it names.
        assert not guide.forbids(a.name, a.arguments, session), (task.id, a.name, a.arguments)
        if a.name == "request_transfer":
            booking = session.require("bookings", a.arguments["booking_id"])
            current = (booking["sailing_id"], booking["transfer_sailing_id"])
            assert a.arguments["new_sailing_id"] not in current, (task.id, a.arguments)
        before = session.state_hash()
        out = domain.toolkit.call(session, a.name, a.arguments)
        assert out.ok and session.state_hash() != before, (task.id, a.name, out.content)


def as_task(walk: Walk, refusal: bool) -> Task:
    """The task a walk becomes (what ``_walk_task`` / ``_refusal_task`` keep of it)."""
    known = " ".join(str(v) for v in walk.user_values.values())
    body: dict[str, Any] = {
        "id": "t",
        "user_scenario": {
            "instructions": {
                "domain": "ferry",
                "reason_for_call": "r",
                "known_info": known,
                "task_instructions": "t",
            }
        },
    }
    if refusal:
        step = walk.writes[0]
        body["evaluation_criteria"] = {
            "forbidden_actions": [
                {"action_id": "f1", "name": step.name, "arguments": step.arguments}
            ]
        }
        body["category"] = "refusal"
    else:
        body["evaluation_criteria"] = {
            "actions": [
                {"action_id": f"a{i}", "name": s.name, "arguments": s.arguments}
                for i, s in enumerate(walk.required)
            ]
        }
    return Task.model_validate(body)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_walks_keep_to_one_customer_their_identity_and_the_rules(ferry: Domain, seed: int) -> None:
    bp = team.blueprint(CONFIG)
    walks, plans = plan_walks(
        ferry, n=12, seed=seed, refusals=3, rules=refusal_rules(bp), guide=walk_guide(bp)
    )
    assert len(walks) == 12 and all(len(p.group) == 1 for p in plans)
    # 5: a rule's refusal shows one candidate, the one its rule forbids.
    assert [p.rule.operation for p in plans if p.rule] == [
        r["operation"] for r in bp.model_dump()["agent_rules"]
    ]
    for walk in walks:
        assert_a_person_would_ask(ferry, as_task(walk, refusal=False))
    for plan in plans:
        assert_a_person_would_ask(ferry, as_task(plan.group[0], refusal=True))
        assert plan.rule is not None
        text = refusal_prompt(ferry, plan.group, plan.rule.rule)
        assert "The customer asks for candidate 1 today, and the policy forbids it" in text
        assert "2. " not in text.split("# The request")[1].split("# Records")[0]
        assert "Pick one candidate" not in text
    # Where the walks go: every write the desk offers, and a read that finds a booking's key.
    assert {s.name for w in walks for s in w.writes} >= {
        "book_sailing",
        "cancel_booking",
        "request_transfer",
    }


def test_refusals_go_to_different_customers_while_the_data_has_them(ferry: Domain) -> None:
    """The car rental's drafts showed one customer's expired licence in 3 of 8 refusals."""
    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    for rule in refusal_rules(bp)[1:]:  # before: 2 and 3 repeats over these six seeds
        for seed in range(6):
            _, plans = plan_walks(ferry, n=0, seed=seed, refusals=4, rules=[rule], guide=guide)
            owners = [p.group[0].owner for p in plans if p.group]
            assert len(owners) == 4 and None not in owners
            assert len(set(owners)) == 4, (rule.operation, seed, owners)


def test_a_rule_that_counts_the_customers_records_starts_from_customers_it_applies_to(
    tmp_path: Path,
) -> None:
    """A capable model's rental rule (no new reservation with an open damage charge, counted
    through the charge's rental's reservation) found no candidate: its walks started from any
    customer, and 40 attempts found none with an open charge."""
    raw = json.loads(json.dumps(team.BLUEPRINT))
    raw["agent_rules"] = [
        {
            "operation": "book_sailing",
            "rule": "A passenger with a refunded vehicle booking books at the port.",
            "refuse_when": [
                {
                    "check": "count(refunds where booking_id.passenger_id = $passenger_id and "
                    "booking_id.vehicle = true) >= 1"
                }
            ],
        }
    ]
    bp = team.blueprint(CONFIG, raw)
    for name, text in team.package_files("counted", CONFIG, raw).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with load_sandboxed_domain(tmp_path, check_gold=False) as domain:
        start = domain.start_session()
        (rule,) = refusal_rules(bp)
        anchors = rule.anchors(start)
        assert anchors, "the rule's records are where its refusals start"
        refunded = {
            start.require("bookings", r["booking_id"])["passenger_id"]
            for r in start.scan("refunds")
            if start.require("bookings", r["booking_id"])["vehicle"]
        }
        assert {key for _, key in anchors} == refunded
        _, plans = plan_walks(domain, n=0, seed=0, refusals=3, rules=[rule], guide=walk_guide(bp))
        assert all(p.group for p in plans)


def test_no_write_sets_a_field_to_what_it_holds(ferry: Domain) -> None:
    """The food delivery check's address "changed" to the order's own address: the write
    changed the state (another effect) but asked for nothing. The guide calls it pointless, and
    the walks draw a value the customer's records do not hold there."""
    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    assert guide.pointless is not None and guide.fresh["update_phone"] == {"phone"}
    assert guide.fresh["book_sailing"] == frozenset()  # a new record's values may be the usual
    session = ferry.start_session()
    key = sorted(session.keys("passengers"))[0]
    phone = session.require("passengers", key)["phone"]
    assert guide.pointless("update_phone", {"passenger_id": key, "phone": phone}, session)
    assert not guide.pointless("update_phone", {"passenger_id": key, "phone": "+1 0"}, session)
    node = build_tool_graph(ferry, guide=guide).nodes["update_phone"]
    for seed in range(20):
        rng = random.Random(seed)
        scope = Scope.of(ferry, session, guide.people)
        assert scope.anchor("passengers", rng, key=key)
        args = fill(scope, node.params, rng, optional_rate=0.0)
        assert args is not None and args["passenger_id"] == key
        assert args["phone"] != phone, seed


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_walks_spread_over_requests_before_repeating_one(ferry: Domain, seed: int) -> None:
    """4 of 10 food delivery tasks were one promo request by four customers. A request already
    made (the same writes and shared records, whoever asks) waits until no new one is found."""
    guide = walk_guide(team.blueprint(CONFIG))
    graph = build_tool_graph(ferry, guide=guide)
    walks = sample_walks(ferry, graph, 10, seed=seed, guide=guide)
    requests = Counter(walk_request(ferry, graph, w) for w in walks)
    assert len(walks) == 10 and max(requests.values()) == 1, requests
    # Where one request is all there is, it is repeated rather than leaving tasks unmade.
    again = sample_walks(
        ferry, graph, 4, seed=seed, guide=guide, tools=["add_vehicle"], max_writes=1
    )
    assert len(again) == 4 and len({walk_request(ferry, graph, w) for w in again}) == 1


def test_a_new_email_or_phone_is_no_other_customers() -> None:
    """A capable reviewer found customers "changing" their email to another patient's: a new
    value of an identifying field is made from the customer's own, and nobody holds it."""
    import random

    from maestro.domains.toolgraph import _fresh_variant, _identifying

    taken = {"maria.okafor@gmail.com", "maria.okafor27@gmail.com", "617-482-3391", "617-482-0000"}
    rng = random.Random(3)
    email = _fresh_variant("maria.okafor@gmail.com", taken, rng)
    assert email is not None and email not in taken
    assert email.startswith("maria.okafor") and email.endswith("@gmail.com")
    phone = _fresh_variant("617-482-3391", taken, rng)
    assert phone is not None and phone not in taken and phone.startswith("617-482-")
    assert _fresh_variant("Harbour View", taken, rng) is None  # no shape to vary
    assert _identifying(["a@x.com", "b@x.com", "c@x.com", "d@x.com", "e@x.com"])
    assert not _identifying(["open", "open", "closed", "open", "closed"])


def test_a_new_address_is_one_place_not_fields_of_several() -> None:
    """A capable model's card desk got "Raleigh, NC 24131" (a Virginia ZIP code): the fields of
    a new address were drawn from different customers' records."""
    import random

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, _drawn_together, fill

    hotel = load_domain(library_path("hotel"), check_gold=False)
    session = hotel.start_session()
    scope = Scope.of(hotel, session)
    params = [
        ParamSource(name, True, None, column=("guests", name), fresh=True)
        for name in ("address_line", "city", "state", "postal_code")
    ]
    for seed in range(20):
        drawn = _drawn_together(scope, params, random.Random(seed), {})
        assert set(drawn) == {"address_line", "city", "state", "postal_code"}
        line, city, state, postal = (
            drawn[f][0] for f in ("address_line", "city", "state", "postal_code")
        )
        guests = session.scan("guests")
        source = [
            g for g in guests if (g["city"], g["state"], g["postal_code"]) == (city, state, postal)
        ]
        assert source, (city, state, postal)  # one record's city, state and ZIP code
        assert line not in {g["address_line"] for g in guests}  # a house nobody lives in...
        street = lambda text: " ".join(w for w in text.split() if not any(c.isdigit() for c in w))  # noqa: E731
        assert any(street(line) == street(g["address_line"]) for g in source)  # ...on that street
    # The pharmacy's city was a choice (a Literal of its five towns) and was drawn alone: "a
    # Lakeside address with Fairview's ZIP" (2026-12-04, the reviewer dropped it).
    cities = tuple(sorted({g["city"] for g in session.scan("guests")}))
    chosen = [
        ParamSource("city", True, None, column=("guests", "city"), choices=cities, fresh=True),
        ParamSource("postal_code", True, None, column=("guests", "postal_code"), fresh=True),
    ]
    for seed in range(20):
        args = fill(scope, chosen, random.Random(seed), optional_rate=0)
        assert args is not None
        assert any(
            (g["city"], g["postal_code"]) == (args["city"], args["postal_code"])
            for g in session.scan("guests")
        ), args


def test_a_rule_on_a_parameter_against_the_clock_is_aimed_at_inside_its_window() -> None:
    """A capable model's rental rule (a pickup less than 2 hours away is made at the counter)
    found no candidate: only constants were aimed at, and random pickups were days away."""
    from maestro.agents.codegen.blueprint import Condition
    from maestro.agents.codegen.refusals import _aimed

    bp = team.blueprint(CONFIG)
    op = bp.operation("book_sailing")
    op = op.model_copy(update={"params": {**op.params, "pickup_at": "datetime", "amount": "float"}})
    rules = [
        Condition(check="$pickup_at < now + hours(2)"),
        Condition(check="1000 < $amount"),
    ]
    aimed = _aimed(op, rules, CONFIG.clock)
    limit = CONFIG.clock + timedelta(hours=2)
    picks = [datetime.fromisoformat(v) for v in aimed["pickup_at"]]
    assert picks and all(CONFIG.clock < p < limit for p in picks)
    assert aimed["amount"] and all(a > 1000 for a in aimed["amount"])


def test_two_writes_are_a_pair_a_customer_brings(ferry: Domain) -> None:
    """Issue 20: "extend a rental, then cancel it" was a task; a second write now follows the
    first's ``then`` (cancel a booking, then book another sailing)."""
    from dataclasses import replace

    bp = team.blueprint(CONFIG)
    guide = walk_guide(bp)
    assert guide.flows is not None and guide.flows["cancel_booking"] == ("book_sailing",)

    def pairs(g: Any) -> list[tuple[str, str]]:
        out = []
        for seed in range(4):
            walks, _ = plan_walks(ferry, n=12, seed=seed, guide=g)
            out += [(w.writes[0].name, w.writes[1].name) for w in walks if len(w.writes) == 2]
        return out

    before = pairs(replace(guide, flows=None))
    assert any(p != ("cancel_booking", "book_sailing") for p in before), before
    after = pairs(guide)
    assert after and set(after) == {("cancel_booking", "book_sailing")}, after


def test_names_of_one_record_are_drawn_from_one_record() -> None:
    """A capable model's pharmacy transfer came from "Walgreens #16738" with the phone of
    another pharmacy (2026-12-04): a new record's names were drawn field by field."""
    import random

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, fill

    hotel = load_domain(library_path("hotel"), check_gold=False)
    session = hotel.start_session()
    # The dates of the record come with its names (an extra driver's birth date was drawn
    # alone: a licence on file for a driver born in 1990 went to one born in 1957).
    born = ParamSource(
        "date_of_birth", True, None, column=("guests", "date_of_birth"), text_format="date"
    )
    fields = ("first_name", "last_name", "email", "date_of_birth")
    params = [
        ParamSource(name, True, None, column=("guests", name))
        for name in ("first_name", "last_name", "email")
    ] + [born]
    guests = list(session.scan("guests"))
    assert len({g["last_name"] for g in guests}) > 1
    for seed in range(30):
        scope = Scope.of(hotel, session)
        args = fill(scope, params, random.Random(seed), optional_rate=0)
        assert args is not None
        assert any(tuple(g[f] for f in fields) == tuple(args[f] for f in fields) for g in guests), (
            args
        )
    # A date alone is no record's: drawn as before (a new booking's dates are not another's).
    alone = {
        fill(Scope.of(hotel, session), [born], random.Random(s), optional_rate=0)["date_of_birth"]
        for s in range(10)
    }  # type: ignore[index]
    assert len(alone) > 1
    # One field twice (a transfer from one guest to another, by email) is not one record.
    twice = [
        ParamSource("from_email", True, None, column=("guests", "email")),
        ParamSource("to_email", True, None, column=("guests", "email")),
    ]
    pairs = {
        tuple(fill(Scope.of(hotel, session), twice, random.Random(s), optional_rate=0).values())
        for s in range(30)
    }
    assert any(a != b for a, b in pairs)


def test_a_new_value_naming_its_person_is_the_customers_own_varied() -> None:
    """The car rental's renewed licence was another customer's (PARRY605169DM9ED for Ellie
    Richardson, 2026-12-04): the licence and its expiry were drawn together from another record,
    and only a street line or a phone was varied."""
    import random
    import re

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, fill

    hotel = load_domain(library_path("hotel"), check_gold=False)
    session = hotel.start_session()
    guests = list(session.scan("guests"))
    emails = {g["email"] for g in guests}
    params = [
        ParamSource("guest_id", True, None, table="guests"),
        ParamSource("email", True, None, column=("guests", "email"), fresh=True),
        ParamSource(
            "marketing_opt_in",
            True,
            None,
            column=("guests", "marketing_opt_in"),
            fresh=True,
            scalar="bool",
        ),
    ]
    for seed, guest in enumerate(guests[:20]):
        scope = Scope.of(hotel, session)
        assert scope.add("guests", guest["guest_id"])  # the identity lookup found them
        args = fill(
            scope,
            params,
            random.Random(seed),
            optional_rate=0,
            pinned={"guest_id": [guest["guest_id"]]},
        )
        assert args is not None and args["email"] not in emails, args
        local, _, host = guest["email"].partition("@")
        assert re.fullmatch(
            re.escape(re.sub(r"[0-9]+$", "", local)) + r"[0-9]+@" + re.escape(host), args["email"]
        ), (guest["email"], args["email"])


def test_a_new_address_is_another_house_in_the_same_place() -> None:
    """A pharmacy's corrected delivery address was the customer's own with its last digits
    changed: the ZIP code ("San Jose, CA 95112" became "CA 96225", 2026-12-04); an address is
    varied in its house number, its city, state and ZIP code kept."""
    import random
    import re

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, fill

    vet = load_domain(library_path("vetclinic"), check_gold=False)
    session = vet.start_session()
    owners = list(session.scan("owners"))
    held = {o["address"] for o in owners}
    params = [
        ParamSource("owner_id", True, None, table="owners"),
        ParamSource("address", True, None, column=("owners", "address"), fresh=True),
    ]
    for seed, owner in enumerate(owners[:20]):
        scope = Scope.of(vet, session)
        assert scope.add("owners", owner["owner_id"])
        args = fill(
            scope, params, random.Random(seed), optional_rate=0,
            pinned={"owner_id": [owner["owner_id"]]},
        )  # fmt: skip
        assert args is not None and args["address"] not in held, args
        house, rest = re.match(r"(\d+)(\D.*)", owner["address"]).groups()  # type: ignore[union-attr]
        new_house, new_rest = re.match(r"(\d+)(\D.*)", args["address"]).groups()  # type: ignore[union-attr]
        assert new_rest == rest and new_house != house, (owner["address"], args["address"])
        assert len(new_house) == len(house) and not new_house.startswith("0")


def test_a_number_that_tracks_its_records_is_drawn_as_an_offset_of_the_calls_record() -> None:
    """A car rental's return was recorded at 77,994 miles for a car that went out at 19,835 two
    days before: another return's reading (2026-12-04). A field that tracks a number of the
    record it refers to (a payment's amount, of its invoice's total) is drawn as another
    record's offset, applied to the record the call names."""
    import random

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, _value

    vet = load_domain(library_path("vetclinic"), check_gold=False)
    session = vet.start_session()
    invoices = list(session.scan("invoices"))
    totals = [i["total"] for i in invoices]
    spread = max(totals) - min(totals)
    amount = ParamSource("amount", True, None, column=("payments", "amount"), scalar="float")
    far = 0
    for seed, invoice in enumerate(invoices[:40]):
        scope = Scope.of(vet, session)
        value = _value(
            scope, amount, random.Random(seed), about={"invoices": invoice["invoice_id"]}
        )
        assert isinstance(value, float)
        far += abs(value - invoice["total"]) > 0.2 * spread
    assert far <= 1, far  # drawn from other payments as they stand: 14 of 40 far off
    # Nothing to track without the call's record: one of the field's values.
    paid = {p["amount"] for p in session.scan("payments")}
    for seed in range(5):
        assert _value(Scope.of(vet, session), amount, random.Random(seed), about={}) in paid


def test_a_new_date_is_the_records_own_moved_by_whole_days() -> None:
    """A car rental's extension asked for a return 24 minutes 4 seconds later (2026-01-11
    15:00:00 became 15:24:04, 2026-12-04): a datetime was varied digit by digit as an email
    would be. A new date or time is the record's own moved by whole days."""
    import random
    from datetime import date, datetime

    from maestro.domains import library_path, load_domain
    from maestro.domains.toolgraph import ParamSource, Scope, _moved, _value

    hotel = load_domain(library_path("hotel"), check_gold=False)
    session = hotel.start_session()
    check_out = ParamSource(
        "check_out", True, None, column=("reservations", "check_out"), fresh=True,
        text_format="date",
    )  # fmt: skip
    for seed, res in enumerate(list(session.scan("reservations"))[:20]):
        scope = Scope.of(hotel, session, people=frozenset({"guests"}))
        assert scope.add("guests", res["guest_id"])
        assert scope.add("reservations", res["reservation_id"])
        new = date.fromisoformat(_value(scope, check_out, random.Random(seed)))
        assert 1 <= abs((new - date.fromisoformat(res["check_out"])).days) <= 7, (res, new)
    own = datetime(2026, 1, 11, 15, 0)
    for seed in range(20):
        moved = datetime.fromisoformat(_moved(own.isoformat(), "datetime", random.Random(seed)))  # type: ignore[arg-type]
        assert moved.time() == own.time() and 1 <= abs((moved - own).days) <= 7
    assert _moved("next Tuesday", "date", random.Random(0)) is None
