"""The data stage: the model's program makes the world in the sandbox, and the host refuses
what no program is trusted with (values outside their fields, references to nothing, broken
laws, placeholders, shares that stray, operations with nothing to do), each with a count and
examples; programs that loop, touch files or answer too much end in an error naming them."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from maestro.agents.codegen.blueprint import Blueprint
from maestro.agents.codegen.data import DataLimits, coverage_problems, world_problems
from maestro.agents.codegen.gate import placeholder_reason
from maestro.agents.codegen.generator import (
    GeneratorError,
    Sizes,
    normalise_generator,
    run_generator,
)
from maestro.agents.codegen.prompts import data_messages
from maestro.agents.codegen.state import SynthesisConfig
from maestro.domains import worldgen
from tests.synthesis import scripted_team as team

LIMITS = DataLimits(main_size=60, catalog_size=10, least=10)
SIZES = Sizes(60, 10)
Database = dict[str, dict[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def bp() -> Blueprint:
    return team.blueprint()


@pytest.fixture(scope="module")
def db(bp: Blueprint, tmp_path_factory: pytest.TempPathFactory) -> Database:
    work = tmp_path_factory.mktemp("world")
    return run_generator(bp, normalise_generator(bp, team.DATA_PROGRAM), SIZES, work, seed=0)


def with_laws(bp: Blueprint, *laws: dict[str, str]) -> Blueprint:
    raw = json.loads(bp.model_dump_json())
    raw["laws"] = list(laws)
    return Blueprint.model_validate(raw)


@pytest.mark.parametrize(
    ("value", "field", "table", "flagged"),
    [
        ("name 4", "name", "customers", True),
        ("email 4", "email", "customers", True),
        ("book title 6", "book_title", "books", True),
        ("Customer 3", "full_name", "customers", True),
        ("Lorem ipsum dolor sit amet", "notes", "orders", True),
        ("string", "city", "customers", True),
        ("ada@example.com", "email", "customers", True),
        ("<street>", "street", "stores", True),
        ("Maren Okafor", "name", "customers", False),
        ("12 Elm Street", "street", "stores", False),
        ("+44 7700 900118", "phone", "customers", False),
        ("maren.okafor@gmail.com", "email", "customers", False),
    ],
)
def test_the_gate_knows_a_placeholder_from_data(
    value: str, field: str, table: str, flagged: bool
) -> None:
    assert (placeholder_reason(value, field, table) is not None) == flagged


def test_the_programs_world_is_whole_and_its_records_agree(bp: Blueprint, db: Database) -> None:
    assert world_problems(bp, db, LIMITS) == []
    assert len(db["passengers"]) == 60 and len(db["memberships"]) == 10
    # The seeds first, under the keys the host numbers; the rest built from their parents.
    assert db["passengers"]["PS1001"]["email"] == "maren.okafor@gmail.com"
    for booking in db["bookings"].values():
        sailing = db["sailings"][booking["sailing_id"]]
        assert booking["booked_on"] <= sailing["departs_at"][:10]
        if sailing["status"] == "departed":
            assert booking["status"] == "travelled"
    for refund in list(db["refunds"].values())[4:]:
        booking = db["bookings"][refund["booking_id"]]
        assert refund["amount"] == booking["fare_paid"] and booking["status"] == "cancelled"


def test_the_same_seed_makes_the_same_world(bp: Blueprint, db: Database, tmp_path: Path) -> None:
    program = normalise_generator(bp, team.DATA_PROGRAM)
    assert run_generator(bp, program, SIZES, tmp_path, seed=0) == db
    assert run_generator(bp, program, SIZES, tmp_path, seed=1) != db


def _broken(db: Database) -> Database:
    return copy.deepcopy(db)


def test_values_outside_their_fields_and_references_to_nothing_are_counted(
    bp: Blueprint, db: Database
) -> None:
    bad = _broken(db)
    for key in ("BK1010", "BK1011", "BK1012", "BK1013"):
        bad["bookings"][key]["booked_on"] = "2024-01-01"
    bad["bookings"]["BK1020"]["sailing_id"] = "SL9999"
    problems = world_problems(bp, bad, LIMITS)
    line = next(p for p in problems if p.startswith("bookings.booked_on"))
    assert "4 of 60 record(s)" in line and "'2024-01-01' is outside 2025-09-07..2026-01-05" in line
    assert line.count("bookings/BK101") == 3  # three examples, not all
    assert any(
        "bookings/BK1020.sailing_id is 'SL9999', which names no sailings record" in p
        for p in problems
    )


def test_a_broken_law_comes_back_with_its_records(bp: Blueprint, db: Database) -> None:
    lawful = with_laws(
        bp,
        {
            "table": "refunds",
            "holds": "amount <= booking_id.fare_paid",
            "says": "No refund exceeds the fare.",
        },
        {
            "table": "bookings",
            "holds": "count(refunds where booking_id = self) <= 1",
            "says": "One refund a booking.",
        },
    )
    assert world_problems(lawful, db, LIMITS) == []
    bad = _broken(db)
    bad["refunds"]["RF1005"]["amount"] = 179.0
    bad["refunds"]["RF1006"]["booking_id"] = bad["refunds"]["RF1005"]["booking_id"]
    problems = world_problems(lawful, bad, LIMITS)
    amount = next(p for p in problems if "law refunds_1" in p)
    assert "is broken by 1 of" in amount and "refunds/RF1005 (amount = 179.0" in amount
    one = next(p for p in problems if "law bookings_2" in p)
    booking = bad["refunds"]["RF1005"]["booking_id"]
    assert f"bookings/{booking} (count(refunds where booking_id = self) = 2)" in one


def test_shares_that_stray_from_what_the_blueprint_asks_are_refused(
    bp: Blueprint, db: Database
) -> None:
    raw = json.loads(bp.model_dump_json())
    sailings = next(e for e in raw["entities"] if e["table"] == "sailings")
    sailings["shares"] = {"status": {"scheduled": 50, "departed": 30, "cancelled": 20}}
    asked = Blueprint.model_validate(raw)
    counts = {
        s: sum(r["status"] == s for r in db["sailings"].values())
        for s in ("scheduled", "departed", "cancelled")
    }
    problems = [p for p in world_problems(asked, db, LIMITS) if "shares" in p]
    pct = {s: 100 * n / 60 for s, n in counts.items()}
    far = [
        s
        for s, want in (("scheduled", 50), ("departed", 30), ("cancelled", 20))
        if abs(pct[s] - want) > 5
    ]
    assert bool(problems) == bool(far)
    for s in far:
        assert f"'{s}' {pct[s]:.0f}%" in problems[0]


def test_the_share_tolerance_the_data_prompt_states_is_the_one_the_host_holds(
    bp: Blueprint, db: Database
) -> None:
    raw = json.loads(bp.model_dump_json())
    sailings = next(e for e in raw["entities"] if e["table"] == "sailings")
    sailings["shares"] = {"status": {"scheduled": 50, "departed": 30, "cancelled": 20}}
    asked = Blueprint.model_validate(raw)
    assert not sailings.get("catalog")  # a main table: the prompt states main_size's tolerance
    limits = LIMITS
    text = data_messages(asked, limits, None, None)[-1]["content"]
    stated = re.search(r"share of status: scheduled 50%.*\(each within (\d+) points", text)
    assert stated, text
    points = int(stated.group(1))
    n = len(db["sailings"])
    assert n == 60

    def dealt(scheduled: int, departed: int) -> Database:
        out = copy.deepcopy(db)
        statuses = (["scheduled"] * scheduled + ["departed"] * departed + ["cancelled"] * n)[:n]
        for rec, status in zip(out["sailings"].values(), statuses, strict=True):
            rec["status"] = status
        return out

    def refused(d: Database) -> list[str]:
        return [p for p in world_problems(asked, d, limits) if "shares stray" in p]

    # Written to the stated rule (scheduled 50 + points, departed 30 - points): passes.
    at = round(n * (50 + points) / 100), round(n * (30 - points) / 100)
    assert not refused(dealt(*at))
    # Two records further off: refused, with the tolerance and the share named.
    off = refused(dealt(at[0] + 2, at[1] - 2))
    assert off and f"stray more than {points} points" in off[0]
    assert f"'scheduled' {100 * (at[0] + 2) / n:.0f}% (asked 50%)" in off[0]


def test_placeholders_repeated_values_and_short_tables_are_refused(
    bp: Blueprint, db: Database
) -> None:
    bad = _broken(db)
    bad["passengers"]["PS1007"]["first_name"] = "first name 7"
    for rec in bad["refunds"].values():
        rec["reason"] = "other"
    problems = world_problems(bp, bad, LIMITS)
    assert any(
        "passengers/PS1007.first_name 'first name 7' is the field's name" in p for p in problems
    )
    assert any(p.startswith("refunds.reason is 'other' in") for p in problems), problems
    short = _broken(db)
    short["passengers"] = {k: v for k, v in list(short["passengers"].items())[:5]}
    problems = world_problems(bp, short, LIMITS)
    assert any(
        p.startswith("passengers: 5 record(s); make_passengers must give at least 10")
        for p in problems
    )


def test_a_world_that_leaves_an_operation_nothing_to_do_is_sent_back(
    bp: Blueprint, db: Database
) -> None:
    bad = _broken(db)
    for rec in bad["bookings"].values():
        rec["vehicle"] = False  # no booking the vehicle rule applies to
    for rec in bad["sailings"].values():
        if rec["status"] == "cancelled":
            rec["status"] = "departed"  # no cancelled sailing to claim for
    problems = coverage_problems(bp, bad, LIMITS)
    assert any(
        line.startswith("bookings: 0 record(s) meet claim_cancelled_sailing_refund's its checks")
        for line in problems
    ), problems
    assert any("the agent rule 'Bookings with a vehicle" in line for line in problems), problems


def _program(bp: Blueprint, **bodies: str) -> str:
    parts = []
    for e in bp.entities:
        body = bodies.get(e.table, "return []")
        parts.append(f"def make_{e.table}(db, rng, n):\n    " + body.replace("\n", "\n    ") + "\n")
    return "\n".join(parts)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("while True:\n    pass", r"make_passengers failed \(timeout\)"),
        ("return [{} for _ in range(10_000_000)]", "make_passengers failed"),
        ("return [{'first_name': 'A'}] * (n + 1)", "returned 61 records, at most 60"),
        ("return {'first_name': 'A'}", "not a list of records"),
        ("return [1]", "record 0 is 1, not a dict"),
        ("open('/tmp/maestro-escape', 'w').write('x')\nreturn []", r"open\(\) is not allowed"),
        ("raise ValueError('no more names')", "no more names"),
        ("return [{'first_name': 5}]", "make_passengers failed"),
    ],
)
def test_a_bad_program_is_an_error_naming_its_function(
    bp: Blueprint, tmp_path: Path, body: str, message: str
) -> None:
    from maestro.agents.codegen import generator

    program = normalise_generator(bp, _program(bp, passengers=body))
    old = generator.TABLE_TIMEOUT_S
    generator.TABLE_TIMEOUT_S = 3.0
    try:
        with pytest.raises(GeneratorError, match=message):
            run_generator(bp, program, SIZES, tmp_path)
    finally:
        generator.TABLE_TIMEOUT_S = old
    assert not Path("/tmp/maestro-escape").exists()


def test_a_program_must_define_every_table_and_import_nothing(bp: Blueprint) -> None:
    from maestro.agents.codegen.answers import ParseError

    with pytest.raises(ParseError, match="defines no make_refunds"):
        normalise_generator(bp, _program(bp).replace("def make_refunds", "def make_refund"))
    with pytest.raises(ParseError, match="make_sailings must take"):
        normalise_generator(
            bp, _program(bp).replace("make_sailings(db, rng, n)", "make_sailings(db)")
        )
    with pytest.raises(ParseError, match="no imports"):
        normalise_generator(bp, "import os\n" + _program(bp))
    with pytest.raises(ParseError, match="finish_tickets: there is no table"):
        normalise_generator(
            bp, _program(bp) + "def finish_tickets(db, rng, record):\n    return None\n"
        )


def test_ten_thousand_records_a_table_are_made_in_seconds(bp: Blueprint, tmp_path: Path) -> None:
    program = normalise_generator(bp, team.DATA_PROGRAM)
    db = run_generator(bp, program, Sizes(2000, 10), tmp_path)
    assert len(db["bookings"]) == 2000 and len(db["passengers"]) == 2000
    limits = SynthesisConfig(records_per_table=2000).limits()
    assert world_problems(bp, db, limits) == []


@pytest.mark.parametrize("country", ["US", "GB"])
def test_a_place_is_a_real_city_with_its_own_state_postcode_and_area_code(country: str) -> None:
    rng = random.Random(7)
    cities = {c[0]: c for c in worldgen.CITIES}
    uk = {c[0]: c for c in worldgen.UK_CITIES}
    for _ in range(200):
        p = worldgen.place(rng, country)
        number = worldgen.phone(rng, p)
        if country == "US":
            _city, state, _, (low, high), codes = cities[p["city"]]
            assert p["state"] == state and low <= int(p["zip"]) <= high
            assert p["area_code"] in codes and number.startswith(p["area_code"] + "-")
            assert re.fullmatch(r"\d{3}-\d{3}-\d{4}", number)
        else:
            _city, _nation, districts, code = uk[p["city"]]
            assert p["postcode"].split()[0] in districts and number.startswith(code + " ")
            assert len(number.replace(" ", "")) == 11
    who = worldgen.person(rng)
    assert who["email"].split("@")[1] in worldgen.EMAIL_PROVIDERS
    assert re.sub(r"[^a-z]", "", who["last_name"].lower()) in who["email"]


@pytest.mark.parametrize(
    ("a", "b", "driven"),
    [
        ("Austin", "Denver", 920),
        ("Boston", "New York, NY", 215),
        ("Chicago", "Detroit", 283),
        ("Seattle", "Portland", 174),
        ("London, England", "Manchester, England", 200),
    ],
)
def test_road_miles_are_about_what_one_drives(a: str, b: str, driven: int) -> None:
    miles = worldgen.road_miles(a, b)
    assert miles is not None and 0.85 * driven <= miles <= 1.15 * driven
    assert worldgen.road_miles(b, a) == miles


def test_road_miles_know_a_place_from_its_record_and_say_what_they_cannot_know() -> None:
    rng = random.Random(3)
    p = worldgen.place(rng, state="CO")
    assert worldgen.road_miles(p, dict(p, street="1 Main Street")) == 0
    assert worldgen.road_miles("Honolulu", "Denver") is None  # no road to Hawaii
    with pytest.raises(ValueError, match="'Manchester' is in several places"):
        worldgen.road_miles("Manchester", "Boston")
    with pytest.raises(ValueError, match="'Atlantis' is not a known city"):
        worldgen.road_miles("Atlantis", "Boston")


def test_an_operation_whose_own_effects_break_a_law_is_the_blueprints_to_fix(
    bp: Blueprint, db: Database
) -> None:
    from maestro.agents.codegen.checks import effect_law_problems
    from maestro.agents.codegen.normalise import parse_blueprint

    assert effect_law_problems(bp, db) == []
    raw = copy.deepcopy(team.BLUEPRINT)
    cancel = next(o for o in raw["operations"] if o["name"] == "cancel_booking")
    cancel["requires"] = [c for c in cancel["requires"] if "count(refunds" not in c["check"]]
    careless = parse_blueprint(raw, clock=bp.clock)
    (problem,) = effect_law_problems(careless, db)
    assert problem.startswith(
        "operation cancel_booking: done as the blueprint says (cancel_booking("
    )
    assert "A booking has at most one refund pending" in problem
    assert "add the check that keeps the law" in problem


def test_the_reviewer_sees_a_sample_of_the_world_and_the_laws(bp: Blueprint, db: Database) -> None:
    from maestro.agents.codegen.data import law_report_lines, world_sample
    from maestro.agents.codegen.prompts import review_messages

    sample = world_sample(bp, db, n=20)
    assert all(len(rows) >= min(20, len(db[t])) for t, rows in sample.items())
    for booking in sample["bookings"]:  # every record shown with what it refers to
        assert any(s["sailing_id"] == booking["sailing_id"] for s in sample["sailings"])
        assert any(p["passenger_id"] == booking["passenger_id"] for p in sample["passengers"])
    laws = law_report_lines(bp, db)
    assert len(laws) == len(bp.laws) and all(line.endswith("broken by 0") for line in laws)
    text = review_messages(bp, team.POLICY, ["t"], ["x"], None, None, ["x"], sample, laws)[-1][
        "content"
    ]
    assert json.dumps(sample["bookings"][0], sort_keys=True) in text
    assert "A booking is made before its sailing departs." in text and "broken by 0" in text


def test_the_reviewer_sees_what_the_tasks_cover(bp: Blueprint) -> None:
    from maestro.agents.codegen.prompts import coverage_lines, review_messages
    from maestro.domains.models import Task

    def task(tid: str, category: str, actions: list[str], rule: str | None = None) -> Task:
        crit: dict[str, object] = {
            "actions": [
                {"action_id": f"a{i}", "name": n, "arguments": {}} for i, n in enumerate(actions)
            ]
        }
        return Task.model_validate(
            {
                "id": tid,
                "description": {"purpose": "p", "relevant_policies": rule},
                "user_scenario": {
                    "instructions": {
                        "domain": "d",
                        "reason_for_call": "r",
                        "task_instructions": "t",
                    }
                },
                "evaluation_criteria": crit,
                "category": category,
            }
        )

    rule = bp.agent_rules[0]
    tasks = [
        task("t1", "single_write", ["find_passenger", "book_sailing"]),
        task("t2", "refusal", [], f"rule 7: {rule.rule}"),
    ]
    lines = coverage_lines(bp, tasks, ["no_walk: refusal 0: no candidate", "conformance: x"])
    n = len(bp.operations)
    assert lines[0].startswith(f"operations in some task's gold: 2 of {n}; in none: ")
    assert "get_booking" in lines[0] and "book_sailing" not in lines[0].split("in none:")[1]
    assert lines[1] == "tasks by kind: refusal 1, single_write 1"
    assert lines[2].startswith(f"agent rules with a refusal task: 1 of {len(bp.agent_rules)}")
    assert rule.rule not in lines[2] and bp.agent_rules[1].rule in lines[2]
    assert lines[3] == "tasks not made, by reason: conformance 1, no_walk 1"
    text = review_messages(bp, team.POLICY, ["t"], ["x"], None, None, ["x"], coverage=lines)
    assert "What the tasks cover:\n- operations in some task's gold: 2 of" in text[-1]["content"]
    assert "no customer brings in one call" in text[-1]["content"]


# ----- what a red team proved against the program (each failed before its fix) -----------------


def _ferry_program(**replace: str) -> str:
    program = team.DATA_PROGRAM
    for old, new in replace.items():
        assert old in program, old
        program = program.replace(old, new)
    return program


def test_a_program_that_writes_another_table_is_refused(bp: Blueprint, tmp_path: Path) -> None:
    sneaky = _ferry_program(
        **{
            "def make_sailings(db, rng, n):\n": "def make_sailings(db, rng, n):\n"
            "    db.insert('passengers', {'passenger_id': 'EVIL1', 'first_name': 'E', "
            "'last_name': 'V', 'email': 'e@v.com', 'phone': '1', 'date_of_birth': "
            "'1990-01-01', 'membership_id': 'MB1001'})\n"
        }
    )
    with pytest.raises(GeneratorError, match=r"make_sailings wrote to \['passengers'\]"):
        run_generator(bp, normalise_generator(bp, sneaky), SIZES, tmp_path)


def test_records_with_fields_the_table_lacks_are_refused(bp: Blueprint, db: Database) -> None:
    bad = copy.deepcopy(db)
    bad["sailings"]["SL1002"]["smuggled"] = {"not": "declared"}
    problems = world_problems(bp, bad, LIMITS)
    assert any(
        "sailings: fields the table does not have" in p and "['smuggled']" in p for p in problems
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("def len(x):\n    return 0\n", "'len' is a name the host's part of the program uses"),
        ("_MAKERS = {}\n", "'_MAKERS' is a name the host's part"),
        ("print('loaded')\n", "only functions and constants at the top level"),
        ("LIMIT = max(1, 2)\n", "a top-level constant is a literal"),
        ("def helper(db):\n    from .models import Sailing\n    return Sailing\n", "no imports"),
    ],
)
def test_the_top_level_holds_functions_and_constants_of_its_own(
    bp: Blueprint, extra: str, message: str
) -> None:
    from maestro.agents.codegen.answers import ParseError

    with pytest.raises(ParseError, match=re.escape(message)):
        normalise_generator(bp, team.DATA_PROGRAM + "\n" + extra)


def test_a_program_has_a_deadline_in_all_not_only_per_table(
    bp: Blueprint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each table had its own 120 s: eight tables of a looping program ran 800 s."""
    from maestro.agents.codegen import generator

    asked: list[float] = []
    real = generator.generation_limits

    def spy(base: object, size: int, seconds: float = 0.0) -> object:
        asked.append(seconds)
        return real(base, size, seconds)  # type: ignore[arg-type]

    monkeypatch.setattr(generator, "generation_limits", spy)
    monkeypatch.setattr(generator, "TOTAL_TIMEOUT_S", 4.0)
    monkeypatch.setattr(generator, "TABLE_TIMEOUT_S", 100.0)
    looping = _program(bp, passengers="x = 0\nwhile True:\n    x += 1")
    with pytest.raises(GeneratorError, match="failed \\(timeout\\)"):
        run_generator(bp, normalise_generator(bp, looping), SIZES, tmp_path)
    assert asked and max(asked) <= 4.0  # every table's deadline is what is left of the total
