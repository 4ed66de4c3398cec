"""The data stage's contract: seeds and vocabularies checked, placeholders refused, the tables
grown to size around the clock with consistent references, nulls kept, and coverage of every
operation checked."""

from __future__ import annotations

import copy
import json
from collections import Counter
from datetime import date, datetime
from typing import Any

import pytest

from maestro.agents.codegen.blueprint import Blueprint
from maestro.agents.codegen.conditions import as_when
from maestro.agents.codegen.data import (
    DataError,
    DataLimits,
    coverage_problems,
    database_problems,
    parse_data,
)
from maestro.agents.codegen.gate import placeholder_reason
from maestro.agents.codegen.growth import grow
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.state import SynthesisConfig
from tests.synthesis import scripted_team as team

CLOCK = datetime(2026, 1, 5, 9, 0)
LIMITS = SynthesisConfig().limits()


def answer(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(team.data_answer())
    for path, value in changes.items():
        table, index, field = path.split("__")
        data["records"][table][int(index)][field] = value
    return data


@pytest.fixture(scope="module")
def bp() -> Blueprint:
    return team.blueprint()


@pytest.fixture(scope="module")
def db(bp: Blueprint) -> dict[str, dict[str, dict[str, Any]]]:
    return grow(bp, parse_data(bp, team.data_answer(), LIMITS), LIMITS, seed=0)


@pytest.mark.parametrize(
    ("value", "field", "table", "flagged"),
    [
        ("name 4", "name", "customers", True),
        ("email 4", "email", "customers", True),
        ("book title 6", "book_title", "books", True),
        ("start time 4", "start_time", "slots", True),
        ("Customer 3", "full_name", "customers", True),
        ("Lorem ipsum dolor sit amet", "notes", "orders", True),
        ("string", "city", "customers", True),
        ("Example", "title", "books", True),
        ("ada@example.com", "email", "customers", True),
        ("<street>", "street", "stores", True),
        ("...", "street", "stores", True),
        ("City", "city", "customers", True),
        ("Maren Okafor", "name", "customers", False),
        ("12 Elm Street", "street", "stores", False),
        ("+44 7700 900118", "phone", "customers", False),
        ("Suite 4", "room_name", "rooms", False),
        ("The Name of the Rose", "title", "books", False),
        ("maren.okafor@gmail.com", "email", "customers", False),
    ],
)
def test_the_gate_knows_a_placeholder_from_data(
    value: str, field: str, table: str, flagged: bool
) -> None:
    assert (placeholder_reason(value, field, table) is not None) == flagged


def test_the_scripted_seeds_pass_and_keep_their_nulls(bp: Blueprint) -> None:
    seeds = parse_data(bp, team.data_answer(), LIMITS)
    assert seeds.dropped == []
    assert [len(rows) for rows in seeds.records.values()] == [5, 6, 6, 4, 6]
    assert seeds.records["bookings"]["BK1002"]["seat_note"] is None
    assert len(seeds.values["passengers"]["first_name"]) == 12


def test_placeholders_and_short_vocabularies_are_refused_with_every_value_named(
    bp: Blueprint,
) -> None:
    data = answer(passengers__3__first_name="name 4", refunds__1__reason="lorem ipsum")
    data["values"]["passengers"]["email"] = ["email 1", "email 2", "ann@example.com"]
    with pytest.raises(DataError) as err:
        parse_data(bp, data, LIMITS)
    text = str(err.value)
    assert "passengers.first_name 'name 4' is the field's name and a number" in text
    assert "refunds.reason 'lorem ipsum' is lorem ipsum" in text
    assert "values.passengers.email 'email 1' is the field's name and a number" in text
    assert "values.passengers.email 'ann@example.com' is an example email domain" in text
    assert "values.passengers.email: 3 distinct value(s), 10 needed" in text


def test_one_value_in_every_record_is_refused(bp: Blueprint) -> None:
    data = answer()
    for rec in data["records"]["refunds"]:
        rec["reason"] = "Customer request"
    with pytest.raises(DataError, match=r"refunds\.reason is 'Customer request' in 4 of 4 records"):
        parse_data(bp, data, LIMITS)


def test_bad_records_are_dropped_with_why_and_too_few_left_is_an_error(bp: Blueprint) -> None:
    data = answer(
        bookings__0__passenger_id="PS1099",  # no such passenger
        bookings__1__booked_on="2024-06-03",  # outside its window around the clock
        bookings__2__booking_id="B-3",  # not the table's prefix and digits
        bookings__3__status="lost",
    )
    with pytest.raises(DataError) as err:
        parse_data(bp, data, LIMITS)
    text = str(err.value)
    assert "bookings: 2 valid record(s), 4 needed" in text
    assert "'PS1099' is not a key of passengers (PS1001, PS1002" in text
    assert "booked_on '2024-06-03' is outside 2025-09-07..2026-01-05" in text
    assert "key 'B-3' is not BK and digits, like BK1001" in text
    loose = parse_data(bp, data, LIMITS.model_copy(update={"seeds": 2}))
    assert sorted(loose.records["bookings"]) == ["BK1005", "BK1006"]
    # The refunds of the dropped bookings go too: a reference never points at nothing.
    assert sorted(loose.records["refunds"]) == ["RF1001", "RF1004"]
    assert len(loose.dropped) == 6


def test_a_lookup_needs_its_identifiers_to_name_one_record(bp: Blueprint) -> None:
    data = answer(
        passengers__1__email="maren.okafor@gmail.com", passengers__1__date_of_birth="1984-03-12"
    )
    with pytest.raises(DataError, match="PS1001 and PS1002 share"):
        parse_data(bp, data, LIMITS)


def test_the_tables_grow_to_size_with_real_references(
    bp: Blueprint, db: dict[str, dict[str, dict[str, Any]]]
) -> None:
    assert {t: len(rows) for t, rows in db.items()} == {
        "passengers": 100,
        "sailings": 100,
        "bookings": 100,
        "refunds": 100,
        "memberships": 6,
    }
    # A catalog is the model's, whole: never grown, so no membership pairs one seed's name with
    # another's numbers (a "Talk & Text Basic" plan with 158 GB).
    written = {m[0]: m[1:] for m in team.MEMBERSHIPS}
    assert {
        k: (r["name"], r["discount_pct"], r["status"]) for k, r in db["memberships"].items()
    } == written
    assert {p["membership_id"] for p in db["passengers"].values()} <= set(written)
    assert sorted(db["passengers"])[:3] == ["PS1001", "PS1002", "PS1003"]
    assert sorted(db["passengers"])[-1] == "PS1100"
    for b in db["bookings"].values():
        assert b["passenger_id"] in db["passengers"] and b["sailing_id"] in db["sailings"]
        # Copied from the sailing, as every seed does.
        assert b["fare_paid"] == db["sailings"][b["sailing_id"]]["fare"]
    assert database_problems(bp, db) == []
    assert coverage_problems(bp, db, LIMITS) == []
    emails = [p["email"] for p in db["passengers"].values()]
    assert len(set(emails)) == 100
    names = Counter(p["first_name"] + " " + p["last_name"] for p in db["passengers"].values())
    assert len(names) > 60  # recombined, not twelve names repeated


def test_grown_dates_stay_in_their_windows_and_on_their_side_of_the_clock(
    bp: Blueprint, db: dict[str, dict[str, dict[str, Any]]]
) -> None:
    for e in bp.entities:
        for rec in db[e.table].values():
            for fname, ftype in e.field_types().items():
                if ftype.temporal and rec[fname] is not None:
                    assert ftype.bounds_problem(rec[fname], CLOCK) is None, (e.table, rec)
    for s in db["sailings"].values():
        when = as_when(s["departs_at"], "datetime")
        assert isinstance(when, datetime)
        if s["status"] == "departed":
            assert when < CLOCK  # a departed sailing stays in the past
    kinds = Counter(
        (b["status"], db["sailings"][b["sailing_id"]]["status"]) for b in db["bookings"].values()
    )
    # A travelled booking points at a departed sailing, never at one still to come.
    assert all(s == "departed" for (b, s) in kinds if b == "travelled")


def test_growth_is_deterministic(bp: Blueprint) -> None:
    seeds = parse_data(bp, team.data_answer(), LIMITS)
    assert grow(bp, seeds, LIMITS, seed=3) == grow(bp, seeds, LIMITS, seed=3)
    assert grow(bp, seeds, LIMITS, seed=3) != grow(bp, seeds, LIMITS, seed=4)


def test_a_grown_placeholder_is_still_found(
    bp: Blueprint, db: dict[str, dict[str, dict[str, Any]]]
) -> None:
    planted = copy.deepcopy(db)
    planted["refunds"]["RF1050"]["reason"] = "reason 50"
    assert database_problems(bp, planted) == [
        "refunds/RF1050.reason 'reason 50' is the field's name and a number"
    ]


def test_seeds_that_leave_an_operation_nothing_to_do_are_sent_back(bp: Blueprint) -> None:
    data = answer()
    for rec in data["records"]["bookings"]:
        rec["vehicle"] = False  # no booking the vehicle rule applies to
    data["records"]["sailings"][2]["status"] = "departed"  # no cancelled sailing to claim for
    seeds = parse_data(bp, data, LIMITS)
    problems = coverage_problems(bp, grow(bp, seeds, LIMITS), LIMITS)
    assert any(
        line.startswith("bookings: 0 record(s) meet claim_cancelled_sailing_refund's its checks")
        and "booking_id.sailing_id.status is one of 'cancelled'" in line
        for line in problems
    ), problems
    assert any("the agent rule 'Bookings with a vehicle" in line for line in problems), problems


DENTAL: dict[str, Any] = {
    "domain_id": "dental",
    "name": "Brightsmile Dental",
    "description": "A dental practice's front desk.",
    "entities": [
        {
            "name": "Patient",
            "table": "patients",
            "key": "patient_id",
            "prefix": "PA",
            "fields": {
                "first_name": "str",
                "last_name": "str",
                "email": "str",
                "date_of_birth": "date:-90y..-1y",
            },
        },
        {
            "name": "Slot",
            "table": "slots",
            "key": "slot_id",
            "prefix": "SO",
            "fields": {
                "patient_id": "ref:patients?",
                "starts_at": "datetime:+1d..+30d",
                "status": "enum:open|booked",
            },
        },
    ],
    "operations": [
        {
            "name": "find_patient",
            "kind": "lookup",
            "table": "patients",
            "description": "Find.",
            "by": ["last_name", "date_of_birth"],
        },
        {
            "name": "list_patient_slots",
            "kind": "list",
            "table": "slots",
            "description": "List.",
            "by": ["patient_id"],
        },
        {
            "name": "get_slot",
            "kind": "read",
            "table": "slots",
            "description": "Show.",
            "params": {"slot_id": "str"},
        },
        {
            "name": "book_slot",
            "kind": "update",
            "table": "slots",
            "description": "Book.",
            "params": {"slot_id": "str", "patient_id": "str"},
            "requires": [
                {"check": "status", "test": "in", "value": ["open"]},
                {"check": "slot_id.patient_id", "test": "is_null"},
            ],
            "sets": {"status": "booked", "patient_id": "$patient_id"},
        },
        {
            "name": "cancel_slot",
            "kind": "update",
            "table": "slots",
            "description": "Cancel.",
            "params": {"slot_id": "str"},
            "requires": [{"check": "status", "test": "in", "value": ["booked"]}],
            "sets": {"status": "open", "patient_id": None},
        },
    ],
    "rules": ["Verify the patient's last name and date of birth first."],
}


def test_a_null_reference_stays_null_and_is_never_repaired() -> None:
    bp = parse_blueprint(DENTAL, clock=CLOCK)
    limits = DataLimits(seeds=2, values=3, main_size=40, catalog_size=4)
    people = [
        ("PA1001", "Ines", "Duarte", "ines.duarte@gmail.com", "1990-02-01"),
        ("PA1002", "Oskar", "Lind", "oskar.lind@outlook.com", "1965-07-19"),
    ]
    raw = {
        "records": {
            "patients": [
                dict(
                    zip(
                        ["patient_id", "first_name", "last_name", "email", "date_of_birth"],
                        p,
                        strict=True,
                    )
                )
                for p in people
            ],
            "slots": [
                {
                    "slot_id": "SO1001",
                    "patient_id": None,
                    "starts_at": "2026-01-07T09:30:00",
                    "status": "open",
                },
                {
                    "slot_id": "SO1002",
                    "patient_id": "PA1002",
                    "starts_at": "2026-01-08T14:00:00",
                    "status": "booked",
                },
            ],
        },
        "values": {
            "patients": {
                "first_name": ["Ines", "Oskar", "Mira", "Tariq"],
                "last_name": ["Duarte", "Lind", "Novak", "Aziz"],
                "email": ["ines.duarte@gmail.com", "oskar.lind@outlook.com", "mira.n@yahoo.com"],
            },
            "slots": {},
        },
    }
    db = grow(bp, parse_data(bp, raw, limits), limits, seed=1)
    assert len(db["slots"]) == 40
    for slot in db["slots"].values():
        assert (slot["patient_id"] is None) == (slot["status"] == "open"), slot
    assert db["slots"]["SO1001"]["patient_id"] is None
    pairs = [(p["last_name"], p["date_of_birth"]) for p in db["patients"].values()]
    assert len(set(pairs)) == len(pairs) == 40  # the lookup's identifiers name one patient
    assert all(
        date(1936, 1, 1) <= date.fromisoformat(p["date_of_birth"]) <= date(2025, 1, 5)
        for p in db["patients"].values()
    )
    assert json.dumps(db)  # plain JSON, as db.json holds it


def test_grown_records_keep_the_seeds_shapes() -> None:
    """The capable-model check's grown data: SIM serials drawn as random 19-digit numbers while
    every seed's starts 8944; a restaurant given another restaurant's address; a scheduled plan
    equal to the current plan. Grown, each keeps the seeds' shape."""
    raw = copy.deepcopy(DENTAL)
    patients = raw["entities"][0]["fields"]
    patients.update({"sim_serial": "str", "slot_id": "ref:slots", "next_slot_id": "ref:slots?"})
    raw["entities"][1]["fields"].update({"clinic_name": "str", "clinic_address": "str"})
    bp = parse_blueprint(raw, clock=CLOCK)
    limits = DataLimits(seeds=2, values=3, main_size=60, catalog_size=4)
    clinics = [("Brightsmile Leeds", "4 Park Row, Leeds"), ("Brightsmile York", "9 Micklegate")]
    slots = [
        {
            "slot_id": f"SO100{i + 1}",
            "patient_id": None,
            "starts_at": f"2026-01-0{7 + i}T09:30:00",
            "status": "open",
            "clinic_name": name,
            "clinic_address": address,
        }
        for i, (name, address) in enumerate(clinics)
    ]
    people = [
        ("PA1001", "Ines", "Duarte", "ines.duarte@gmail.com", "1990-02-01", "SO1001", "SO1002"),
        ("PA1002", "Oskar", "Lind", "oskar.lind@outlook.com", "1965-07-19", "SO1002", None),
    ]
    names = ["patient_id", "first_name", "last_name", "email", "date_of_birth", "slot_id"]
    serials = ["8944100000000000017", "8944100000000000025", "8944100000000000033"]
    records = [
        {**dict(zip(names, p[:6], strict=True)), "next_slot_id": p[6], "sim_serial": s}
        for p, s in zip(people, serials, strict=False)
    ]
    data = {
        "records": {"patients": records, "slots": slots},
        "values": {
            "patients": {
                "first_name": ["Ines", "Oskar", "Mira", "Tariq"],
                "last_name": ["Duarte", "Lind", "Novak", "Aziz"],
                "email": ["ines.duarte@gmail.com", "oskar.lind@outlook.com", "mira.n@yahoo.com"],
                "sim_serial": serials,
            },
            "slots": {
                "clinic_name": ["Brightsmile Leeds", "Brightsmile York", "Brightsmile Hull"],
                "clinic_address": ["4 Park Row, Leeds", "9 Micklegate", "2 Humber St, Hull"],
            },
        },
    }
    db = grow(bp, parse_data(bp, data, limits), limits, seed=1)
    grown = db["patients"].values()
    assert len(db["patients"]) == 60
    assert all(p["sim_serial"].startswith("8944") and len(p["sim_serial"]) == 19 for p in grown)
    assert len({p["sim_serial"] for p in grown}) > 50  # still distinct
    assert {(s["clinic_name"], s["clinic_address"]) for s in db["slots"].values()} == set(clinics)
    # The seed with two slots keeps them apart; the seed with one keeps the second null.
    scheduled = [p for p in grown if p["next_slot_id"] is not None]
    assert len(scheduled) > 10
    assert all(p["next_slot_id"] != p["slot_id"] for p in scheduled)
