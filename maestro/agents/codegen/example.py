"""The worked example the blueprint prompt shows: a ferry line's desk, whole and valid.

A capable model designs better from a complete example than from a grammar alone; the example
covers every construct (lookup by two identifiers, list, read, a quote computed by an
expression, create with effects on another record, a count of what must not exist yet, update
from a parameter, date checks both ways, a nullable reference, laws, agent rules). Its
tables are refused for any other brief (:func:`copies_example`), so a small model that copies it
is told so. The contract tests parse it as the blueprint stage does.
"""

from __future__ import annotations

from typing import Any

EXAMPLE_BRIEF = "A ferry line: passengers book sailings, cancel them and claim refunds."

EXAMPLE: dict[str, Any] = {
    "domain_id": "ferry_line",
    "name": "Bluewater Ferries",
    "description": "The passenger desk of a ferry line: bookings, cancellations and refunds.",
    "entities": [
        {
            "name": "Passenger",
            "table": "passengers",
            "key": "passenger_id",
            "prefix": "PS",
            "fields": {
                "first_name": "str",
                "last_name": "str",
                "email": "str",
                "phone": "str",
                "date_of_birth": "date:-85y..-18y",
            },
        },
        {
            "name": "Sailing",
            "table": "sailings",
            "key": "sailing_id",
            "prefix": "SL",
            "key_known": False,
            "fields": {
                "route": "enum:Portsmouth-Cherbourg|Plymouth-Roscoff|Poole-Guernsey",
                "departs_at": "datetime:-30d..+60d",
                "fare": "float:35..180",
                "seats_left": "int:0..400",
                "status": "enum:scheduled|cancelled|departed",
            },
        },
        {
            "name": "Booking",
            "table": "bookings",
            "key": "booking_id",
            "prefix": "BK",
            "fields": {
                "passenger_id": "ref:passengers",
                "sailing_id": "ref:sailings",
                "vehicle": "bool",
                "fare_paid": "float:35..180",
                "status": "enum:confirmed|cancelled|travelled",
                "booked_on": "date:-120d..0d",
                "seat_note": "str?",
            },
        },
        {
            "name": "Refund",
            "table": "refunds",
            "key": "refund_id",
            "prefix": "RF",
            "fields": {
                "booking_id": "ref:bookings",
                "amount": "float:0..180",
                "reason": "str",
                "status": "enum:pending|paid",
                "requested_on": "date:-90d..0d",
            },
        },
    ],
    "operations": [
        {
            "name": "find_passenger",
            "kind": "lookup",
            "table": "passengers",
            "description": "Find a passenger by email and date of birth (identity check).",
            "params": {"email": "str", "date_of_birth": "date"},
            "by": ["email", "date_of_birth"],
        },
        {
            "name": "list_passenger_bookings",
            "kind": "list",
            "table": "bookings",
            "description": "List a passenger's bookings.",
            "params": {"passenger_id": "str"},
            "by": ["passenger_id"],
        },
        {
            "name": "get_booking",
            "kind": "read",
            "table": "bookings",
            "description": "Show one booking.",
            "params": {"booking_id": "str"},
        },
        {
            "name": "find_sailings",
            "kind": "list",
            "table": "sailings",
            "description": "List the sailings on a route (a passenger knows where they travel, "
            "not a sailing's key).",
            "params": {"route": "str"},
            "by": ["route"],
        },
        {
            "name": "get_sailing",
            "kind": "read",
            "table": "sailings",
            "description": "Show a sailing's time, fare, seats left and status.",
            "params": {"sailing_id": "str"},
        },
        {
            "name": "book_sailing",
            "kind": "create",
            "table": "bookings",
            "description": "Book a seat on a scheduled sailing for a passenger.",
            "params": {"passenger_id": "str", "sailing_id": "str", "vehicle": "bool"},
            "requires": [
                {"check": "sailing_id.status = 'scheduled'"},
                {"check": "sailing_id.departs_at >= now + hours(2)"},
                {"check": "sailing_id.seats_left >= 1"},
                {
                    "check": "count(bookings where passenger_id = $passenger_id and sailing_id = "
                    "$sailing_id and status = 'confirmed') = 0"
                },
            ],
            "sets": {
                "new.passenger_id": "$passenger_id",
                "new.sailing_id": "$sailing_id",
                "new.vehicle": "$vehicle",
                "new.fare_paid": "$sailing_id.fare",
                "new.status": "confirmed",
                "new.booked_on": "$today",
                "sailing_id.seats_left": {"subtract": 1},
            },
        },
        {
            "name": "cancel_booking",
            "kind": "create",
            "table": "refunds",
            "description": "Cancel a confirmed booking at least 24 hours before departure; "
            "the fare is refunded.",
            "then": ["book_sailing"],
            "params": {"booking_id": "str", "reason": "str"},
            "requires": [
                {"check": "booking_id.status = 'confirmed'"},
                {"check": "booking_id.sailing_id.departs_at >= now + hours(24)"},
                {
                    "check": "count(refunds where booking_id = $booking_id and status = "
                    "'pending') = 0"
                },
            ],
            "sets": {
                "booking_id.status": "cancelled",
                "booking_id.sailing_id.seats_left": {"add": 1},
                "new.booking_id": "$booking_id",
                "new.amount": "$booking_id.fare_paid",
                "new.reason": "$reason",
                "new.status": "pending",
                "new.requested_on": "$today",
            },
        },
        {
            "name": "claim_cancelled_sailing_refund",
            "kind": "create",
            "table": "refunds",
            "description": "Refund a booking whose sailing the line cancelled, within 30 days "
            "of the planned departure.",
            "params": {"booking_id": "str"},
            "requires": [
                {"check": "booking_id.status = 'confirmed'"},
                {"check": "booking_id.sailing_id.status = 'cancelled'"},
                {"check": "booking_id.sailing_id.departs_at >= now - days(30)"},
                {
                    "check": "count(refunds where booking_id = $booking_id and status = "
                    "'pending') = 0"
                },
            ],
            "sets": {
                "booking_id.status": "cancelled",
                "new.booking_id": "$booking_id",
                "new.amount": "$booking_id.fare_paid",
                "new.reason": "sailing cancelled by the line",
                "new.status": "pending",
                "new.requested_on": "$today",
            },
        },
        {
            "name": "add_vehicle",
            "kind": "update",
            "table": "bookings",
            "description": "Add a vehicle to a confirmed booking.",
            "params": {"booking_id": "str"},
            "requires": [
                {"check": "status = 'confirmed'"},
                {"check": "vehicle = false"},
            ],
            "sets": {"vehicle": True},
        },
        {
            "name": "quote_cancellation",
            "kind": "quote",
            "table": "bookings",
            "description": "Say what cancelling a confirmed booking would refund, and how many "
            "days are left before the sailing.",
            "params": {"booking_id": "str"},
            "requires": [{"check": "booking_id.status = 'confirmed'"}],
            "returns": {
                "refund": "booking_id.fare_paid",
                "days_to_departure": "days_between(today, booking_id.sailing_id.departs_at)",
            },
        },
        {
            "name": "update_phone",
            "kind": "update",
            "table": "passengers",
            "description": "Change a passenger's phone number.",
            "params": {"passenger_id": "str", "phone": "str"},
            "sets": {"phone": "$phone"},
        },
    ],
    "rules": [
        "Verify the passenger's identity with their email and date of birth before reading or "
        "changing any booking.",
        "Only act on the verified passenger's own bookings.",
        "A booking can be cancelled until 24 hours before departure; the fare paid is refunded.",
        "Sailings can be booked until 2 hours before departure, while seats are left.",
        "Passengers whose sailing the line cancelled may claim a refund within 30 days of the "
        "planned departure.",
    ],
    "agent_rules": [
        {
            "operation": "cancel_booking",
            "rule": "Bookings with a vehicle cannot be cancelled by phone: the passenger must "
            "cancel at the port office.",
            "refuse_when": [{"check": "booking_id.vehicle = true"}],
        },
        {
            "operation": "book_sailing",
            "rule": "Sailings departing in less than 24 hours are sold only at the port, not by "
            "phone.",
            "refuse_when": [{"check": "sailing_id.departs_at < now + hours(24)"}],
        },
    ],
    "laws": [
        {
            "table": "bookings",
            "holds": "booked_on <= date(sailing_id.departs_at)",
            "says": "A booking is made before its sailing departs.",
        },
        {
            "table": "bookings",
            "holds": "status = 'travelled'",
            "when": "sailing_id.status = 'departed'",
            "says": "Bookings on a departed sailing have travelled.",
        },
        {
            "table": "refunds",
            "holds": "amount <= booking_id.fare_paid and requested_on >= booking_id.booked_on",
            "says": "A refund is never more than the fare paid, and is asked for after booking.",
        },
        {
            "table": "bookings",
            "holds": "count(refunds where booking_id = self and status = 'pending') <= 1",
            "says": "A booking has at most one refund pending.",
        },
    ],
}


def copies_example(tables: set[str], brief: str) -> bool:
    """Whether a blueprint for another brief took the example's tables."""
    ours = {e["table"] for e in EXAMPLE["entities"]}
    return tables == ours and "ferr" not in brief.lower()
