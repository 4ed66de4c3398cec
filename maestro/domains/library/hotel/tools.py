"""Tools of the Larkspur Hotels reservations and guest-services desk."""

import re
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from maestro.domains.sdk import Database, ToolError, tool

ACTIVE = ("confirmed", "checked_in")
MAX_NIGHTS = 14
ADVANCE_PURCHASE_DISCOUNT = Decimal("0.85")
ADVANCE_PURCHASE_MIN_DAYS = 7
FREE_CANCEL_HOURS = 48
TIER_THRESHOLDS = {"member": 0, "silver": 10, "gold": 25, "platinum": 50}
TIER_ORDER = ["member", "silver", "gold", "platinum"]
ELITE_UPGRADE_TIERS = ("gold", "platinum")
LATE_CHECKOUT_TIMES = ("12:00", "13:00", "14:00", "16:00")
# Fee for each late-checkout time by tier; None means the time is not offered to that tier.
LATE_CHECKOUT_FEES: dict[str, dict[str, float | None]] = {
    "none": {"12:00": 20.0, "13:00": 30.0, "14:00": 45.0, "16:00": None},
    "member": {"12:00": 20.0, "13:00": 30.0, "14:00": 45.0, "16:00": None},
    "silver": {"12:00": 0.0, "13:00": 30.0, "14:00": 45.0, "16:00": None},
    "gold": {"12:00": 0.0, "13:00": 0.0, "14:00": 0.0, "16:00": None},
    "platinum": {"12:00": 0.0, "13:00": 0.0, "14:00": 0.0, "16:00": 0.0},
}
ADD_ONS = ("breakfast", "parking")
NON_REVERSIBLE = ("room", "cancellation_fee", "no_show")
REVERSAL_WINDOW_DAYS = 90
TRANSFER_MIN = 1000
TRANSFER_STEP = 500
TRANSFER_YEARLY_CAP = 100000
EMAIL_RE = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
PHONE_RE = re.compile(r"^\+?[0-9][0-9 ()-]{6,18}[0-9]$")


# ----- helpers -----------------------------------------------------------------------------------


def _money(value: Decimal | float | int) -> float:
    return float(Decimal(str(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _d(value: float | int) -> Decimal:
    return Decimal(str(value))


def _parse_date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{what} {value!r} is not a date in YYYY-MM-DD form") from None


def _stay_dates(db: Database, check_in: str, check_out: str) -> tuple[date, date]:
    start = _parse_date(check_in, "check-in date")
    end = _parse_date(check_out, "check-out date")
    if end <= start:
        raise ToolError("the check-out date must be after the check-in date")
    if start < db.today():
        raise ToolError(f"the check-in date {start} is in the past (today is {db.today()})")
    nights = (end - start).days
    if nights > MAX_NIGHTS:
        raise ToolError(f"a stay can be at most {MAX_NIGHTS} nights; {nights} were requested")
    return start, end


def _nights(res: dict) -> int:
    return (date.fromisoformat(res["check_out"]) - date.fromisoformat(res["check_in"])).days


def _tier(db: Database, guest_id: str) -> str:
    """The guest's loyalty tier, or "none" when the guest is not a member."""
    guest = db.require("guests", guest_id)
    if not guest.get("loyalty_id"):
        return "none"
    return db.require("loyalty_accounts", guest["loyalty_id"])["tier"]


def _plan_rate(room_type: dict, rate_plan: str) -> float:
    if rate_plan == "points":
        return 0.0
    if rate_plan == "advance_purchase":
        return _money(_d(room_type["nightly_rate"]) * ADVANCE_PURCHASE_DISCOUNT)
    return _money(room_type["nightly_rate"])


def _free_cancel_deadline(db: Database, res: dict) -> datetime:
    hotel = db.require("hotels", res["hotel_id"])
    hh, mm = (int(p) for p in hotel["check_in_time"].split(":"))
    arrival = datetime.fromisoformat(res["check_in"]).replace(hour=hh, minute=mm)
    return arrival - timedelta(hours=FREE_CANCEL_HOURS)


def _available(
    db: Database,
    room_type_id: str,
    start: date,
    end: date,
    exclude_reservation: str | None = None,
) -> int:
    """Rooms of a type free on every night of [start, end)."""
    rooms = db.find("rooms", room_type_id=room_type_id)
    bookings = [
        r
        for r in db.find("reservations", room_type_id=room_type_id)
        if r["status"] in ACTIVE and r["reservation_id"] != exclude_reservation
    ]
    lowest: int | None = None
    night = start
    while night < end:
        in_service = sum(
            1
            for room in rooms
            if not room.get("out_of_service_until")
            or night >= date.fromisoformat(room["out_of_service_until"])
        )
        taken = sum(
            1
            for r in bookings
            if date.fromisoformat(r["check_in"]) <= night < date.fromisoformat(r["check_out"])
        )
        free = max(in_service - taken, 0)
        lowest = free if lowest is None else min(lowest, free)
        night += timedelta(days=1)
    return lowest or 0


def _pricing(db: Database, res: dict) -> dict:
    """What a reservation costs: room, add-ons, tax, late checkout and the estimated total."""
    hotel = db.require("hotels", res["hotel_id"])
    nights = _nights(res)
    tier = _tier(db, res["guest_id"])
    room_total = _d(res["nightly_rate"]) * nights
    breakfast = Decimal(0)
    parking = Decimal(0)
    if "breakfast" in res["add_ons"] and tier != "platinum":
        breakfast = _d(hotel["breakfast_price"]) * res["adults"] * nights
    if "parking" in res["add_ons"] and hotel["parking_fee"] is not None:
        parking = _d(hotel["parking_fee"]) * nights
    add_ons = breakfast + parking
    tax = _d(_money((room_total + add_ons) * _d(hotel["tax_rate"])))
    late = _d(res.get("late_checkout_fee") or 0)
    out = {
        "nights": nights,
        "nightly_rate": _money(res["nightly_rate"]),
        "room_total": _money(room_total),
        "breakfast_total": _money(breakfast),
        "parking_total": _money(parking),
        "add_ons_total": _money(add_ons),
        "tax": _money(tax),
        "late_checkout_fee": _money(late),
        "estimated_total": _money(room_total + add_ons + tax + late),
    }
    if res["rate_plan"] == "points":
        out["points_total"] = res["points_per_night"] * nights
    return out


def _cancellation_terms(db: Database, res: dict) -> dict:
    """The fee (or forfeited points) if the reservation were cancelled now."""
    hotel = db.require("hotels", res["hotel_id"])
    deadline = _free_cancel_deadline(db, res)
    inside_window = db.now() >= deadline
    nights = _nights(res)
    tax_rate = _d(hotel["tax_rate"])
    one_night = _d(res["nightly_rate"])
    one_night_total = _money(one_night + _d(_money(one_night * tax_rate)))
    terms: dict = {
        "reservation_id": res["reservation_id"],
        "rate_plan": res["rate_plan"],
        "free_cancellation_until": None,
        "fee_amount": 0.0,
        "fee_tax": 0.0,
        "fee_total": 0.0,
        "points_refunded": 0,
        "points_forfeited": 0,
    }
    if res["rate_plan"] == "advance_purchase":
        room = one_night * nights
        tax = _d(_money(room * tax_rate))
        terms.update(fee_amount=_money(room), fee_tax=_money(tax), fee_total=_money(room + tax))
        terms["note"] = "Advance Purchase rates are prepaid and non-refundable."
        return terms
    terms["free_cancellation_until"] = deadline.isoformat(timespec="minutes")
    if res["rate_plan"] == "points":
        total = res["points_per_night"] * nights
        forfeit = res["points_per_night"] if inside_window else 0
        terms.update(points_refunded=total - forfeit, points_forfeited=forfeit)
        if not inside_window:
            terms["note"] = "If cancelled after the deadline, one night's points are forfeited."
        return terms
    if inside_window:
        tax = _d(_money(one_night * tax_rate))
        terms.update(fee_amount=_money(one_night), fee_tax=_money(tax), fee_total=one_night_total)
    else:
        terms["fee_after_deadline"] = one_night_total
    return terms


def _reservation_view(db: Database, res: dict) -> dict:
    hotel = db.require("hotels", res["hotel_id"])
    room_type = db.require("room_types", res["room_type_id"])
    view = dict(res)
    view["hotel_name"] = hotel["name"]
    view["room_type_name"] = room_type["name"]
    view["nights"] = _nights(res)
    view["pricing"] = _pricing(db, res)
    if res["status"] == "confirmed":
        view["free_cancellation_until"] = (
            None
            if res["rate_plan"] == "advance_purchase"
            else _free_cancel_deadline(db, res).isoformat(timespec="minutes")
        )
        view["add_on_quotes"] = _add_on_quotes(db, res)
        if res["rate_plan"] != "points":
            view["upgrade_options"] = _upgrade_options(db, res)
    return view


def _add_on_quotes(db: Database, res: dict) -> dict:
    """Before-tax price of each add-on the reservation does not have yet, for the whole stay."""
    hotel = db.require("hotels", res["hotel_id"])
    nights = _nights(res)
    quotes: dict = {}
    if "breakfast" not in res["add_ons"]:
        per_night = (
            Decimal(0)
            if _tier(db, res["guest_id"]) == "platinum"
            else _d(hotel["breakfast_price"]) * res["adults"]
        )
        quotes["breakfast"] = {
            "per_night": _money(per_night),
            "stay_total_before_tax": _money(per_night * nights),
        }
    if "parking" not in res["add_ons"]:
        if hotel["parking_fee"] is None:
            quotes["parking"] = "not available at this hotel"
        else:
            per_night = _d(hotel["parking_fee"])
            quotes["parking"] = {
                "per_night": _money(per_night),
                "stay_total_before_tax": _money(per_night * nights),
            }
    return quotes


def _upgrade_options(db: Database, res: dict) -> list:
    """Higher room types at the hotel with availability and the paid-upgrade price difference."""
    current = db.require("room_types", res["room_type_id"])
    start = date.fromisoformat(res["check_in"])
    end = date.fromisoformat(res["check_out"])
    nights = _nights(res)
    out = []
    for rt in sorted(
        db.find("room_types", hotel_id=res["hotel_id"]),
        key=lambda r: (r["category_rank"], r["name"]),
    ):
        if rt["category_rank"] <= current["category_rank"]:
            continue
        if res["adults"] + res["children"] > rt["max_occupancy"]:
            continue
        rate = _d(_plan_rate(rt, res["rate_plan"]))
        out.append(
            {
                "room_type_id": rt["room_type_id"],
                "name": rt["name"],
                "category_rank": rt["category_rank"],
                "available": _available(db, rt["room_type_id"], start, end) > 0,
                "paid_upgrade_cost_before_tax": _money((rate - _d(res["nightly_rate"])) * nights),
            }
        )
    return out


def _require_confirmed(res: dict, action: str) -> None:
    if res["status"] != "confirmed":
        raise ToolError(
            f"reservation {res['reservation_id']} is {res['status']}; only confirmed reservations"
            f" that have not checked in can be {action}"
        )


def _post_charge(
    db: Database, reservation_id: str, category: str, description: str, amount: float, tax: float
) -> dict:
    charge_id = db.new_id("folio_charges", "FC", width=6)
    return db.insert(
        "folio_charges",
        {
            "charge_id": charge_id,
            "reservation_id": reservation_id,
            "posted_on": db.today().isoformat(),
            "category": category,
            "description": description,
            "amount": _money(amount),
            "tax": _money(tax),
        },
    )


def _post_points(
    db: Database, loyalty_id: str, kind: str, points: int, reservation_id: str | None, note: str
) -> dict:
    account = db.require("loyalty_accounts", loyalty_id)
    balance = account["points_balance"] + points
    if balance < 0:
        raise ToolError(
            f"loyalty account {loyalty_id} has {account['points_balance']} points; {-points} are needed"
        )
    db.update("loyalty_accounts", loyalty_id, points_balance=balance)
    txn_id = db.new_id("loyalty_transactions", "LT", width=6)
    return db.insert(
        "loyalty_transactions",
        {
            "txn_id": txn_id,
            "loyalty_id": loyalty_id,
            "posted_on": db.today().isoformat(),
            "kind": kind,
            "points": points,
            "reservation_id": reservation_id,
            "note": note,
        },
    )


# ----- reads -------------------------------------------------------------------------------------


@tool("read")
def find_guest(db: Database, email: str) -> dict:
    """Find a guest profile by the email address on the profile.

    Returns only the guest id and name; use get_guest_profile for the full profile.

    Args:
        email: The email address the guest gives, such as "jane.doe@example.com".
    """
    wanted = email.strip().lower()
    for guest in db.find("guests", email=wanted):
        return {
            "guest_id": guest["guest_id"],
            "first_name": guest["first_name"],
            "last_name": guest["last_name"],
        }
    raise ToolError(f"no guest profile has the email {email!r}")


@tool("read")
def get_guest_profile(db: Database, guest_id: str) -> dict:
    """Get a guest's full profile: contact details, date of birth, loyalty number, authorized contacts and cards on file.

    Args:
        guest_id: The guest's id, such as "G1001".
    """
    guest = db.require("guests", guest_id)
    cards = [
        {
            "payment_method_id": pm["payment_method_id"],
            "brand": pm["brand"],
            "last4": pm["last4"],
            "expires": f"{pm['exp_month']:02d}/{pm['exp_year']}",
        }
        for pm in db.find("payment_methods", guest_id=guest_id)
    ]
    return {**guest, "payment_methods": cards}


@tool("read")
def list_guest_reservations(db: Database, guest_id: str) -> list:
    """List every reservation of a guest (past, current, upcoming and cancelled), oldest first.

    Args:
        guest_id: The guest's id, such as "G1001".
    """
    db.require("guests", guest_id)
    out = []
    for res in db.find("reservations", guest_id=guest_id):
        hotel = db.require("hotels", res["hotel_id"])
        room_type = db.require("room_types", res["room_type_id"])
        out.append(
            {
                "reservation_id": res["reservation_id"],
                "hotel_id": res["hotel_id"],
                "hotel_name": hotel["name"],
                "room_type_name": room_type["name"],
                "check_in": res["check_in"],
                "check_out": res["check_out"],
                "status": res["status"],
                "rate_plan": res["rate_plan"],
                "add_ons": res["add_ons"],
            }
        )
    out.sort(key=lambda r: (r["check_in"], r["reservation_id"]))
    return out


@tool("read")
def get_reservation(db: Database, reservation_id: str) -> dict:
    """Get a reservation with its hotel, room type, add-ons, notes and a price breakdown.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
    """
    return _reservation_view(db, db.require("reservations", reservation_id))


@tool("read")
def list_hotels(db: Database) -> list:
    """List the group's hotels with their ids and cities."""
    return [
        {"hotel_id": h["hotel_id"], "name": h["name"], "city": h["city"], "state": h["state"]}
        for h in db.scan("hotels")
    ]


@tool("read")
def get_hotel(db: Database, hotel_id: str) -> dict:
    """Get a hotel's details: address, check-in and check-out times, tax rate, breakfast and parking prices, amenities and room types.

    Args:
        hotel_id: The hotel's id, such as "BOS".
    """
    hotel = db.require("hotels", hotel_id)
    hotel["room_types"] = [
        {
            "room_type_id": rt["room_type_id"],
            "name": rt["name"],
            "category_rank": rt["category_rank"],
            "beds": rt["beds"],
            "max_occupancy": rt["max_occupancy"],
            "nightly_rate": rt["nightly_rate"],
            "points_per_night": rt["points_per_night"],
        }
        for rt in sorted(
            db.find("room_types", hotel_id=hotel_id), key=lambda r: (r["category_rank"], r["name"])
        )
    ]
    return hotel


@tool("read")
def search_availability(
    db: Database, hotel_id: str, check_in: str, check_out: str, adults: int, children: int = 0
) -> dict:
    """Search a hotel's room types available for a stay, with the price of each rate plan.

    Args:
        hotel_id: The hotel's id, such as "BOS".
        check_in: Arrival date, YYYY-MM-DD.
        check_out: Departure date, YYYY-MM-DD.
        adults: Number of adults (at least 1).
        children: Number of children under 18.
    """
    hotel = db.require("hotels", hotel_id)
    start, end = _stay_dates(db, check_in, check_out)
    if adults < 1 or children < 0:
        raise ToolError("a stay needs at least one adult and a non-negative number of children")
    nights = (end - start).days
    tax_rate = _d(hotel["tax_rate"])
    ap_ok = (start - db.today()).days >= ADVANCE_PURCHASE_MIN_DAYS
    options = []
    for rt in sorted(
        db.find("room_types", hotel_id=hotel_id), key=lambda r: (r["category_rank"], r["name"])
    ):
        if adults + children > rt["max_occupancy"]:
            continue
        free = _available(db, rt["room_type_id"], start, end)
        option: dict = {
            "room_type_id": rt["room_type_id"],
            "name": rt["name"],
            "beds": rt["beds"],
            "max_occupancy": rt["max_occupancy"],
            "rooms_available": free,
        }
        if free:
            plans = {}
            for plan in ("flexible", "advance_purchase"):
                if plan == "advance_purchase" and not ap_ok:
                    continue
                rate = _d(_plan_rate(rt, plan))
                room = rate * nights
                tax = _d(_money(room * tax_rate))
                plans[plan] = {
                    "nightly_rate": _money(rate),
                    "room_total": _money(room),
                    "tax": _money(tax),
                    "total": _money(room + tax),
                }
            plans["points"] = {
                "points_per_night": rt["points_per_night"],
                "points_total": rt["points_per_night"] * nights,
            }
            option["rate_plans"] = plans
        options.append(option)
    return {
        "hotel_id": hotel_id,
        "check_in": start.isoformat(),
        "check_out": end.isoformat(),
        "nights": nights,
        "advance_purchase_offered": ap_ok,
        "room_types": options,
    }


@tool("read")
def get_cancellation_quote(db: Database, reservation_id: str) -> dict:
    """Say what cancelling a confirmed reservation now would cost, and until when it is free; changes nothing.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "cancelled")
    return _cancellation_terms(db, res)


@tool("read")
def get_folio(db: Database, reservation_id: str) -> dict:
    """Get a reservation's folio (the itemised bill): every charge with its tax, and the totals.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
    """
    res = db.require("reservations", reservation_id)
    charges = db.find("folio_charges", reservation_id=reservation_id)
    charges.sort(key=lambda c: (c["posted_on"], c["charge_id"]))
    active = [c for c in charges if not c["reversed"]]
    amount = sum((_d(c["amount"]) for c in active), Decimal(0))
    tax = sum((_d(c["tax"]) for c in active), Decimal(0))
    card = None
    if res.get("payment_method_id"):
        pm = db.require("payment_methods", res["payment_method_id"])
        card = f"{pm['brand']} ending {pm['last4']}"
    return {
        "reservation_id": reservation_id,
        "status": res["status"],
        "charges": charges,
        "subtotal": _money(amount),
        "tax_total": _money(tax),
        "folio_total": _money(amount + tax),
        "card_on_file": card,
    }


@tool("read")
def get_loyalty_account(db: Database, loyalty_id: str) -> dict:
    """Get a loyalty account: holder, tier, points balance, qualifying nights this year and recent activity.

    Args:
        loyalty_id: The loyalty number, such as "LK1234567".
    """
    account = db.require("loyalty_accounts", loyalty_id)
    guest = db.require("guests", account["guest_id"])
    txns = db.find("loyalty_transactions", loyalty_id=loyalty_id)
    txns.sort(key=lambda t: (t["posted_on"], t["txn_id"]), reverse=True)
    tier = account["tier"]
    nxt = TIER_ORDER.index(tier) + 1
    progress = None
    if nxt < len(TIER_ORDER):
        target = TIER_ORDER[nxt]
        progress = {
            "next_tier": target,
            "qualifying_nights_required": TIER_THRESHOLDS[target],
            "qualifying_nights_to_go": max(
                TIER_THRESHOLDS[target] - account["qualifying_nights_ytd"], 0
            ),
        }
    return {
        **account,
        "holder_name": f"{guest['first_name']} {guest['last_name']}",
        "next_tier_progress": progress,
        "recent_transactions": txns[:10],
    }


# ----- writes ------------------------------------------------------------------------------------


@tool("write")
def create_reservation(
    db: Database,
    guest_id: str,
    hotel_id: str,
    room_type_id: str,
    check_in: str,
    check_out: str,
    adults: int,
    rate_plan: str,
    payment_method_id: str,
    children: int = 0,
    add_ons: list[str] | None = None,
    special_requests: str = "",
) -> dict:
    """Book a new reservation for a guest.

    Args:
        guest_id: The guest's id; the reservation is made in this guest's name.
        hotel_id: The hotel's id, such as "BOS".
        room_type_id: The room type's id, such as "BOS-DLK".
        check_in: Arrival date, YYYY-MM-DD.
        check_out: Departure date, YYYY-MM-DD.
        adults: Number of adults (at least 1).
        rate_plan: "flexible", "advance_purchase" or "points".
        payment_method_id: A card on the guest's own profile, such as "PM0001"; it guarantees the stay (and pays incidentals on points stays).
        children: Number of children under 18.
        add_ons: Add-ons to include: any of "breakfast" and "parking".
        special_requests: Free-text requests for the hotel (high floor, crib...).
    """
    guest = db.require("guests", guest_id)
    hotel = db.require("hotels", hotel_id)
    room_type = db.require("room_types", room_type_id, "room type")
    if room_type["hotel_id"] != hotel_id:
        raise ToolError(
            f"room type {room_type_id} belongs to hotel {room_type['hotel_id']}, not {hotel_id}"
        )
    start, end = _stay_dates(db, check_in, check_out)
    nights = (end - start).days
    if adults < 1 or children < 0:
        raise ToolError(
            "a reservation needs at least one adult and a non-negative number of children"
        )
    if adults + children > room_type["max_occupancy"]:
        raise ToolError(
            f"{room_type['name']} sleeps at most {room_type['max_occupancy']} guests;"
            f" {adults + children} were requested"
        )
    if rate_plan not in ("flexible", "advance_purchase", "points"):
        raise ToolError(
            f"unknown rate plan {rate_plan!r}; use flexible, advance_purchase or points"
        )
    if rate_plan == "advance_purchase" and (start - db.today()).days < ADVANCE_PURCHASE_MIN_DAYS:
        raise ToolError(
            f"the Advance Purchase rate must be booked at least {ADVANCE_PURCHASE_MIN_DAYS} days"
            " before arrival"
        )
    pm = db.require("payment_methods", payment_method_id, "payment method")
    if pm["guest_id"] != guest_id:
        raise ToolError(f"payment method {payment_method_id} is not on guest {guest_id}'s profile")
    if (pm["exp_year"], pm["exp_month"]) < (end.year, end.month):
        raise ToolError(
            f"the {pm['brand']} ending {pm['last4']} expires {pm['exp_month']:02d}/{pm['exp_year']},"
            " before the stay ends"
        )
    chosen = list(dict.fromkeys(add_ons or []))
    for add_on in chosen:
        if add_on not in ADD_ONS:
            raise ToolError(f"unknown add-on {add_on!r}; add-ons are breakfast and parking")
        if add_on == "parking" and hotel["parking_fee"] is None:
            raise ToolError(f"{hotel['name']} has no parking to book: {hotel['parking_notes']}")
    if _available(db, room_type_id, start, end) < 1:
        raise ToolError(
            f"no {room_type['name']} is available at {hotel['name']} for {start} to {end}"
        )
    reservation_id = db.new_id("reservations", "R", width=5)
    record = {
        "reservation_id": reservation_id,
        "guest_id": guest_id,
        "hotel_id": hotel_id,
        "room_type_id": room_type_id,
        "booked_room_type_id": room_type_id,
        "check_in": start.isoformat(),
        "check_out": end.isoformat(),
        "adults": adults,
        "children": children,
        "rate_plan": rate_plan,
        "nightly_rate": _plan_rate(room_type, rate_plan),
        "points_per_night": room_type["points_per_night"] if rate_plan == "points" else 0,
        "status": "confirmed",
        "add_ons": [a for a in ADD_ONS if a in chosen],
        "payment_method_id": payment_method_id,
        "booked_on": db.today().isoformat(),
        "special_requests": special_requests,
    }
    if rate_plan == "points":
        if not guest.get("loyalty_id"):
            raise ToolError(f"guest {guest_id} has no loyalty account, so cannot book with points")
        db.insert("reservations", record)
        _post_points(
            db,
            guest["loyalty_id"],
            "redeem",
            -room_type["points_per_night"] * nights,
            reservation_id,
            f"Reward stay {hotel_id} {start} to {end}",
        )
    else:
        db.insert("reservations", record)
    return _reservation_view(db, db.require("reservations", reservation_id))


@tool("write")
def change_reservation_dates(
    db: Database, reservation_id: str, new_check_in: str, new_check_out: str
) -> dict:
    """Move a Flexible-rate reservation to new dates in the same room type.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        new_check_in: The new arrival date, YYYY-MM-DD.
        new_check_out: The new departure date, YYYY-MM-DD.
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "changed")
    if res["rate_plan"] != "flexible":
        raise ToolError(
            f"reservation {reservation_id} is on the {res['rate_plan']} rate; only Flexible-rate"
            " reservations can change dates"
        )
    if db.now() >= _free_cancel_deadline(db, res):
        raise ToolError(
            f"reservation {reservation_id} is inside the 48-hour window before arrival; its dates"
            " can no longer be changed"
        )
    start, end = _stay_dates(db, new_check_in, new_check_out)
    if start.isoformat() == res["check_in"] and end.isoformat() == res["check_out"]:
        raise ToolError("the new dates are the same as the current ones")
    if _available(db, res["room_type_id"], start, end, exclude_reservation=reservation_id) < 1:
        room_type = db.require("room_types", res["room_type_id"])
        raise ToolError(f"no {room_type['name']} is available for {start} to {end}")
    res = db.update(
        "reservations",
        reservation_id,
        check_in=start.isoformat(),
        check_out=end.isoformat(),
    )
    return _reservation_view(db, res)


@tool("write")
def cancel_reservation(
    db: Database, reservation_id: str, reason: str, waive_fee: bool = False
) -> dict:
    """Cancel a confirmed reservation, charging any cancellation fee to its card (or refunding points).

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        reason: Why the guest cancels, in their words.
        waive_fee: Waive the cancellation fee (or forfeited points).
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "cancelled")
    terms = _cancellation_terms(db, res)
    fee = 0.0
    if res["rate_plan"] == "points":
        refund = terms["points_refunded"] + (terms["points_forfeited"] if waive_fee else 0)
        guest = db.require("guests", res["guest_id"])
        if refund and guest.get("loyalty_id"):
            _post_points(
                db, guest["loyalty_id"], "refund", refund, reservation_id, "Reward stay cancelled"
            )
    elif terms["fee_total"] and not waive_fee:
        fee = terms["fee_total"]
        _post_charge(
            db,
            reservation_id,
            "cancellation_fee",
            "Cancellation fee"
            + (
                " (non-refundable rate)"
                if res["rate_plan"] == "advance_purchase"
                else " (one night)"
            ),
            terms["fee_amount"],
            terms["fee_tax"],
        )
    had_fee = bool(terms["fee_total"] or terms["points_forfeited"])
    res = db.update(
        "reservations",
        reservation_id,
        status="cancelled",
        cancelled_on=db.today().isoformat(),
        cancel_reason=reason,
        cancellation_fee=fee,
        fee_waived=bool(waive_fee and had_fee),
    )
    return {
        "reservation_id": reservation_id,
        "status": res["status"],
        "cancellation_fee_charged": fee,
        "fee_waived": res["fee_waived"],
        "points_refunded": terms["points_refunded"]
        + (terms["points_forfeited"] if waive_fee else 0),
    }


@tool("write")
def upgrade_room(
    db: Database, reservation_id: str, new_room_type_id: str, complimentary: bool = False
) -> dict:
    """Move a confirmed cash-rate reservation to a higher room category at the same hotel.

    A paid upgrade re-prices every night at the new room type's rate for the reservation's rate plan; a complimentary upgrade keeps the nightly rate.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        new_room_type_id: The higher room type, such as "BOS-JRS".
        complimentary: True for a complimentary elite upgrade (Gold and Platinum, one category).
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "upgraded")
    if res["rate_plan"] == "points":
        raise ToolError("points reservations cannot be upgraded")
    current = db.require("room_types", res["room_type_id"])
    target = db.require("room_types", new_room_type_id, "room type")
    if target["hotel_id"] != res["hotel_id"]:
        raise ToolError(f"room type {new_room_type_id} is not at hotel {res['hotel_id']}")
    if target["category_rank"] <= current["category_rank"]:
        raise ToolError(
            f"{target['name']} is not a higher category than {current['name']}; only upgrades are possible"
        )
    if res["adults"] + res["children"] > target["max_occupancy"]:
        raise ToolError(f"{target['name']} sleeps at most {target['max_occupancy']} guests")
    start = date.fromisoformat(res["check_in"])
    end = date.fromisoformat(res["check_out"])
    if _available(db, new_room_type_id, start, end) < 1:
        raise ToolError(f"no {target['name']} is available for {start} to {end}")
    nights = _nights(res)
    old_rate = _d(res["nightly_rate"])
    if complimentary:
        tier = _tier(db, res["guest_id"])
        if tier not in ELITE_UPGRADE_TIERS:
            raise ToolError(
                f"complimentary upgrades are a Gold and Platinum benefit; this guest's tier is {tier}"
            )
        if target["category_rank"] != current["category_rank"] + 1:
            raise ToolError("a complimentary upgrade is limited to the next room category")
        if res.get("upgrade") == "complimentary":
            raise ToolError("this reservation already received its complimentary upgrade")
        new_rate = old_rate
    else:
        new_rate = _d(_plan_rate(target, res["rate_plan"]))
    res = db.update(
        "reservations",
        reservation_id,
        room_type_id=new_room_type_id,
        nightly_rate=_money(new_rate),
        upgrade="complimentary" if complimentary else "paid",
    )
    view = _reservation_view(db, res)
    view["upgrade_cost_before_tax"] = _money((new_rate - old_rate) * nights)
    return view


@tool("write")
def add_add_on(db: Database, reservation_id: str, add_on: str) -> dict:
    """Add breakfast or parking to a confirmed reservation for every night of the stay.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        add_on: "breakfast" or "parking".
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "given add-ons")
    if add_on not in ADD_ONS:
        raise ToolError(f"unknown add-on {add_on!r}; add-ons are breakfast and parking")
    if add_on in res["add_ons"]:
        raise ToolError(f"reservation {reservation_id} already includes {add_on}")
    hotel = db.require("hotels", res["hotel_id"])
    if add_on == "parking" and hotel["parking_fee"] is None:
        raise ToolError(f"{hotel['name']} has no parking to book: {hotel['parking_notes']}")
    chosen = [*res["add_ons"], add_on]
    res = db.update("reservations", reservation_id, add_ons=[a for a in ADD_ONS if a in chosen])
    return _reservation_view(db, res)


@tool("write")
def remove_add_on(db: Database, reservation_id: str, add_on: str) -> dict:
    """Remove breakfast or parking from a confirmed reservation before arrival.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        add_on: "breakfast" or "parking".
    """
    res = db.require("reservations", reservation_id)
    _require_confirmed(res, "changed")
    if add_on not in res["add_ons"]:
        raise ToolError(f"reservation {reservation_id} does not include {add_on!r}")
    res = db.update(
        "reservations", reservation_id, add_ons=[a for a in res["add_ons"] if a != add_on]
    )
    return _reservation_view(db, res)


@tool("write")
def request_late_checkout(db: Database, reservation_id: str, checkout_time: str) -> dict:
    """Set a late checkout time on a confirmed or in-house reservation; the fee (if any) depends on the guest's tier and is added to the bill.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        checkout_time: "12:00", "13:00", "14:00" or "16:00".
    """
    res = db.require("reservations", reservation_id)
    if res["status"] not in ACTIVE:
        raise ToolError(
            f"reservation {reservation_id} is {res['status']}; late checkout is only for upcoming"
            " or in-house stays"
        )
    if checkout_time not in LATE_CHECKOUT_TIMES:
        raise ToolError(
            f"late checkout can be {', '.join(LATE_CHECKOUT_TIMES)}; {checkout_time!r} is not offered"
        )
    tier = _tier(db, res["guest_id"])
    fee = LATE_CHECKOUT_FEES[tier][checkout_time]
    if fee is None:
        raise ToolError(
            f"{checkout_time} checkout is a Platinum benefit; it is not offered to this guest"
        )
    res = db.update(
        "reservations", reservation_id, late_checkout=checkout_time, late_checkout_fee=fee
    )
    return {
        "reservation_id": reservation_id,
        "check_out": res["check_out"],
        "late_checkout": checkout_time,
        "late_checkout_fee": fee,
        "tier": tier,
    }


@tool("write")
def update_guest_profile(
    db: Database,
    guest_id: str,
    email: str | None = None,
    phone: str | None = None,
    preferences: str | None = None,
    marketing_opt_in: bool | None = None,
) -> dict:
    """Change a guest's email, phone, stay preferences or marketing choice; leave out what does not change.

    Args:
        guest_id: The guest's id, such as "G1001".
        email: The new email address.
        phone: The new phone number, such as "+1-617-555-0142".
        preferences: The new stay preferences text (replaces the old one).
        marketing_opt_in: Whether the guest wants marketing emails.
    """
    db.require("guests", guest_id)
    changes: dict = {}
    if email is not None:
        email = email.strip().lower()
        if not EMAIL_RE.match(email):
            raise ToolError(f"{email!r} is not a valid email address")
        if any(g["guest_id"] != guest_id for g in db.find("guests", email=email)):
            raise ToolError("that email address belongs to another guest profile")
        changes["email"] = email
    if phone is not None:
        phone = phone.strip()
        if not PHONE_RE.match(phone):
            raise ToolError(f"{phone!r} is not a valid phone number")
        changes["phone"] = phone
    if preferences is not None:
        changes["preferences"] = preferences.strip()
    if marketing_opt_in is not None:
        changes["marketing_opt_in"] = marketing_opt_in
    if not changes:
        raise ToolError("nothing to change: give an email, phone, preferences or marketing_opt_in")
    return db.update("guests", guest_id, **changes)


@tool("write")
def enroll_loyalty(db: Database, guest_id: str) -> dict:
    """Enroll a guest in Larkspur Rewards; the new account starts at Member tier with 0 points.

    Args:
        guest_id: The guest's id, such as "G1001".
    """
    guest = db.require("guests", guest_id)
    if guest.get("loyalty_id"):
        raise ToolError(f"guest {guest_id} is already a member ({guest['loyalty_id']})")
    loyalty_id = db.new_id("loyalty_accounts", "LK", width=7)
    account = db.insert(
        "loyalty_accounts",
        {
            "loyalty_id": loyalty_id,
            "guest_id": guest_id,
            "tier": "member",
            "points_balance": 0,
            "qualifying_nights_ytd": 0,
            "lifetime_points": 0,
            "enrolled_on": db.today().isoformat(),
        },
    )
    db.update("guests", guest_id, loyalty_id=loyalty_id)
    return account


@tool("write")
def transfer_points(db: Database, from_loyalty_id: str, to_loyalty_id: str, points: int) -> dict:
    """Move points from one loyalty account to another.

    Args:
        from_loyalty_id: The sending account's loyalty number.
        to_loyalty_id: The receiving account's loyalty number.
        points: How many points to move (at least 1000, in steps of 500).
    """
    sender = db.require("loyalty_accounts", from_loyalty_id, "loyalty account")
    receiver = db.require("loyalty_accounts", to_loyalty_id, "loyalty account")
    if sender["loyalty_id"] == receiver["loyalty_id"]:
        raise ToolError("the sending and receiving accounts are the same")
    if points < TRANSFER_MIN or points % TRANSFER_STEP:
        raise ToolError(
            f"transfers must be at least {TRANSFER_MIN} points and in steps of {TRANSFER_STEP}"
        )
    year = str(db.today().year)
    sent = -sum(
        t["points"]
        for t in db.find("loyalty_transactions", loyalty_id=from_loyalty_id)
        if t["kind"] == "transfer_out" and t["posted_on"].startswith(year)
    )
    if sent + points > TRANSFER_YEARLY_CAP:
        raise ToolError(
            f"an account can send at most {TRANSFER_YEARLY_CAP} points a calendar year;"
            f" {sent} have been sent in {year}"
        )
    receiver_guest = db.require("guests", receiver["guest_id"])
    sender_guest = db.require("guests", sender["guest_id"])
    _post_points(
        db,
        from_loyalty_id,
        "transfer_out",
        -points,
        None,
        f"Transfer to {to_loyalty_id} ({receiver_guest['first_name']} {receiver_guest['last_name']})",
    )
    _post_points(
        db,
        to_loyalty_id,
        "transfer_in",
        points,
        None,
        f"Transfer from {from_loyalty_id} ({sender_guest['first_name']} {sender_guest['last_name']})",
    )
    return {
        "from_loyalty_id": from_loyalty_id,
        "from_balance": db.require("loyalty_accounts", from_loyalty_id)["points_balance"],
        "to_loyalty_id": to_loyalty_id,
        "points": points,
    }


@tool("write")
def reverse_folio_charge(db: Database, reservation_id: str, charge_id: str, reason: str) -> dict:
    """Reverse (remove) one charge, with its tax, from a reservation's folio.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
        charge_id: The folio charge's id, such as "FC000123".
        reason: Why the charge is reversed.
    """
    db.require("reservations", reservation_id)
    charge = db.require("folio_charges", charge_id, "folio charge")
    if charge["reservation_id"] != reservation_id:
        raise ToolError(f"charge {charge_id} is not on reservation {reservation_id}'s folio")
    if charge["reversed"]:
        raise ToolError(f"charge {charge_id} was already reversed")
    if charge["category"] in NON_REVERSIBLE:
        raise ToolError(
            f"{charge['category'].replace('_', ' ')} charges cannot be reversed by the desk"
        )
    posted = date.fromisoformat(charge["posted_on"])
    if (db.today() - posted).days > REVERSAL_WINDOW_DAYS:
        raise ToolError(
            f"charge {charge_id} was posted on {posted}, more than {REVERSAL_WINDOW_DAYS} days ago"
        )
    updated = db.update("folio_charges", charge_id, reversed=True, reversal_reason=reason)
    folio = get_folio(db, reservation_id)
    return {"reversed_charge": updated, "new_folio_total": folio["folio_total"]}


@tool("write")
def email_folio(db: Database, reservation_id: str) -> dict:
    """Email a reservation's folio (invoice) to the email address on the guest's profile.

    Args:
        reservation_id: The reservation's confirmation number, such as "R30001".
    """
    res = db.require("reservations", reservation_id)
    if res["status"] not in ("checked_in", "checked_out", "cancelled", "no_show"):
        raise ToolError(
            f"reservation {reservation_id} has not started; there is no folio to send yet"
        )
    if not db.find("folio_charges", reservation_id=reservation_id):
        raise ToolError(f"reservation {reservation_id} has no charges on its folio")
    guest = db.require("guests", res["guest_id"])
    db.update(
        "reservations",
        reservation_id,
        folio_emailed_to=guest["email"],
        folio_emailed_at=db.now().isoformat(),
    )
    folio = get_folio(db, reservation_id)
    return {
        "reservation_id": reservation_id,
        "sent_to": guest["email"],
        "folio_total": folio["folio_total"],
    }
