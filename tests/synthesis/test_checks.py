"""The unit tests derived from each kind of operation, run in the real sandbox: the good tools
pass them, and each wrong tool fails with a line that says what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maestro.agents.codegen.checks import operation_tests
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.codegen.verify import run_tests
from maestro.domains.sandbox import load_sandboxed_domain
from tests.synthesis import scripted_team as team

CONFIG = SynthesisConfig()


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ferry")
    for name, text in team.package_files("checks", CONFIG).items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def failures(package: Path, name: str, code: str) -> list[str]:
    """The derived tests of one operation, run against ``code`` in place of its tool."""
    bp = team.blueprint(CONFIG)
    functions = {op.name: normalise_tool(bp, op, team.TOOLS[op.name]) for op in bp.operations}
    functions[name] = normalise_tool(bp, bp.operation(name), code)
    (package / "tools.py").write_text(tools_source(bp, functions), encoding="utf-8")
    db = json.loads((package / "db.json").read_text())
    tests = operation_tests(bp, bp.operation(name), db)
    with load_sandboxed_domain(package, check_gold=False) as domain:
        return run_tests(domain, tests)


def test_the_good_tools_pass_every_derived_test(package: Path) -> None:
    for name, code in team.TOOLS.items():
        if name != "get_refund":
            assert failures(package, name, code) == [], name


WRONG = [
    # lookup: the date of birth is not checked, so anyone with the email gets in.
    (
        "find_passenger",
        """def find_passenger(db, email, date_of_birth):
    found = db.find("passengers", email=email)
    if not found:
        raise ToolError("no such passenger")
    return found[0]""",
        "find_passenger: refuses when date_of_birth does not match",
    ),
    # list: an unknown passenger gives an empty list instead of an error.
    (
        "list_passenger_bookings",
        """def list_passenger_bookings(db, passenger_id):
    return db.find("bookings", passenger_id=passenger_id)""",
        "list_passenger_bookings: refuses an unknown passenger_id",
    ),
    # create: the seat is not taken from the sailing.
    (
        "book_sailing",
        team.TOOLS["book_sailing"].replace(
            '    db.update("sailings", sailing_id, seats_left=sailing["seats_left"] - 1)\n', ""
        ),
        "seats_left is 1, expected 0",
    ),
    # create: a key of its own making, not the table's next one.
    (
        "book_sailing",
        team.TOOLS["book_sailing"].replace(
            'db.new_id("bookings", "BK")', '"booking-" + sailing_id'
        ),
        "the new key 'booking-",
    ),
    # a clock edge: cancelling 23 hours before departure is let through (day N+1 of the rule).
    (
        "cancel_booking",
        team.TOOLS["cancel_booking"].replace("timedelta(hours=24)", "timedelta(hours=23)"),
        "refuses when booking_id.sailing_id.departs_at is '2026-01-06T08:59:00'",
    ),
    # a clock edge the other way: a claim on day 30 exactly is refused (> instead of >=).
    (
        "claim_cancelled_sailing_refund",
        team.TOOLS["claim_cancelled_sailing_refund"].replace(
            'if datetime.fromisoformat(sailing["departs_at"]) < db.now() - timedelta(days=30):',
            'if datetime.fromisoformat(sailing["departs_at"]) <= db.now() - timedelta(days=30):',
        ),
        "claim_cancelled_sailing_refund: succeeds when every check passes (at its boundary)",
    ),
    # an effect from another record: the refund is not the fare paid.
    (
        "claim_cancelled_sailing_refund",
        team.TOOLS["claim_cancelled_sailing_refund"].replace(
            '"amount": booking["fare_paid"]', '"amount": 0.0'
        ),
        ".amount is 0.0, expected",
    ),
    # a precondition on a flag is ignored.
    (
        "add_vehicle",
        team.TOOLS["add_vehicle"].replace(
            '    if booking["vehicle"]:\n        raise ToolError("the booking already has a vehicle")\n',
            "",
        ),
        "add_vehicle: refuses when booking_id.vehicle is True",
    ),
    # a free-valued update stores something else than the parameter.
    (
        "update_phone",
        team.TOOLS["update_phone"].replace("phone=phone", "phone=phone.strip()[:6]"),
        ".phone is 'as agr', expected 'as agreed on the phone'",
    ),
    # the tool enforces a rule the agent must uphold, so no refusal task could be made.
    (
        "cancel_booking",
        team.TOOLS["cancel_booking"].replace(
            '    db.update("bookings", booking_id, status="cancelled")',
            '    if booking["vehicle"]:\n        raise ToolError("vehicles cancel at the port")\n'
            '    db.update("bookings", booking_id, status="cancelled")',
        ),
        "still succeeds when the agent rule 'Bookings with a vehicle",
    ),
    # a read that crashes on an unknown key instead of a ToolError.
    (
        "get_sailing",
        """def get_sailing(db, sailing_id):
    return db.get("sailings", sailing_id)["route"] and db.get("sailings", sailing_id)""",
        "get_sailing: refuses an unknown sailing_id: get_sailing(sailing_id='SL0000') should raise "
        "ToolError but ended with exception",
    ),
]


@pytest.mark.parametrize(("name", "code", "expected"), WRONG, ids=[w[2][:40] for w in WRONG])
def test_a_wrong_tool_fails_its_derived_tests(
    package: Path, name: str, code: str, expected: str
) -> None:
    found = failures(package, name, code)
    assert any(expected in line for line in found), found


def test_each_kind_gets_its_tests_with_the_clock_edges() -> None:
    bp = team.blueprint(CONFIG)
    files = team.package_files("checks", CONFIG)
    db = json.loads(files["db.json"])
    names = {op.name: [t.name for t in operation_tests(bp, op, db)] for op in bp.operations}
    assert names["find_passenger"][1:] == [
        "find_passenger: refuses when email does not match ('xmaren.okafor@gmail.com')",
        "find_passenger: refuses when date_of_birth does not match ('1984-03-13')",
    ]
    cancel = {t.name: t for t in operation_tests(bp, bp.operation("cancel_booking"), db)}
    success = cancel["cancel_booking: succeeds when every check passes (at its boundary)"]
    # Day N: departure exactly 24 hours from the clock is still allowed...
    assert ("sailings", "SL1001", {"departs_at": "2026-01-06T09:00:00"}) in success.setup
    broken = [t for t in cancel.values() if "departs_at is '2026-01-06T08:59:00'" in t.name]
    assert len(broken) == 1 and not broken[0].expect_ok  # ...and just past it is not.
    assert [e.field for e in success.expect if e.key is None] == [
        "booking_id",
        "amount",
        "reason",
        "status",
        "requested_on",
    ]
    assert [(a.name, a.table) for a in success.creates] == [("new", "refunds")]


def test_a_rule_met_two_hops_away_is_met_from_a_record_that_has_them() -> None:
    """A capable model's rental rule (no new reservation with an open damage charge, counted
    through the charge's rental's reservation) crashed the data stage (RecursionError) and,
    once not crashing, was called one that never applies: the first customer had no rental."""
    raw = json.loads(json.dumps(team.BLUEPRINT))
    raw["agent_rules"].append(
        {
            "operation": "book_sailing",
            "rule": "A passenger with a cancelled vehicle booking books at the port.",
            "refuse_when": [
                {
                    "check": "count(refunds where booking_id.passenger_id = $passenger_id and "
                    "booking_id.vehicle = true) >= 1"
                }
            ],
        }
    )
    bp = team.blueprint(CONFIG, raw)
    db = json.loads(team.package_files("hops", CONFIG, raw)["db.json"])
    first = sorted(db["passengers"])[0]
    assert not any(
        db["bookings"][r["booking_id"]]["passenger_id"] == first for r in db["refunds"].values()
    )  # the first passenger has no refund: the rule is met from another one
    tests = operation_tests(bp, bp.operation("book_sailing"), db)
    applies = [t for t in tests if "agent rule 'A passenger with a cancelled" in t.name]
    assert len(applies) == 1 and applies[0].arguments["passenger_id"] != first
