"""The tool dependency graph and its walks: edges from probed outputs to typed inputs; walks that
start from existing entities, end in a state-changing write, replay to their expected state, and
come back the same for the same seed."""

from __future__ import annotations

import pytest

from maestro.domains import Domain, library_path, load_domain, replay_calls
from maestro.domains.toolgraph import build_tool_graph
from maestro.domains.walks import Walk, sample_walks


@pytest.fixture(scope="module")
def hotel() -> Domain:
    return load_domain(library_path("hotel"), check_gold=False)


def test_toy_graph_links_outputs_to_the_inputs_they_feed(toy: Domain) -> None:
    graph = build_tool_graph(toy)
    nodes = graph.nodes
    assert nodes["cancel_order"].consumes == {"orders"}
    # "skus" is a list of the products table's key field, "sku".
    assert nodes["place_order"].consumes == {"customers", "products"}
    assert {"orders", "customers", "products"} <= nodes["list_orders"].produces
    edges = {(e.source, e.target, e.table) for e in graph.edges}
    assert ("list_orders", "cancel_order", "orders") in edges
    assert ("get_order", "place_order", "products") in edges
    # A tool never feeds itself, and a write that returns nothing the others take feeds nothing.
    assert all(e.source != e.target for e in graph.edges)
    assert not graph.successors("cancel_order") or all(
        e.table in nodes["cancel_order"].produces for e in graph.successors("cancel_order")
    )


def test_hotel_graph_reaches_reservations_from_a_guest(hotel: Domain) -> None:
    graph = build_tool_graph(hotel)
    assert "guests" in graph.nodes["find_guest"].produces
    assert graph.nodes["find_guest"].consumes == frozenset()  # it takes an email, a field
    email = next(p for p in graph.nodes["find_guest"].params if p.name == "email")
    assert email.column == ("guests", "email") and email.grounded
    edges = {(e.source, e.target) for e in graph.edges}
    assert ("find_guest", "list_guest_reservations") in edges
    assert ("list_guest_reservations", "cancel_reservation") in edges


def _assert_grounded(domain: Domain, walks: list[Walk]) -> None:
    start = domain.start_session()
    for walk in walks:
        assert walk.writes, "every walk changes something"
        for table, key in walk.entities:
            assert start.exists(table, key), f"{table}/{key} does not exist"
        replay = replay_calls(domain, None, [(s.name, s.arguments) for s in walk.steps])
        assert replay.ok, [o.content for o in replay.outcomes if not o.ok]
        assert replay.session.state_hash() == walk.expected_state_hash
        assert replay.session.state_hash() != start.state_hash()
        assert walk.changes
        # Each value the customer must give is one no earlier answer showed.
        first = walk.steps[0]
        assert set(first.arguments) <= set(walk.user_values)


@pytest.mark.parametrize("domain_name", ["toy", "hotel"])
def test_walks_are_grounded_and_replay_to_their_expected_state(
    domain_name: str, toy: Domain, hotel: Domain
) -> None:
    domain = toy if domain_name == "toy" else hotel
    walks = sample_walks(domain, build_tool_graph(domain), 6, seed=3)
    assert len(walks) == 6
    assert len({w.signature() for w in walks}) == 6
    _assert_grounded(domain, walks)


def test_hotel_walks_cover_several_writes_and_chain_reads(hotel: Domain) -> None:
    walks = sample_walks(hotel, build_tool_graph(hotel), 12, seed=0)
    assert len({s.name for w in walks for s in w.writes}) >= 3
    chained = [w for w in walks if w.reads]
    assert chained
    for w in chained:
        # A read comes before a call whose arguments its answer shows (one read may find the
        # hotel, another the guest's reservation).
        for i, read in enumerate(w.reads):
            later = [v for s in w.steps[w.steps.index(read) + 1 :] for v in s.arguments.values()]
            assert any(str(v) in read.content for v in later), (i, w.steps)


def test_walks_are_reproducible_by_seed(toy: Domain, hotel: Domain) -> None:
    def steps(d: Domain, seed: int) -> list[str]:
        walks = sample_walks(d, build_tool_graph(d, seed=seed), 5, seed=seed)
        return [repr([(s.name, s.arguments) for s in w.steps]) for w in walks]

    for domain in (toy, hotel):
        assert steps(domain, 11) == steps(domain, 11)
    hotel_graph = build_tool_graph(hotel)
    assert [w.signature() for w in sample_walks(hotel, hotel_graph, 5, seed=1)] != [
        w.signature() for w in sample_walks(hotel, hotel_graph, 5, seed=2)
    ]


def test_excluded_signatures_are_not_sampled_again(toy: Domain) -> None:
    graph = build_tool_graph(toy)
    first = sample_walks(toy, graph, 3, seed=5)
    again = sample_walks(toy, graph, 3, seed=5, exclude=[w.signature() for w in first])
    assert not {w.signature() for w in first} & {w.signature() for w in again}


def test_a_small_state_gives_fewer_walks_not_an_error(toy: Domain) -> None:
    # The toy shop allows only a handful of distinct writes (two customers, one product in stock).
    walks = sample_walks(toy, build_tool_graph(toy), 200, seed=0, attempts_per_walk=2)
    assert 0 < len(walks) < 200
    _assert_grounded(toy, walks)


def test_a_text_drawn_from_another_record_never_names_that_records_things(hotel: Domain) -> None:
    """A description or note taken from another record told that record's story (a damage
    description naming a Honda CR-V at Los Angeles for a Mazda3 returned in Washington, car
    rental run 10): texts naming things the conversation does not hold are left out."""
    from maestro.domains.toolgraph import Scope, _own_story

    session = hotel.start_session()
    scope = Scope.of(hotel, session)
    [account] = session.scan("loyalty_accounts", lambda r: r["loyalty_id"] == "LK1046278")
    scope.known.append(("loyalty_accounts", "LK1046278", account))
    own = "Reward stay AUS 2026-02-01 to 2026-02-03"
    scope.known.append(("loyalty_transactions", "LTX", {"note": own, "reservation_id": None}))
    other = "Reward stay SAN 2026-03-25 to 2026-03-28"  # another guest's stay
    told_by_name = "Upgrade approved by Michael Jones"  # a guest the conversation is not about
    plain = "Balance carried forward"
    short = ["SAN", 12, None]  # values, not stories: kept as they are
    kept = _own_story(scope, [other, told_by_name, plain, own, *short])
    assert kept == [plain, own, *short]


def test_a_text_naming_another_records_sum_of_money_is_left_out(hotel: Domain) -> None:
    """The bank's dispute reasons were other disputes' ("this $321.00 charge is unauthorized"
    for a charge of $339.70, bank run of 2026-12-03): a sum the database holds but the
    conversation does not is another record's story."""
    from maestro.domains.toolgraph import Scope, _db_names, _own_story, numbers

    session = hotel.start_session()
    scope = Scope.of(hotel, session)
    [account] = session.scan("loyalty_accounts", lambda r: r["loyalty_id"] == "LK1046278")
    scope.known.append(("loyalty_accounts", "LK1046278", account))
    _, amounts = _db_names(hotel)
    held = set(numbers(account))
    foreign = sorted(a for a in amounts - held if a >= 10)[0]
    mine = sorted(held)[-1]
    absent = next(x / 100 for x in range(1001, 99999) if x / 100 not in amounts)
    other = f"I never stayed there; this ${foreign:,.2f} charge is not mine"
    own = f"Please explain the {mine:.2f} on my account"
    made_up = f"A refund of ${absent:.2f} was promised to me"
    assert _own_story(scope, [other, own, made_up]) == [own, made_up]


def test_the_names_a_text_may_mention_are_names_not_phrases(hotel: Domain) -> None:
    from maestro.domains.toolgraph import _db_names

    names, amounts = _db_names(hotel)
    assert amounts and all(isinstance(a, float) for a in amounts)
    assert {"austin", "larkspur boston seaport", "g1001", "michael", "2026-01-18"} <= names
    assert "near the elevator" not in names  # a phrase (a preference), not a name
    assert "checked_out" not in names and "2 queen beds" not in names


def test_a_story_of_another_record_is_told_again_of_the_conversations_own() -> None:
    """Every bank dispute reason named another charge, so after the sums filter no dispute
    could be walked: a reason is told again with the own transaction's merchant and amount."""
    from maestro.domains.toolgraph import _retell

    other = {"transaction_id": "TX1054", "merchant": "Starbucks", "amount": 17.59, "card": "C1"}
    own = {"transaction_id": "TX1027", "merchant": "Target", "amount": 1166.46, "card": "C1"}
    text = "Did not dine at Starbucks; this $17.59 charge (TX1054) is unauthorized."
    assert _retell(text, other, own) == (
        "Did not dine at Target; this $1,166.46 charge (TX1027) is unauthorized."
    )
    assert _retell("No names here at all", other, own) == "No names here at all"


def test_a_note_of_another_request_is_drawn_retold_for_the_own_request() -> None:
    from maestro.domains.toolgraph import ParamSource, Scope, _db_names, _retold

    energy = load_domain(library_path("energy"), check_gold=False)
    session = energy.start_session()
    scope = Scope.of(energy, session)
    key = energy.tables["service_requests"].key_field
    requests = list(session.scan("service_requests"))
    mine = requests[-1]
    scope.known.append(("service_requests", mine[key], mine))
    p = ParamSource("note", True, None, column=("adjustments", "note"))
    told = _retold(scope, p)
    assert told and all(mine[key] in t for t in told), told
    names, _ = _db_names(energy)
    others = {r[key].casefold() for r in requests if r[key] != mine[key]} & names
    assert not any(o in t.casefold() for t in told for o in others)


def test_a_text_of_the_customers_other_record_is_not_drawn_for_this_one() -> None:
    """The bank's walk disputed a $12.78 Target charge with the reason of the customer's own
    dispute of a $221.73 Home Depot charge (2026-12-04, the reviewer dropped it): a text held by
    the conversation still told another record's story. A text is drawn for the record the
    call names (told again of it), or names nothing of any record."""
    import random
    import re

    from maestro.domains.toolgraph import ParamSource, Scope, fill

    energy = load_domain(library_path("energy"), check_gold=False)
    session = energy.start_session()
    adjustment = session.require("adjustments", "ADJ00001")
    assert adjustment["note"] == "Goodwill credit for SR70010"
    # A second request of the same customer's, the one the call is about.
    other = dict(session.require("service_requests", "SR70010"))
    mine = "SR79999"
    session.put("service_requests", {**other, "request_id": mine, "kind": "meter_fault"})
    # add_adjustment(request_id, note), the request drawn first as a tool's signature has it.
    params = [
        ParamSource("request_id", True, None, table="service_requests"),
        ParamSource("note", True, None, column=("adjustments", "note")),
    ]
    drawn = []
    for seed in range(30):
        scope = Scope.of(energy, session)
        scope.add("accounts", adjustment["account_id"])
        scope.known.append(("adjustments", "ADJ00001", adjustment))  # the customer's own
        args = fill(
            scope, params, random.Random(seed), optional_rate=0, pinned={"request_id": [mine]}
        )
        assert args is not None and args["request_id"] == mine
        drawn.append(args["note"])
    assert all(isinstance(v, str) for v in drawn), drawn
    named = {code for v in drawn for code in re.findall(r"SR\d+", v)}
    assert named <= {mine}, named  # never SR70010 (the held record's) nor anyone else's


def test_a_write_few_records_accept_gets_its_tries_before_the_easy_ones_repeat(
    hotel: Domain,
) -> None:
    """An airline's bag purchase grounds one try in five (a booking confirmed, departing after
    tomorrow, under its cabin's limit): it went uncovered while a phone update was walked three
    times. Here the first 15 walks of a cancellation are refused: it still gets its walk."""
    graph = build_tool_graph(hotel)
    for seed in range(3):
        tries = 0

        def keep(walk: Walk) -> bool:
            nonlocal tries
            if walk.writes[0].name != "cancel_reservation":
                return True
            tries += 1
            return tries > 15

        walks = sample_walks(hotel, graph, len(graph.writes()), seed=seed, keep=keep)
        assert "cancel_reservation" in {s.name for w in walks for s in w.writes}, seed
