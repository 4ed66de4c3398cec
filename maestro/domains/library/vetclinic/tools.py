"""Tools of the Cedar Hollow Veterinary Group's customer-service desk."""

import re
from datetime import date, datetime, timedelta
from typing import Literal

from maestro.domains.sdk import Database, ToolError, tool

LATE_CANCELLATION_FEE = 35.00
DELIVERY_FEE = 7.50
WELLNESS_PLAN_DISCOUNT = 0.10
OVERDUE_BLOCK_DAYS = 60
EXAM_VALID_DAYS = 365
NOTICE_HOURS = 24
MAX_AUTHORIZED_CONTACTS = 3
PAYMENT_TERMS_DAYS = 30
SUPPORTED_SPECIES = ("dog", "cat", "rabbit", "guinea_pig", "ferret", "bird")
_EMAIL = re.compile(r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$")
_APPOINTMENT_STATUSES = ("scheduled", "completed", "cancelled", "no_show")


# ----- helpers ------------------------------------------------------------------------------


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def _parse_date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"{what} must be a date written YYYY-MM-DD, not {value!r}") from None


def _start(record: dict) -> datetime:
    return datetime.fromisoformat(record["start"])


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def _phone_digits(value: str) -> str:
    digits = _digits(value)
    return digits[1:] if len(digits) == 11 and digits.startswith("1") else digits


def _format_phone(value: str) -> str:
    digits = _phone_digits(value)
    if len(digits) != 10:
        raise ToolError(f"phone number {value!r} must have 10 digits, such as 541-555-0134")
    return f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"


def _capitalize_words(value: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in value.split())


def _age_weeks(pet: dict, on: date) -> int:
    return (on - date.fromisoformat(pet["date_of_birth"])).days // 7


def _balance(invoice: dict) -> float:
    return _money(invoice["total"] - invoice["amount_paid"])


def _vet_name(db: Database, vet_id: str | None) -> str | None:
    if vet_id is None:
        return None
    vet = db.get("vets", vet_id)
    return vet["name"] if vet else None


def _pet_summary(pet: dict) -> dict:
    return {
        "pet_id": pet["pet_id"],
        "name": pet["name"],
        "species": pet["species"],
        "breed": pet["breed"],
        "status": pet["status"],
    }


def _describe_appointment(db: Database, appt: dict) -> dict:
    out = dict(appt)
    pet = db.get("pets", appt["pet_id"])
    clinic = db.get("clinics", appt["clinic_id"])
    service = db.get("services", appt["service_code"])
    out["pet_name"] = pet["name"] if pet else None
    out["vet_name"] = _vet_name(db, appt["vet_id"])
    out["clinic_name"] = clinic["name"] if clinic else None
    out["service_name"] = service["name"] if service else None
    return out


def _card_expired(card: dict, today: date) -> bool:
    return (card["exp_year"], card["exp_month"]) < (today.year, today.month)


def _overdue_invoices(db: Database, owner_id: str) -> list[dict]:
    cutoff = db.today() - timedelta(days=OVERDUE_BLOCK_DAYS)
    return [
        inv
        for inv in db.find("invoices", owner_id=owner_id, status="open")
        if date.fromisoformat(inv["due_on"]) < cutoff and _balance(inv) > 0
    ]


def _check_slot_fits(db: Database, pet: dict, slot: dict, service: dict) -> None:
    """Raise when the pet, the service and the slot's vet and clinic do not go together."""
    clinic = db.require("clinics", slot["clinic_id"])
    vet = db.require("vets", slot["vet_id"])
    species = pet["species"]
    if species not in service["species"]:
        raise ToolError(f"{service['name']} is not offered for {species.replace('_', ' ')}s")
    if service["service_code"] not in clinic["services"]:
        raise ToolError(f"{clinic['name']} does not offer {service['name']}")
    if species not in vet["species"]:
        raise ToolError(f"{vet['name']} does not treat {species.replace('_', ' ')}s")
    needed = service.get("requires_specialty")
    if needed and needed not in vet["specialties"]:
        raise ToolError(f"{service['name']} must be booked with a vet whose specialty is {needed}")
    weeks = _age_weeks(pet, _start(slot).date())
    if service.get("min_age_weeks") is not None and weeks < service["min_age_weeks"]:
        raise ToolError(
            f"{service['name']} is for pets at least {service['min_age_weeks']} weeks old;"
            f" {pet['name']} would be {weeks} weeks old"
        )
    if service.get("max_age_weeks") is not None and weeks > service["max_age_weeks"]:
        raise ToolError(
            f"{service['name']} is for pets up to {service['max_age_weeks']} weeks old;"
            f" {pet['name']} would be {weeks} weeks old"
        )


def _check_pet_free(db: Database, pet_id: str, start: str, ignore: str | None = None) -> None:
    for appt in db.find("appointments", pet_id=pet_id, status="scheduled"):
        if appt["start"] == start and appt["appointment_id"] != ignore:
            raise ToolError(
                f"pet {pet_id} already has appointment {appt['appointment_id']} at {start}"
            )


def _open_future_slot(db: Database, slot_id: str) -> dict:
    slot = db.require("slots", slot_id)
    if slot["status"] != "open":
        raise ToolError(f"slot {slot_id} is already booked")
    if _start(slot) <= db.now():
        raise ToolError(f"slot {slot_id} starts at {slot['start']}, which has already passed")
    return slot


# ----- read tools ---------------------------------------------------------------------------


@tool("read")
def find_owner(db: Database, phone: str = "", email: str = "") -> list:
    """Find client accounts by the phone number or the email address on file.

    Returns each matching owner with their authorized contacts and pets, so that the caller's
    identity can be checked against the account.

    Args:
        phone: The phone number the caller gives, such as "541-555-0134" (any punctuation).
        email: The email address the caller gives.
    """
    if not phone.strip() and not email.strip():
        raise ToolError("give a phone number or an email address to search by")
    phone_digits = _phone_digits(phone)
    email_norm = email.strip().lower()

    def wanted(owner: dict) -> bool:
        if phone_digits and _phone_digits(owner["phone"]) != phone_digits:
            return False
        return not (email_norm and owner["email"].lower() != email_norm)

    matches = []
    # Filtering inside scan copies only the matching owners, not the whole table.
    for owner in db.scan("owners", where=wanted):
        pets = db.find("pets", owner_id=owner["owner_id"])
        matches.append(
            {
                "owner_id": owner["owner_id"],
                "first_name": owner["first_name"],
                "last_name": owner["last_name"],
                "authorized_contacts": owner["authorized_contacts"],
                "pets": [_pet_summary(p) for p in pets],
            }
        )
    if not matches:
        raise ToolError("no client account matches that phone number or email address")
    return matches


@tool("read")
def get_owner(db: Database, owner_id: str) -> dict:
    """Get a client account: contact details, authorized contacts, pets and cards on file.

    Args:
        owner_id: The owner's account id, such as "C1001".
    """
    owner = db.require("owners", owner_id)
    today = db.today()
    owner["pets"] = [_pet_summary(p) for p in db.find("pets", owner_id=owner_id)]
    owner["cards_on_file"] = [
        {
            "card_id": c["card_id"],
            "brand": c["brand"],
            "last4": c["last4"],
            "expires": f"{c['exp_month']:02d}/{c['exp_year']}",
            "expired": _card_expired(c, today),
        }
        for c in db.find("payment_cards", owner_id=owner_id)
    ]
    return owner


@tool("read")
def get_pet(db: Database, pet_id: str) -> dict:
    """Get a pet's record: species, breed, age, wellness plan membership and primary vet.

    Args:
        pet_id: The pet's id, such as "P2001".
    """
    pet = db.require("pets", pet_id)
    pet["age_years"] = round(_age_weeks(pet, db.today()) / 52.18, 1)
    pet["primary_vet_name"] = _vet_name(db, pet.get("primary_vet_id"))
    return pet


@tool("read")
def list_appointments(db: Database, owner_id: str, status: str = "") -> list:
    """List the appointments of all of an owner's pets, oldest first.

    Args:
        owner_id: The owner's account id.
        status: Only appointments with this status: "scheduled", "completed", "cancelled" or
            "no_show". Empty for all.
    """
    db.require("owners", owner_id)
    if status and status not in _APPOINTMENT_STATUSES:
        raise ToolError(f"status must be one of {', '.join(_APPOINTMENT_STATUSES)}")
    appts = db.find("appointments", owner_id=owner_id)
    if status:
        appts = [a for a in appts if a["status"] == status]
    appts.sort(key=lambda a: (a["start"], a["appointment_id"]))
    return [_describe_appointment(db, a) for a in appts]


@tool("read")
def get_appointment(db: Database, appointment_id: str) -> dict:
    """Get one appointment with its pet, vet, clinic and service names.

    Args:
        appointment_id: The appointment's id, such as "A5001".
    """
    return _describe_appointment(db, db.require("appointments", appointment_id))


@tool("read")
def search_available_slots(
    db: Database, clinic_id: str, date: str, vet_id: str = "", species: str = ""
) -> list:
    """List the open appointment slots at a clinic on one day, earliest first.

    Args:
        clinic_id: The clinic: "downtown", "riverside" or "eastgate".
        date: The day, written YYYY-MM-DD.
        vet_id: Only this vet's slots, such as "V01". Empty for every vet.
        species: Only slots with vets who treat this species, such as "rabbit". Empty for all.
    """
    db.require("clinics", clinic_id)
    day = _parse_date(date, "date")
    if vet_id:
        db.require("vets", vet_id)
    wanted = species.strip().lower().replace(" ", "_").replace("-", "_")
    if wanted.endswith("s") and wanted[:-1] in SUPPORTED_SPECIES:
        wanted = wanted[:-1]
    now = db.now()
    out = []
    for slot in db.find("slots", clinic_id=clinic_id, status="open"):
        start = _start(slot)
        if start.date() != day or start <= now:
            continue
        if vet_id and slot["vet_id"] != vet_id:
            continue
        vet = db.require("vets", slot["vet_id"])
        if wanted and wanted not in vet["species"]:
            continue
        out.append(
            {
                "slot_id": slot["slot_id"],
                "start": slot["start"],
                "duration_min": slot["duration_min"],
                "vet_id": vet["vet_id"],
                "vet_name": vet["name"],
                "vet_treats": vet["species"],
                "vet_specialties": vet["specialties"],
            }
        )
    out.sort(key=lambda s: (s["start"], s["vet_id"]))
    return out


@tool("read")
def list_services(db: Database) -> list:
    """List every service with its fee, the species it is for, age limits and whether the desk
    can book it.
    """
    return db.scan("services")


@tool("read")
def list_clinics(db: Database) -> list:
    """List the group's clinics with address, phone, hours, services offered and vets."""
    out = []
    for clinic in db.scan("clinics"):
        clinic["vets"] = [
            {
                "vet_id": v["vet_id"],
                "name": v["name"],
                "species": v["species"],
                "specialties": v["specialties"],
                "working_days": v["working_days"],
            }
            for v in db.find("vets", clinic_id=clinic["clinic_id"])
        ]
        out.append(clinic)
    return out


@tool("read")
def get_vaccination_history(db: Database, pet_id: str) -> dict:
    """Get a pet's vaccinations and, for each vaccine, when the next dose is due and whether it is
    current, due within 30 days, or overdue.

    Args:
        pet_id: The pet's id.
    """
    pet = db.require("pets", pet_id)
    today = db.today()
    records = db.find("vaccinations", pet_id=pet_id)
    records.sort(key=lambda v: (v["given_on"], v["vaccination_id"]))
    latest: dict[str, dict] = {}
    for rec in records:
        latest[rec["vaccine"]] = rec
    summary = []
    for vaccine, rec in sorted(latest.items()):
        due = date.fromisoformat(rec["due_on"])
        if due < today:
            state = "overdue"
        elif due <= today + timedelta(days=30):
            state = "due_soon"
        else:
            state = "current"
        summary.append(
            {
                "vaccine": vaccine,
                "last_given": rec["given_on"],
                "next_due": rec["due_on"],
                "status": state,
            }
        )
    return {"pet_id": pet_id, "pet_name": pet["name"], "summary": summary, "history": records}


@tool("read")
def list_prescriptions(db: Database, pet_id: str) -> list:
    """List a pet's prescriptions with refills remaining, expiry and prescribing vet.

    Args:
        pet_id: The pet's id.
    """
    db.require("pets", pet_id)
    out = []
    for rx in db.find("prescriptions", pet_id=pet_id):
        rx["prescribing_vet_name"] = _vet_name(db, rx["vet_id"])
        rx["refill_requests"] = [
            {k: r[k] for k in ("request_id", "requested_on", "fulfillment", "status")}
            for r in db.find("refill_requests", prescription_id=rx["prescription_id"])
        ]
        out.append(rx)
    return out


@tool("read")
def list_invoices(db: Database, owner_id: str) -> list:
    """List an owner's invoices with their balances, oldest first.

    Args:
        owner_id: The owner's account id.
    """
    db.require("owners", owner_id)
    out = []
    for inv in db.find("invoices", owner_id=owner_id):
        inv["balance"] = _balance(inv) if inv["status"] == "open" else 0.0
        out.append(inv)
    out.sort(key=lambda i: (i["issued_on"], i["invoice_id"]))
    return out


@tool("read")
def get_invoice(db: Database, invoice_id: str) -> dict:
    """Get one invoice with its balance and the payments (and refunds) made on it.

    Args:
        invoice_id: The invoice's id, such as "INV8001".
    """
    inv = db.require("invoices", invoice_id)
    inv["balance"] = _balance(inv) if inv["status"] == "open" else 0.0
    payments = db.find("payments", invoice_id=invoice_id)
    for p in payments:
        card = db.get("payment_cards", p["card_id"])
        p["card"] = f"{card['brand']} ending {card['last4']}" if card else None
    inv["payments"] = payments
    return inv


# ----- write tools --------------------------------------------------------------------------


@tool("write")
def book_appointment(db: Database, slot_id: str, pet_id: str, service_code: str) -> dict:
    """Book an open slot for a pet. The fee is the service's fee, less 10% for pets on the
    Wellness Plan.

    Args:
        slot_id: The open slot to book, such as "S7012" (from search_available_slots).
        pet_id: The pet the appointment is for.
        service_code: The service, such as "WELLNESS" or "VACC" (see list_services).
    """
    pet = db.require("pets", pet_id)
    if pet["status"] != "active":
        raise ToolError(f"{pet['name']} ({pet_id}) is recorded as {pet['status']}")
    overdue = _overdue_invoices(db, pet["owner_id"])
    if overdue:
        ids = ", ".join(i["invoice_id"] for i in overdue)
        raise ToolError(
            f"the account has invoices more than {OVERDUE_BLOCK_DAYS} days past due ({ids});"
            " they must be paid before a new appointment can be booked"
        )
    service = db.require("services", service_code)
    if not service["desk_bookable"]:
        raise ToolError(
            f"{service['name']} cannot be booked by the front desk; the vet's team schedules it"
        )
    slot = _open_future_slot(db, slot_id)
    _check_slot_fits(db, pet, slot, service)
    _check_pet_free(db, pet_id, slot["start"])
    fee = service["fee"] * (1 - WELLNESS_PLAN_DISCOUNT) if pet["wellness_plan"] else service["fee"]
    appt = db.insert(
        "appointments",
        {
            "appointment_id": db.new_id("appointments", "A", width=4),
            "pet_id": pet_id,
            "owner_id": pet["owner_id"],
            "vet_id": slot["vet_id"],
            "clinic_id": slot["clinic_id"],
            "service_code": service_code,
            "slot_id": slot_id,
            "start": slot["start"],
            "duration_min": slot["duration_min"],
            "status": "scheduled",
            "fee": _money(fee),
            "booked_on": db.today().isoformat(),
            "cancelled_on": None,
        },
    )
    db.update("slots", slot_id, status="booked")
    return _describe_appointment(db, appt)


@tool("write")
def reschedule_appointment(db: Database, appointment_id: str, new_slot_id: str) -> dict:
    """Move a scheduled appointment to another open slot (same pet and service). Only possible
    at least 24 hours before the current start.

    Args:
        appointment_id: The appointment to move.
        new_slot_id: The open slot to move it to.
    """
    appt = db.require("appointments", appointment_id)
    if appt["status"] != "scheduled":
        raise ToolError(f"appointment {appointment_id} is {appt['status']}, not scheduled")
    if _start(appt) - db.now() < timedelta(hours=NOTICE_HOURS):
        raise ToolError(
            f"appointment {appointment_id} starts at {appt['start']}, less than {NOTICE_HOURS}"
            " hours from now; it can no longer be rescheduled"
        )
    if new_slot_id == appt.get("slot_id"):
        raise ToolError(f"appointment {appointment_id} is already in slot {new_slot_id}")
    slot = _open_future_slot(db, new_slot_id)
    pet = db.require("pets", appt["pet_id"])
    service = db.require("services", appt["service_code"])
    _check_slot_fits(db, pet, slot, service)
    _check_pet_free(db, pet["pet_id"], slot["start"], ignore=appointment_id)
    if appt.get("slot_id"):
        db.update("slots", appt["slot_id"], status="open")
    db.update("slots", new_slot_id, status="booked")
    new = db.update(
        "appointments",
        appointment_id,
        slot_id=new_slot_id,
        vet_id=slot["vet_id"],
        clinic_id=slot["clinic_id"],
        start=slot["start"],
        duration_min=slot["duration_min"],
    )
    return _describe_appointment(db, new)


@tool("write")
def cancel_appointment(db: Database, appointment_id: str) -> dict:
    """Cancel a scheduled appointment and free its slot. Cancelling less than 24 hours before the
    start automatically bills the 35.00 late-cancellation fee.

    Args:
        appointment_id: The appointment to cancel.
    """
    appt = db.require("appointments", appointment_id)
    if appt["status"] != "scheduled":
        raise ToolError(f"appointment {appointment_id} is {appt['status']}, not scheduled")
    now = db.now()
    start = _start(appt)
    if start <= now:
        raise ToolError(
            f"appointment {appointment_id} started at {appt['start']}; it cannot be cancelled"
        )
    today = db.today()
    new = db.update(
        "appointments", appointment_id, status="cancelled", cancelled_on=today.isoformat()
    )
    if appt.get("slot_id"):
        db.update("slots", appt["slot_id"], status="open")
    fee_invoice = None
    if start - now < timedelta(hours=NOTICE_HOURS):
        pet = db.require("pets", appt["pet_id"])
        fee_invoice = db.insert(
            "invoices",
            {
                "invoice_id": db.new_id("invoices", "INV", width=4),
                "owner_id": appt["owner_id"],
                "pet_id": appt["pet_id"],
                "appointment_id": appointment_id,
                "kind": "late_cancellation",
                "description": f"Late cancellation fee: {pet['name']}, {appt['start'][:16].replace('T', ' ')}",
                "issued_on": today.isoformat(),
                "due_on": (today + timedelta(days=PAYMENT_TERMS_DAYS)).isoformat(),
                "total": LATE_CANCELLATION_FEE,
                "amount_paid": 0.0,
                "status": "open",
                "waived_on": None,
            },
        )
    return {
        "appointment": _describe_appointment(db, new),
        "late_cancellation_fee": LATE_CANCELLATION_FEE if fee_invoice else 0.0,
        "fee_invoice_id": fee_invoice["invoice_id"] if fee_invoice else None,
    }


@tool("write")
def request_refill(
    db: Database,
    prescription_id: str,
    fulfillment: Literal["pickup", "delivery"],
    pickup_clinic_id: str = "",
) -> dict:
    """Send a refill request to the pharmacy for a prescription. Home delivery to the address on
    file bills a 7.50 delivery fee.

    Args:
        prescription_id: The prescription to refill, such as "RX3001".
        fulfillment: "pickup" at a clinic or "delivery" to the owner's address on file.
        pickup_clinic_id: For pickup, the clinic: "downtown", "riverside" or "eastgate". Empty
            for delivery.
    """
    rx = db.require("prescriptions", prescription_id)
    pet = db.require("pets", rx["pet_id"])
    today = db.today()
    if pet["status"] != "active":
        raise ToolError(f"{pet['name']} is recorded as {pet['status']}")
    if rx["status"] != "active":
        raise ToolError(f"prescription {prescription_id} is {rx['status']}")
    if date.fromisoformat(rx["expires_on"]) < today:
        raise ToolError(f"prescription {prescription_id} expired on {rx['expires_on']}")
    if rx["refills_remaining"] < 1:
        raise ToolError(f"prescription {prescription_id} has no refills remaining")
    exam_cutoff = (today - timedelta(days=EXAM_VALID_DAYS)).isoformat()
    exams = [
        a
        for a in db.find("appointments", pet_id=pet["pet_id"], status="completed")
        if a["start"][:10] >= exam_cutoff and db.require("services", a["service_code"])["is_exam"]
    ]
    if not exams:
        raise ToolError(
            f"{pet['name']} has had no exam in the last 12 months; an exam is needed before a refill"
        )
    for req in db.find("refill_requests", prescription_id=prescription_id):
        if req["status"] in ("pending", "ready"):
            raise ToolError(
                f"refill request {req['request_id']} for this prescription is already {req['status']}"
            )
    clinic_id = None
    invoice_id = None
    if fulfillment == "pickup":
        if not pickup_clinic_id:
            raise ToolError("a pickup needs pickup_clinic_id")
        clinic_id = db.require("clinics", pickup_clinic_id)["clinic_id"]
    else:
        invoice_id = db.new_id("invoices", "INV", width=4)
        db.insert(
            "invoices",
            {
                "invoice_id": invoice_id,
                "owner_id": pet["owner_id"],
                "pet_id": pet["pet_id"],
                "appointment_id": None,
                "kind": "delivery_fee",
                "description": f"Pharmacy home delivery: {rx['medication']} {rx['strength']} for {pet['name']}",
                "issued_on": today.isoformat(),
                "due_on": (today + timedelta(days=PAYMENT_TERMS_DAYS)).isoformat(),
                "total": DELIVERY_FEE,
                "amount_paid": 0.0,
                "status": "open",
                "waived_on": None,
            },
        )
    db.update("prescriptions", prescription_id, refills_remaining=rx["refills_remaining"] - 1)
    return db.insert(
        "refill_requests",
        {
            "request_id": db.new_id("refill_requests", "RF", width=4),
            "prescription_id": prescription_id,
            "pet_id": pet["pet_id"],
            "owner_id": pet["owner_id"],
            "requested_on": today.isoformat(),
            "fulfillment": fulfillment,
            "pickup_clinic_id": clinic_id,
            "delivery_invoice_id": invoice_id,
            "status": "pending",
        },
    )


@tool("write")
def pay_invoice(db: Database, invoice_id: str, amount: float, card_id: str) -> dict:
    """Charge a card on file toward an open invoice (in full or in part).

    Args:
        invoice_id: The invoice to pay.
        amount: The amount to charge, at most the invoice's balance, such as 68.00.
        card_id: The owner's card on file to charge, such as "CARD1001" (see get_owner).
    """
    inv = db.require("invoices", invoice_id)
    if inv["status"] != "open":
        raise ToolError(f"invoice {invoice_id} is {inv['status']}; there is nothing to pay")
    balance = _balance(inv)
    if amount <= 0:
        raise ToolError("the amount must be more than 0")
    if abs(round(amount, 2) - amount) > 1e-9:
        raise ToolError("the amount must be in whole cents")
    amount = _money(amount)
    if amount > balance:
        raise ToolError(f"the amount {amount:.2f} is more than the balance of {balance:.2f}")
    card = db.require("payment_cards", card_id)
    if card["owner_id"] != inv["owner_id"]:
        raise ToolError(f"card {card_id} is not on file for this invoice's account")
    if _card_expired(card, db.today()):
        raise ToolError(
            f"card {card_id} ({card['brand']} ending {card['last4']}) expired"
            f" {card['exp_month']:02d}/{card['exp_year']}"
        )
    payment = db.insert(
        "payments",
        {
            "payment_id": db.new_id("payments", "PAY", width=4),
            "invoice_id": invoice_id,
            "owner_id": inv["owner_id"],
            "card_id": card_id,
            "amount": amount,
            "paid_on": db.today().isoformat(),
            "refunded_amount": 0.0,
            "refund_reason": None,
            "refunded_on": None,
        },
    )
    paid = _money(inv["amount_paid"] + amount)
    new = db.update(
        "invoices", invoice_id, amount_paid=paid, status="paid" if paid >= inv["total"] else "open"
    )
    return {"payment": payment, "invoice_status": new["status"], "balance": _balance(new)}


@tool("write")
def waive_fee(db: Database, invoice_id: str) -> dict:
    """Waive an unpaid late-cancellation or no-show fee.

    Args:
        invoice_id: The fee invoice to waive.
    """
    inv = db.require("invoices", invoice_id)
    if inv["kind"] not in ("late_cancellation", "no_show"):
        raise ToolError(
            f"invoice {invoice_id} is a {inv['kind'].replace('_', ' ')} invoice; only"
            " late-cancellation and no-show fees can be waived"
        )
    if inv["status"] != "open" or inv["amount_paid"] > 0:
        raise ToolError(f"invoice {invoice_id} is {inv['status']} and cannot be waived")
    return db.update("invoices", invoice_id, status="waived", waived_on=db.today().isoformat())


@tool("write")
def issue_refund(
    db: Database,
    payment_id: str,
    amount: float,
    reason: Literal["duplicate_payment", "overpayment", "service_complaint", "other"],
) -> dict:
    """Refund all or part of a payment to the card it was made with.

    Args:
        payment_id: The payment to refund, such as "PAY9001".
        amount: The amount to refund, at most what is left of the payment.
        reason: "duplicate_payment", "overpayment", "service_complaint" or "other".
    """
    payment = db.require("payments", payment_id)
    left = _money(payment["amount"] - payment["refunded_amount"])
    if amount <= 0:
        raise ToolError("the amount must be more than 0")
    if abs(round(amount, 2) - amount) > 1e-9:
        raise ToolError("the amount must be in whole cents")
    amount = _money(amount)
    if amount > left:
        raise ToolError(f"only {left:.2f} of payment {payment_id} can still be refunded")
    inv = db.require("invoices", payment["invoice_id"])
    new_paid = _money(inv["amount_paid"] - amount)
    changes: dict = {"amount_paid": new_paid}
    if reason in ("service_complaint", "other"):
        changes["total"] = _money(inv["total"] - amount)
    total = changes.get("total", inv["total"])
    if inv["status"] == "paid" and new_paid < total:
        changes["status"] = "open"
    db.update("invoices", inv["invoice_id"], **changes)
    return db.update(
        "payments",
        payment_id,
        refunded_amount=_money(payment["refunded_amount"] + amount),
        refund_reason=reason,
        refunded_on=db.today().isoformat(),
    )


@tool("write")
def update_owner_contact(
    db: Database, owner_id: str, phone: str = "", email: str = "", address: str = ""
) -> dict:
    """Change an owner's phone number, email address or postal address. Fields left empty stay
    as they are.

    Args:
        owner_id: The owner's account id.
        phone: The new phone number, such as "541-555-0188". Empty to keep the current one.
        email: The new email address. Empty to keep the current one.
        address: The new postal address, such as "14 Birch Lane, Millbrook, OR 97401". Empty to
            keep the current one.
    """
    db.require("owners", owner_id)
    changes: dict = {}
    if phone.strip():
        formatted = _format_phone(phone)
        for other in db.find("owners", phone=formatted):
            if other["owner_id"] != owner_id:
                raise ToolError(f"phone number {formatted} is already on another account")
        changes["phone"] = formatted
    if email.strip():
        norm = email.strip().lower()
        if not _EMAIL.match(norm):
            raise ToolError(f"{email!r} is not a valid email address")
        for other in db.find("owners", email=norm):
            if other["owner_id"] != owner_id:
                raise ToolError(f"email address {norm} is already on another account")
        changes["email"] = norm
    if address.strip():
        changes["address"] = " ".join(address.split())
    if not changes:
        raise ToolError("give at least one of phone, email or address to change")
    return db.update("owners", owner_id, **changes)


@tool("write")
def add_authorized_contact(db: Database, owner_id: str, contact_name: str) -> dict:
    """Add a person who may manage appointments, refills and payments on an owner's account
    (at most 3 per account).

    Args:
        owner_id: The owner's account id.
        contact_name: The contact's full name, such as "Jonah Feldman".
    """
    owner = db.require("owners", owner_id)
    name = _capitalize_words(contact_name)
    if len(name.split()) < 2:
        raise ToolError("give the contact's first and last name")
    if name.lower() == f"{owner['first_name']} {owner['last_name']}".lower():
        raise ToolError("the owner of record does not need to be an authorized contact")
    current = owner["authorized_contacts"]
    if name.lower() in (c.lower() for c in current):
        raise ToolError(f"{name} is already an authorized contact")
    if len(current) >= MAX_AUTHORIZED_CONTACTS:
        raise ToolError(
            f"an account can have at most {MAX_AUTHORIZED_CONTACTS} authorized contacts"
        )
    return db.update("owners", owner_id, authorized_contacts=[*current, name])


@tool("write")
def add_pet(
    db: Database,
    owner_id: str,
    name: str,
    species: str,
    breed: str,
    sex: Literal["male", "female"],
    neutered: bool,
    date_of_birth: str,
) -> dict:
    """Register a new pet on an owner's account.

    Args:
        owner_id: The owner's account id.
        name: The pet's name.
        species: One of dog, cat, rabbit, guinea_pig, ferret, bird.
        breed: The breed, such as "Beagle" or "Domestic Shorthair"; "Mixed" when unknown.
        sex: "male" or "female".
        neutered: Whether the pet is spayed or neutered.
        date_of_birth: The date of birth (an estimate is fine), written YYYY-MM-DD.
    """
    db.require("owners", owner_id)
    kind = species.strip().lower().replace(" ", "_").replace("-", "_")
    if kind not in SUPPORTED_SPECIES:
        raise ToolError(
            f"Cedar Hollow clinics do not treat {species!r}; we see"
            f" {', '.join(s.replace('_', ' ') for s in SUPPORTED_SPECIES)}"
        )
    born = _parse_date(date_of_birth, "date_of_birth")
    if born > db.today():
        raise ToolError("date_of_birth cannot be in the future")
    pet_name = _capitalize_words(name)
    if not pet_name:
        raise ToolError("the pet needs a name")
    for other in db.find("pets", owner_id=owner_id, status="active"):
        if other["name"].lower() == pet_name.lower() and other["species"] == kind:
            raise ToolError(
                f"the account already has an active {kind} named {pet_name} ({other['pet_id']})"
            )
    return db.insert(
        "pets",
        {
            "pet_id": db.new_id("pets", "P", width=4),
            "owner_id": owner_id,
            "name": pet_name,
            "species": kind,
            "breed": _capitalize_words(breed) or "Mixed",
            "sex": sex,
            "neutered": neutered,
            "date_of_birth": born.isoformat(),
            "weight_kg": None,
            "microchip_id": None,
            "allergies": [],
            "primary_vet_id": None,
            "wellness_plan": False,
            "reminders_enabled": True,
            "status": "active",
            "deceased_reported_on": None,
        },
    )


@tool("write")
def mark_pet_deceased(db: Database, pet_id: str) -> dict:
    """Record that a pet has died: cancels its scheduled appointments without any fee, stops its
    reminders, discontinues its prescriptions and cancels open refill requests.

    Args:
        pet_id: The pet's id.
    """
    pet = db.require("pets", pet_id)
    if pet["status"] != "active":
        raise ToolError(f"{pet['name']} is already recorded as {pet['status']}")
    today = db.today().isoformat()
    cancelled = []
    for appt in db.find("appointments", pet_id=pet_id, status="scheduled"):
        db.update("appointments", appt["appointment_id"], status="cancelled", cancelled_on=today)
        if appt.get("slot_id"):
            db.update("slots", appt["slot_id"], status="open")
        cancelled.append(appt["appointment_id"])
    stopped = []
    for rx in db.find("prescriptions", pet_id=pet_id, status="active"):
        db.update("prescriptions", rx["prescription_id"], status="discontinued")
        stopped.append(rx["prescription_id"])
    for req in db.find("refill_requests", pet_id=pet_id):
        if req["status"] in ("pending", "ready"):
            db.update("refill_requests", req["request_id"], status="cancelled")
    new = db.update(
        "pets",
        pet_id,
        status="deceased",
        deceased_reported_on=today,
        reminders_enabled=False,
        wellness_plan=False,
    )
    return {"pet": new, "cancelled_appointments": cancelled, "discontinued_prescriptions": stopped}
