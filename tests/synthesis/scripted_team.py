"""A scripted codegen model for synthesis tests: the ferry line of the blueprint prompt's
example, stage by stage, as a capable model would answer.

Each helper returns the replies one stage's calls get, in order; tests queue them on the
scripted server under the synthesis id (the team's calls) and under the task synthesis's
episodes (``synthesis/<domain id>/walk-<i>``, ``.../refusal-<j>``). The scenario answers are
written for the walks the task synthesis will sample: :func:`task_replies` builds the package the
team will build (same functions, same seed) and plans its walks.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from maestro.agents.codegen.blueprint import Blueprint
from maestro.agents.codegen.example import EXAMPLE, EXAMPLE_BRIEF
from maestro.agents.codegen.generator import Sizes, normalise_generator, run_generator
from maestro.agents.codegen.guide import walk_guide
from maestro.agents.codegen.normalise import parse_blueprint
from maestro.agents.codegen.refusals import refusal_rules, tool_rules
from maestro.agents.codegen.render import db_json, manifest_json, models_source
from maestro.agents.codegen.scenarios import plan_walks, refused_state
from maestro.agents.codegen.state import SynthesisConfig
from maestro.agents.codegen.tools_code import normalise_tool, tools_source
from maestro.agents.scripted_server import Reply, ScriptedServer
from maestro.domains import Domain
from maestro.domains.sandbox import load_sandboxed_domain
from maestro.domains.walks import Walk

BRIEF = EXAMPLE_BRIEF
INDUSTRY = "transport"
BLUEPRINT: dict[str, Any] = copy.deepcopy(EXAMPLE)
# What a capable model added to the example for this brief, each a trap the task walks once fell
# into: a requested transfer that an agent rule forbids replacing (walks asked for it), a
# "new" sailing that may be the booking's own (a change to nothing), and a "reason" parameter
# that writes a booking's seat note while refunds have a "reason" field of their own.
next(e for e in BLUEPRINT["entities"] if e["table"] == "bookings")["fields"][
    "transfer_sailing_id"
] = "ref:sailings?"
BLUEPRINT["operations"] += [
    {
        "name": "request_transfer",
        "kind": "update",
        "table": "bookings",
        "description": "Ask to move a confirmed booking to another scheduled sailing.",
        "params": {"booking_id": "str", "new_sailing_id": "str"},
        "requires": [
            {"check": "status", "test": "in", "value": ["confirmed"]},
            {"check": "new_sailing_id.status", "test": "in", "value": ["scheduled"]},
            {"check": "new_sailing_id.seats_left", "test": "at_least", "value": 1},
        ],
        "sets": {"transfer_sailing_id": "$new_sailing_id"},
    },
    {
        "name": "request_assistance",
        "kind": "update",
        "table": "bookings",
        "description": "Note on a confirmed booking the help the passenger needs on board.",
        "params": {"booking_id": "str", "reason": "str"},
        "requires": [{"check": "status", "test": "in", "value": ["confirmed"]}],
        "sets": {"seat_note": "$reason"},
    },
]
# A catalog people refer to (a passenger's membership), as a mobile carrier's customers refer to
# plans: walks once reached other passengers through it, and grown catalogs mixed their items.
BLUEPRINT["entities"].append(
    {
        "name": "Membership",
        "table": "memberships",
        "key": "membership_id",
        "prefix": "MB",
        "catalog": True,
        "fields": {
            "name": "str",
            "discount_pct": "int:0..30",
            "status": "enum:open|closed",
        },
    }
)
next(e for e in BLUEPRINT["entities"] if e["table"] == "passengers")["fields"]["membership_id"] = (
    "ref:memberships"
)
BLUEPRINT["operations"].append(
    {
        "name": "change_membership",
        "kind": "update",
        "table": "passengers",
        "description": "Move a passenger to another open membership.",
        "params": {"passenger_id": "str", "new_membership_id": "str"},
        "requires": [{"check": "new_membership_id.status", "test": "in", "value": ["open"]}],
        "sets": {"membership_id": "$new_membership_id"},
    }
)
BLUEPRINT["operations"].append(
    {
        "name": "list_memberships",
        "kind": "list",
        "table": "memberships",
        "description": "List the memberships open to passengers, or those closed.",
        "params": {"status": "str"},
        "by": ["status"],
    }
)
BLUEPRINT["rules"].append(
    "A confirmed booking may be moved to another scheduled sailing that has seats left."
)
BLUEPRINT["agent_rules"].append(
    {
        "operation": "request_transfer",
        "rule": "A transfer already requested cannot be replaced by phone: the passenger must "
        "ask at the port office.",
        "refuse_when": [{"check": "booking_id.transfer_sailing_id", "test": "not_null"}],
    }
)

PASSENGERS = [
    (
        "PS1001",
        "Maren",
        "Okafor",
        "maren.okafor@gmail.com",
        "+44 7700 900118",
        "1984-03-12",
        "MB1001",
    ),
    (
        "PS1002",
        "Tomasz",
        "Wierzbicki",
        "t.wierzbicki@outlook.com",
        "+44 7700 900342",
        "1991-11-02",
        "MB1002",
    ),
    (
        "PS1003",
        "Aoife",
        "Brennan",
        "aoife.brennan@yahoo.com",
        "+353 87 555 0191",
        "1969-06-25",
        "MB1003",
    ),
    ("PS1004", "Rahul", "Iyer", "rahul.iyer@icloud.com", "+44 7700 900775", "1977-01-30", "MB1004"),
    (
        "PS1005",
        "Celine",
        "Marchand",
        "celine.marchand@gmail.com",
        "+33 6 55 01 23 47",
        "2001-09-14",
        "MB1001",
    ),
]
MEMBERSHIPS = [
    ("MB1001", "Bluewater Club Silver", 10, "open"),
    ("MB1002", "Bluewater Club Gold", 20, "open"),
    ("MB1003", "Island Commuter", 25, "open"),
    ("MB1004", "Foot Passenger Saver", 5, "closed"),
    ("MB1005", "Freight Partner", 30, "open"),
    ("MB1006", "Student Crossing", 15, "open"),
]
SAILINGS = [
    ("SL1001", "Portsmouth-Cherbourg", "2026-01-12T08:30:00", 62.5, 140, "scheduled"),
    ("SL1002", "Plymouth-Roscoff", "2026-01-05T19:00:00", 71.0, 36, "scheduled"),
    ("SL1003", "Poole-Guernsey", "2025-12-27T07:15:00", 48.0, 210, "cancelled"),
    ("SL1004", "Portsmouth-Cherbourg", "2025-12-20T14:00:00", 59.0, 0, "departed"),
    ("SL1005", "Plymouth-Roscoff", "2026-02-03T10:45:00", 88.0, 95, "scheduled"),
    ("SL1006", "Poole-Guernsey", "2026-01-20T16:30:00", 52.0, 0, "scheduled"),
]
BOOKINGS = [
    (
        "BK1001",
        "PS1001",
        "SL1001",
        True,
        62.5,
        "confirmed",
        "2025-12-18",
        "Window seat, deck 7",
        None,
    ),
    ("BK1002", "PS1002", "SL1005", False, 88.0, "confirmed", "2025-12-29", None, "SL1001"),
    (
        "BK1003",
        "PS1003",
        "SL1003",
        False,
        48.0,
        "confirmed",
        "2025-12-02",
        "Travelling with a dog",
        None,
    ),
    ("BK1004", "PS1004", "SL1004", True, 59.0, "travelled", "2025-11-30", None, None),
    ("BK1005", "PS1005", "SL1001", False, 62.5, "cancelled", "2025-12-21", "Aisle seat", None),
    ("BK1006", "PS1002", "SL1002", False, 71.0, "confirmed", "2026-01-02", None, None),
]
REFUNDS = [
    ("RF1001", "BK1005", 62.5, "Plans changed after a family emergency", "paid", "2025-12-23"),
    ("RF1002", "BK1004", 20.0, "Vehicle deck upgrade not provided", "paid", "2025-12-22"),
    ("RF1003", "BK1002", 15.0, "Cabin booked twice by mistake", "pending", "2026-01-03"),
    ("RF1004", "BK1006", 10.0, "Seat reservation fee charged twice", "pending", "2026-01-04"),
]

VALUES = {
    "passengers": {
        "first_name": [
            "Maren",
            "Tomasz",
            "Aoife",
            "Rahul",
            "Celine",
            "Hamid",
            "Ingrid",
            "Kwame",
            "Lucia",
            "Ewan",
            "Priya",
            "Jonas",
        ],
        "last_name": [
            "Okafor",
            "Wierzbicki",
            "Brennan",
            "Iyer",
            "Marchand",
            "Haddad",
            "Lund",
            "Mensah",
            "Ferreira",
            "MacLeod",
            "Sharma",
            "Vogel",
        ],
        "email": [
            "maren.okafor@gmail.com",
            "t.wierzbicki@outlook.com",
            "aoife.brennan@yahoo.com",
            "rahul.iyer@icloud.com",
            "celine.marchand@gmail.com",
            "h.haddad@outlook.com",
            "ingrid.lund@gmail.com",
            "kwame.mensah@yahoo.com",
            "lucia.ferreira@icloud.com",
            "ewan.macleod@gmail.com",
        ],
        "phone": [
            "+44 7700 900118",
            "+44 7700 900342",
            "+353 87 555 0191",
            "+44 7700 900775",
            "+33 6 55 01 23 47",
            "+44 7700 900561",
            "+47 412 55 019",
            "+44 7700 900908",
            "+351 912 555 014",
            "+44 7700 900233",
        ],
    },
    "sailings": {},
    "memberships": {},
    "bookings": {
        "seat_note": [
            "Window seat, deck 7",
            "Travelling with a dog",
            "Aisle seat",
            "Needs step-free access",
            "Reclining seat near the lounge",
            "Cabin with two bunks",
            "Seat next to my partner",
            "Bicycle on board",
            "Quiet zone please",
            "Travelling with an infant",
        ],
    },
    "refunds": {
        "reason": [
            "Plans changed after a family emergency",
            "Vehicle deck upgrade not provided",
            "Cabin booked twice by mistake",
            "Seat reservation fee charged twice",
            "Sailing delayed by more than three hours",
            "Wrong travel date booked",
            "Pet fee charged without a pet",
            "Cabin not cleaned on boarding",
            "Illness on the day of travel",
            "Duplicate booking on the website",
        ],
    },
}


# The data program a capable model writes for the ferry line: its first records are the seeds
# above (tests name them), the rest are built from the records they refer to.
DATA_PROGRAM = (
    f"PASSENGERS = {PASSENGERS!r}\n"
    f"MEMBERSHIPS = {MEMBERSHIPS!r}\n"
    f"SAILINGS = {SAILINGS!r}\n"
    f"BOOKINGS = {BOOKINGS!r}\n"
    f"REFUNDS = {REFUNDS!r}\n"
    f"SEAT_NOTES = {VALUES['bookings']['seat_note']!r}\n"
    f"REASONS = {VALUES['refunds']['reason']!r}\n"
    + """
MORE_MEMBERSHIPS = [
    ("Senior Traveller", 15, "open"),
    ("Family Crossing Pass", 10, "open"),
    ("Corporate Fleet", 20, "closed"),
    ("Weekend Breaker", 5, "open"),
]
FARES = {"Portsmouth-Cherbourg": 64.0, "Plymouth-Roscoff": 79.5, "Poole-Guernsey": 49.0}
ROUTES = ["Portsmouth-Cherbourg", "Plymouth-Roscoff", "Poole-Guernsey"]


def fields(table, row):
    names = {
        "passengers": ["first_name", "last_name", "email", "phone", "date_of_birth", "membership_id"],
        "memberships": ["name", "discount_pct", "status"],
        "sailings": ["route", "departs_at", "fare", "seats_left", "status"],
        "bookings": ["passenger_id", "sailing_id", "vehicle", "fare_paid", "status", "booked_on", "seat_note", "transfer_sailing_id"],
        "refunds": ["booking_id", "amount", "reason", "status", "requested_on"],
    }[table]
    return dict(zip(names, row[1:]))


def make_memberships(db, rng, n):
    out = [fields("memberships", row) for row in MEMBERSHIPS]
    out += [{"name": a, "discount_pct": b, "status": c} for a, b, c in MORE_MEMBERSHIPS]
    return out[:n]


def make_sailings(db, rng, n):
    out = [fields("sailings", row) for row in SAILINGS]
    now = db.now()
    while len(out) < n:
        route = ROUTES[len(out) % 3]
        day = rng.randint(-29, 59)
        departs = datetime(now.year, now.month, now.day, rng.choice([7, 10, 14, 19])) + timedelta(days=day)
        if departs < now:
            status = "cancelled" if rng.random() < 0.15 else "departed"
        else:
            status = "cancelled" if rng.random() < 0.1 else "scheduled"
        out.append({
            "route": route,
            "departs_at": departs.isoformat(timespec="seconds"),
            "fare": FARES[route],
            "seats_left": rng.randint(1, 300) if status == "scheduled" else 0,
            "status": status,
        })
    return out


def make_passengers(db, rng, n):
    out = [fields("passengers", row) for row in PASSENGERS]
    open_plans = [m["membership_id"] for m in db.scan("memberships") if m["status"] == "open"]
    emails = {p["email"] for p in out}
    while len(out) < n:
        who = person(rng, "GB")
        if who["email"] in emails:
            continue
        emails.add(who["email"])
        home = place(rng, "GB")
        out.append({
            "first_name": who["first_name"],
            "last_name": who["last_name"],
            "email": who["email"],
            "phone": phone(rng, home),
            "date_of_birth": birth_date(rng, db.today()),
            "membership_id": rng.choice(open_plans),
        })
    return out


def make_bookings(db, rng, n):
    out = [fields("bookings", row) for row in BOOKINGS]
    sailings = db.scan("sailings")
    scheduled = [s["sailing_id"] for s in sailings if s["status"] == "scheduled"]
    passengers = [p["passenger_id"] for p in db.scan("passengers")]
    today = db.today()
    while len(out) < n:
        sailing = rng.choice(sailings)
        departs = datetime.fromisoformat(sailing["departs_at"])
        latest = min(today, departs.date())
        booked = latest - timedelta(days=rng.randint(0, 40))
        booked = max(booked, today - timedelta(days=120))
        if sailing["status"] == "departed":
            status = "travelled"
        elif sailing["status"] == "cancelled":
            status = "confirmed" if rng.random() < 0.6 else "cancelled"
        else:
            status = "cancelled" if rng.random() < 0.15 else "confirmed"
        transfer = None
        if status == "confirmed" and sailing["status"] == "scheduled" and rng.random() < 0.1:
            transfer = rng.choice([s for s in scheduled if s != sailing["sailing_id"]])
        out.append({
            "passenger_id": rng.choice(passengers),
            "sailing_id": sailing["sailing_id"],
            "vehicle": rng.random() < 0.3,
            "fare_paid": sailing["fare"],
            "status": status,
            "booked_on": booked.isoformat(),
            "seat_note": rng.choice(SEAT_NOTES) if rng.random() < 0.2 else None,
            "transfer_sailing_id": transfer,
        })
    return out


def make_refunds(db, rng, n):
    out = [fields("refunds", row) for row in REFUNDS]
    refunded = {row[1] for row in REFUNDS}
    today = db.today()
    for booking in db.scan("bookings"):
        if len(out) >= n:
            break
        if booking["status"] != "cancelled" or booking["booking_id"] in refunded:
            continue
        booked = date.fromisoformat(booking["booked_on"])
        requested = max(booked, today - timedelta(days=rng.randint(0, 60)))
        out.append({
            "booking_id": booking["booking_id"],
            "amount": booking["fare_paid"],
            "reason": rng.choice(REASONS),
            "status": "paid" if (today - requested).days > 10 else "pending",
            "requested_on": requested.isoformat(),
        })
    return out
"""
)


TOOLS = {
    "find_passenger": """@tool("read")
def find_passenger(db: Database, email: str, date_of_birth: IsoDate) -> dict:
    found = db.find("passengers", email=email, date_of_birth=date_of_birth)
    if not found:
        raise ToolError("no passenger has that email and date of birth")
    return found[0]""",
    "list_passenger_bookings": """def list_passenger_bookings(db: Database, passenger_id: str) -> list:
    db.require("passengers", passenger_id)
    return db.find("bookings", passenger_id=passenger_id)""",
    "get_booking": """def get_booking(db, booking_id):
    return db.require("bookings", booking_id)""",
    "find_sailings": """def find_sailings(db, route):
    return db.find("sailings", route=route)""",
    "get_sailing": '''def get_sailing(db, sailing_id):
    """Show a sailing."""
    return db.require("sailings", sailing_id)''',
    "book_sailing": """def book_sailing(db, passenger_id, sailing_id, vehicle):
    db.require("passengers", passenger_id)
    sailing = db.require("sailings", sailing_id)
    if sailing["status"] != "scheduled":
        raise ToolError(f"sailing {sailing_id} is {sailing['status']}, not scheduled")
    if datetime.fromisoformat(sailing["departs_at"]) < db.now() + timedelta(hours=2):
        raise ToolError("sailings can be booked until 2 hours before departure")
    if sailing["seats_left"] < 1:
        raise ToolError(f"sailing {sailing_id} has no seats left")
    if db.find("bookings", passenger_id=passenger_id, sailing_id=sailing_id, status="confirmed"):
        raise ToolError("the passenger already has a confirmed booking on this sailing")
    db.update("sailings", sailing_id, seats_left=sailing["seats_left"] - 1)
    key = db.new_id("bookings", "BK")
    return db.insert("bookings", {
        "booking_id": key, "passenger_id": passenger_id, "sailing_id": sailing_id,
        "vehicle": vehicle, "fare_paid": sailing["fare"], "status": "confirmed",
        "booked_on": db.today().isoformat(), "seat_note": None,
    })""",
    "cancel_booking": """def cancel_booking(db, booking_id, reason):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    sailing = db.require("sailings", booking["sailing_id"])
    if datetime.fromisoformat(sailing["departs_at"]) < db.now() + timedelta(hours=24):
        raise ToolError("bookings can be cancelled until 24 hours before departure")
    if db.find("refunds", booking_id=booking_id, status="pending"):
        raise ToolError("a refund for this booking is already pending")
    db.update("bookings", booking_id, status="cancelled")
    db.update("sailings", sailing["sailing_id"], seats_left=sailing["seats_left"] + 1)
    key = db.new_id("refunds", "RF")
    return db.insert("refunds", {
        "refund_id": key, "booking_id": booking_id, "amount": booking["fare_paid"],
        "reason": reason, "status": "pending", "requested_on": db.today().isoformat(),
    })""",
    "claim_cancelled_sailing_refund": """def claim_cancelled_sailing_refund(db, booking_id):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    sailing = db.require("sailings", booking["sailing_id"])
    if sailing["status"] != "cancelled":
        raise ToolError("the sailing was not cancelled by the line")
    if datetime.fromisoformat(sailing["departs_at"]) < db.now() - timedelta(days=30):
        raise ToolError("refunds for cancelled sailings are claimed within 30 days")
    if db.find("refunds", booking_id=booking_id, status="pending"):
        raise ToolError("a refund for this booking is already pending")
    db.update("bookings", booking_id, status="cancelled")
    key = db.new_id("refunds", "RF")
    return db.insert("refunds", {
        "refund_id": key, "booking_id": booking_id, "amount": booking["fare_paid"],
        "reason": "sailing cancelled by the line", "status": "pending",
        "requested_on": db.today().isoformat(),
    })""",
    "add_vehicle": """def add_vehicle(db, booking_id):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    if booking["vehicle"]:
        raise ToolError("the booking already has a vehicle")
    return db.update("bookings", booking_id, vehicle=True)""",
    "quote_cancellation": """def quote_cancellation(db, booking_id):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    sailing = db.require("sailings", booking["sailing_id"])
    departs = datetime.fromisoformat(sailing["departs_at"]).date()
    return {"refund": booking["fare_paid"], "days_to_departure": (departs - db.today()).days}""",
    "update_phone": """def update_phone(db, passenger_id, phone):
    db.require("passengers", passenger_id)
    return db.update("passengers", passenger_id, phone=phone)""",
}

TOOLS["request_transfer"] = """def request_transfer(db, booking_id, new_sailing_id):
    booking = db.require("bookings", booking_id)
    sailing = db.require("sailings", new_sailing_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    if sailing["status"] != "scheduled":
        raise ToolError(f"sailing {new_sailing_id} is {sailing['status']}, not scheduled")
    if sailing["seats_left"] < 1:
        raise ToolError(f"sailing {new_sailing_id} has no seats left")
    return db.update("bookings", booking_id, transfer_sailing_id=new_sailing_id)"""
TOOLS["request_assistance"] = """def request_assistance(db, booking_id, reason):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}, not confirmed")
    return db.update("bookings", booking_id, seat_note=reason)"""

TOOLS["change_membership"] = """def change_membership(db, passenger_id, new_membership_id):
    db.require("passengers", passenger_id)
    membership = db.require("memberships", new_membership_id)
    if membership["status"] != "open":
        raise ToolError(f"membership {new_membership_id} is {membership['status']}, not open")
    return db.update("passengers", passenger_id, membership_id=new_membership_id)"""

TOOLS["list_memberships"] = """def list_memberships(db, status):
    return db.find("memberships", status=status)"""

TOOLS["get_refund"] = """def get_refund(db, refund_id):
    return db.require("refunds", refund_id)"""

#: The blueprint again, with the operation a reviewer finds missing (in place of the phone
#: update).
WITH_GET_REFUND: dict[str, Any] = copy.deepcopy(BLUEPRINT)
WITH_GET_REFUND["operations"] = [
    op for op in WITH_GET_REFUND["operations"] if op["name"] != "update_phone"
]
WITH_GET_REFUND["operations"].append(
    {
        "name": "get_refund",
        "kind": "read",
        "table": "refunds",
        "description": "Show a refund and its status.",
        "params": {"refund_id": "str"},
    }
)

#: A wrong tool: the 24-hour check is off by a day (day N+1 passes) and the seat is not returned.
CANCEL_BUGGY = """def cancel_booking(db, booking_id, reason):
    booking = db.require("bookings", booking_id)
    if booking["status"] != "confirmed":
        raise ToolError("not confirmed")
    sailing = db.require("sailings", booking["sailing_id"])
    if datetime.fromisoformat(sailing["departs_at"]) < db.now():
        raise ToolError("the sailing has left")
    db.update("bookings", booking_id, status="cancelled")
    key = db.new_id("refunds", "RF")
    return db.insert("refunds", {
        "refund_id": key, "booking_id": booking_id, "amount": booking["fare_paid"],
        "reason": reason, "status": "pending", "requested_on": db.today().isoformat(),
    })"""

POLICY = """# Bluewater Ferries passenger desk policy
You help passengers of Bluewater Ferries with their bookings, cancellations and refunds.
1. Verify the passenger's identity with their email and date of birth before reading or changing any booking.
2. Only act on the verified passenger's own bookings.
3. A booking can be cancelled until 24 hours before departure; the fare paid is refunded.
4. Sailings can be booked until 2 hours before departure, while seats are left.
5. Passengers whose sailing the line cancelled may claim a refund within 30 days of the planned departure.
6. A confirmed booking may be moved to another scheduled sailing that has seats left.
7. Bookings with a vehicle cannot be cancelled by phone: the passenger must cancel at the port office.
8. Sailings departing in less than 24 hours are sold only at the port, not by phone.
9. A transfer already requested cannot be replaced by phone: the passenger must ask at the port office.
"""

OK = '{"verdict": "ok", "stage": "", "tool": "", "problem": ""}'
#: The phrase of the policy each refusal's agent must say, by operation.
REFUSAL_PHRASES = {
    "cancel_booking": "cancel at the port office",
    "book_sailing": "only at the port",
    "request_transfer": "already requested",
}

#: The phrase of the policy that explains a refusal its tool enforces, by operation.
TOOL_PHRASES = {
    "cancel_booking": "24 hours before departure",
    "book_sailing": "2 hours before departure",
    "claim_cancelled_sailing_refund": "within 30 days",
    "add_vehicle": "confirmed booking",
    "request_transfer": "confirmed booking",
    "request_assistance": "confirmed booking",
}


def fence(code: str) -> str:
    return f"Here is the tool:\n```python\n{code}\n```"


def domain_id(synthesis_id: str) -> str:
    """The id the team gives the scripted domain in a synthesis (unique per synthesis)."""
    return f"ferry_line_{hashlib.sha256(synthesis_id.encode()).hexdigest()[:6]}"


def team_replies(
    *,
    blueprint: list[str] | None = None,
    data: list[str] | None = None,
    tools: dict[str, list[str]] | None = None,
    policy: list[str] | None = None,
    review: list[str] | None = None,
    cancel: list[str] | None = None,
) -> list[str]:
    """The team's replies for a whole synthesis, in call order (tasks aside); each stage's
    list replaces its one good answer (to script refused answers before it)."""
    tools = dict(tools or {})
    if cancel is not None:
        tools["cancel_booking"] = [fence(c) for c in cancel]
    replies = list(blueprint or [json.dumps(BLUEPRINT)])
    replies += data or [fence(DATA_PROGRAM)]
    for op in BLUEPRINT["operations"]:
        replies += tools.get(op["name"], [fence(TOOLS[op["name"]])])
    return replies + (policy or [POLICY]) + (review or [OK])


def queue(server: ScriptedServer, episode: str, replies: list[str]) -> None:
    server.script(episode, "codegen", [Reply(content=r) for r in replies])


# ----- the tasks stage's answers -----------------------------------------------------------------


def blueprint(
    config: SynthesisConfig | None = None, raw: dict[str, Any] | None = None
) -> Blueprint:
    clock = (config or SynthesisConfig()).clock
    return parse_blueprint(raw or BLUEPRINT, clock=clock, industry=INDUSTRY)


def package_files(
    synthesis_id: str, config: SynthesisConfig, raw: dict[str, Any] | None = None
) -> dict[str, str]:
    """The files the team writes before the tasks stage (for planning the walks)."""
    bp = blueprint(config, raw)
    limits = config.limits()
    with tempfile.TemporaryDirectory() as work:
        db = run_generator(
            bp,
            normalise_generator(bp, DATA_PROGRAM),
            Sizes(limits.main_size, limits.catalog_size),
            Path(work),
            seed=config.seed,
        )
    functions = {op.name: normalise_tool(bp, op, TOOLS[op.name]) for op in bp.operations}
    return {
        "models.py": models_source(bp),
        "db.json": db_json(db),
        "domain.json": manifest_json(
            bp, domain_id=domain_id(synthesis_id), synthesis_id=synthesis_id, run_id=None
        ),
        "tools.py": tools_source(bp, functions),
        "policy.md": POLICY,
        "tasks.jsonl": "",
    }


@contextmanager
def loaded(synthesis_id: str, config: SynthesisConfig) -> Iterator[Domain]:
    """The package the team builds for ``synthesis_id``, loaded in the sandbox."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in package_files(synthesis_id, config).items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        with load_sandboxed_domain(tmp, check_gold=False) as domain:
            yield domain


def scenario(walk: Walk, i: int) -> str:
    """A walk's scenario, telling the customer every value the walk needs."""
    values = " ".join(
        str(x)
        for v in walk.user_values.values()
        for x in (v if isinstance(v, list) else [v])
        if not isinstance(x, bool)
    )
    return json.dumps(
        {
            "persona": "A regular passenger who travels with Bluewater Ferries a few times a year.",
            "reason_for_call": f"You want help with your ferry travel ({walk.writes[0].name}).",
            "known_info": f"Your details: {values}.",
            "unknown_info": None,
            "task_instructions": "Give your details when asked and confirm the change.",
            "nl_assertions": ["The agent confirms the change to the passenger."],
        }
    )


def fact_of(content: str) -> str:
    """A fact of a read's answer a customer would ask about: a status, else the first amount."""
    value = json.loads(content)
    rows = value if isinstance(value, list) else [value]
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("status"), str):
            return str(row["status"])
    for row in rows:
        for v in row.values() if isinstance(row, dict) else []:
            if isinstance(v, float):
                return f"{v:.2f}"
    raise AssertionError(f"no fact to tell in {content[:200]}")


def info(walk: Walk) -> str:
    """An information request's scenario: the customer asks, the answer's status is the fact."""
    values = " ".join(str(v) for v in walk.user_values.values() if not isinstance(v, bool))
    return json.dumps(
        {
            "persona": "A passenger who likes to check before travelling.",
            "reason_for_call": "You want to know where your ferry booking stands.",
            "known_info": f"Your details: {values}.",
            "unknown_info": None,
            "task_instructions": "Give your details when asked, then thank the agent.",
            "nl_assertions": ["The agent tells the passenger what the booking shows."],
            "communicate_info": [fact_of(walk.steps[-1].content)],
        }
    )


def scenario_knowing_everything(synthesis_id: str, config: SynthesisConfig) -> str:
    """A scenario whose customer knows every value of the database a tool takes (the fields
    named by some parameter, ``new_`` aside): it fits any walk, and stays a scenario's size."""
    db = json.loads(package_files(synthesis_id, config)["db.json"])
    params = {p.removeprefix("new_") for op in blueprint(config).operations for p in op.params}
    values = sorted(
        {
            str(v)
            for rows in db.values()
            for r in rows.values()
            for field, v in r.items()
            if v is not None and field in params
        }
        | set(VALUES["refunds"]["reason"])
    )
    body = json.loads(scenario_text("everything"))
    body["known_info"] = "Your details: " + " ".join(values)
    return json.dumps(body)


def scenario_text(name: str) -> str:
    return json.dumps(
        {
            "persona": "A regular passenger who travels with Bluewater Ferries a few times a year.",
            "reason_for_call": f"You want help with your ferry travel ({name}).",
            "known_info": "",
            "unknown_info": None,
            "task_instructions": "Give your details when asked and confirm the change.",
            "nl_assertions": ["The agent confirms the change to the passenger."],
        }
    )


def refusal(walk: Walk, state: str | None = None) -> str:
    """A refusal writer's answer; ``state``: the state the refused record is in, which the
    prompt then asks for as a fact (``scenarios.refused_state``)."""
    values = " ".join(str(v) for v in walk.user_values.values() if not isinstance(v, bool))
    phrase = (TOOL_PHRASES if walk.refused else REFUSAL_PHRASES).get(walk.writes[0].name)
    if phrase is None:
        return json.dumps({"candidate": None})  # the policy states no rule for it
    return json.dumps(
        {
            "candidate": 1,
            "rule": f"The rule on {walk.writes[0].name} by phone.",
            "communicate_info": [phrase] + ([state] if state else []),
            "persona": "A passenger in a hurry.",
            "reason_for_call": f"You want to {walk.writes[0].name.replace('_', ' ')} by phone.",
            "known_info": f"Your details: {values}.",
            "unknown_info": None,
            "task_instructions": "Insist once, then accept the answer.",
            "nl_assertions": ["The agent does not make the change and explains why."],
        }
    )


def task_replies(
    synthesis_id: str,
    config: SynthesisConfig,
    *,
    attempt: int = 1,
    raw: dict[str, Any] | None = None,
) -> dict[str, list[str]]:
    """The answers the task synthesis's episodes get, by episode, for one tasks attempt (of
    the blueprint ``raw``, the scripted one by default)."""
    files = package_files(synthesis_id, config, raw)
    bp = blueprint(config, raw)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        with load_sandboxed_domain(root, check_gold=False) as domain:
            walks, plans = plan_walks(
                domain,
                n=config.walk_target(sum(op.tool_kind == "write" for op in bp.operations)),
                seed=config.seed + attempt - 1,
                refusals=config.refusals,
                rules=refusal_rules(bp),
                guide=walk_guide(bp),
                asks=config.information,
                tool_refusals=config.tool_refusals,
                tool_rules=tool_rules(bp),
            )
            states = [refused_state(domain, plan) for plan in plans]
    did = domain_id(synthesis_id)
    writes = [w for w in walks if not w.asks]
    out = {f"synthesis/{did}/walk-{i}": [scenario(w, i)] for i, w in enumerate(writes)}
    for i, w in enumerate(w for w in walks if w.asks):
        out[f"synthesis/{did}/info-{i}"] = [info(w)]
    for j, (plan, state) in enumerate(zip(plans, states, strict=True)):
        if plan.group:
            answer = refusal(plan.group[0], state.value if state else None)
            out[f"synthesis/{did}/refusal-{j}"] = [answer]
    return out


def queue_tasks(
    server: ScriptedServer,
    synthesis_id: str,
    config: SynthesisConfig,
    *,
    attempt: int = 1,
    raw: dict[str, Any] | None = None,
) -> int:
    """Queue the tasks stage's answers; how many episodes were scripted."""
    replies = task_replies(synthesis_id, config, attempt=attempt, raw=raw)
    for episode, answers in replies.items():
        queue(server, episode, answers)
    return len(replies)
